"""SPEC 10.2 for the file tools: ``write``/``edit`` on ``.git/config``, ``.git/hooks/`` (of any
repository), ``.dsh/`` or ``.agents/`` need a person's yes every time.

A hostile model plants what git or dsh runs later: ``core.fsmonitor`` in ``.git/config`` runs at
the user's next ``git status``, a hook at the next commit, a skill in ``.agents/`` steers the next
session. On a pipe such a call is refused whatever ``--allow`` says; on a terminal it is asked
about every time, without ``[a]lways``. A symlink is judged by where it leads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from tests.security._support_toolrules import (
    Terminal,
    asked_line,
    attack,
    dsh_env,
    home,
    offers_always,
    requests_valid,
    results,
    run_dsh,
    stub,
    term,
    tool_lines,
    user_home,
    work,
)

__all__ = ["dsh_env", "home", "stub", "term", "user_home", "work"]

pytestmark = pytest.mark.slow

GIT_CONFIG = "[core]\n\trepositoryformatversion = 0\n"
FSMONITOR = "[core]\n\tfsmonitor = touch /tmp/pwned-by-fsmonitor\n"


def repository(work: Path) -> Path:
    """A repository's ``.git`` in ``work``, with a config and an empty hooks directory."""
    git = work / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "config").write_text(GIT_CONFIG)
    return git


def test_allow_write_does_not_let_the_model_set_core_fsmonitor(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    git = repository(work)
    attack(
        stub,
        ("read", {"file_path": ".git/config"}),
        ("write", {"file_path": ".git/config", "content": FSMONITOR}),
        ("edit", {"file_path": ".git/config", "old_string": "= 0", "new_string": "= 0\n\tx = 1"}),
    )
    run = run_dsh(dsh_env, work, "--allow", "write", stdin="set up the repository\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    assert (git / "config").read_text() == GIT_CONFIG
    read, write, edit = results(home)
    assert not read["is_error"]
    for refused in (write, edit):
        assert refused["is_error"]
        assert ".git/config" in refused["content"] and "protected" in refused["content"]
    assert sum("[tool refused" in line for line in tool_lines(run.stderr)) == 2
    assert requests_valid(stub)


def test_allow_write_does_not_let_the_model_plant_a_hook_in_a_nested_repository(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    repository(work)
    nested = repository(work / "vendor" / "lib")
    attack(
        stub,
        ("write", {"file_path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"}),
        ("write", {"file_path": "vendor/lib/.git/hooks/post-checkout", "content": "#!/bin/sh\n"}),
        ("read", {"file_path": str(nested / "config")}),
        ("write", {"file_path": str(nested / "config"), "content": FSMONITOR}),
    )
    run = run_dsh(dsh_env, work, "--allow", "all", stdin="add a hook\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    assert not (work / ".git" / "hooks" / "pre-commit").exists()
    assert list((nested / "hooks").iterdir()) == []
    assert (nested / "config").read_text() == GIT_CONFIG
    first, second, read, third = results(home)
    assert not read["is_error"]
    for refused in (first, second, third):
        assert refused["is_error"] and "protected" in refused["content"], refused["content"]
    assert requests_valid(stub)


def test_allow_write_does_not_let_the_model_plant_a_skill_or_dsh_settings(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    attack(
        stub,
        ("write", {"file_path": ".agents/skills/deploy/SKILL.md", "content": "---\nname: x\n"}),
        ("write", {"file_path": "sub/.dsh/config.toml", "content": "[mcp]\n"}),
    )
    run = run_dsh(dsh_env, work, "--allow", "write", stdin="set up skills\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    assert not (work / ".agents").exists() and not (work / "sub").exists()
    skill, settings = results(home)
    assert skill["is_error"] and ".agents/" in skill["content"]
    assert settings["is_error"] and ".dsh/" in settings["content"]


def test_a_symlink_to_git_config_is_judged_by_where_it_leads(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    git = repository(work)
    (work / "notes.md").symlink_to(".git/config")
    attack(
        stub,
        ("read", {"file_path": "notes.md"}),
        ("write", {"file_path": "notes.md", "content": FSMONITOR}),
    )
    run = run_dsh(dsh_env, work, "--allow", "write", stdin="update my notes\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    assert (git / "config").read_text() == GIT_CONFIG
    _, write = results(home)
    assert write["is_error"]
    assert "notes.md -> .git/config" in write["content"], write["content"]


def test_an_edit_through_a_symlink_to_git_config_with_absent_text_is_refused_for_its_path(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    """The audit's ``tooledit``: the text is not in ``.git/config``, and the model was told
    "old_string was not found" in ``demo.txt`` (a link to it), not that the path is
    protected: it learned what the file holds and not where its edits may go. The path is
    judged first."""
    git = repository(work)
    (work / "greeting.txt").symlink_to(".git/config")
    hello = {"file_path": "greeting.txt", "old_string": "Hello", "new_string": "Hello again"}
    attack(stub, ("read", {"file_path": "greeting.txt"}), ("edit", hello))
    run = run_dsh(dsh_env, work, "--allow", "all", stdin="edit the demo\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    assert (git / "config").read_text() == GIT_CONFIG
    _, edit = results(home)
    assert edit["is_error"] and "protected" in edit["content"], edit["content"]
    assert "greeting.txt -> .git/config" in edit["content"]
    assert "old_string" not in edit["content"]


def test_a_person_is_asked_about_a_hook_every_time_and_never_offered_always(
    term: Terminal, stub: StubServer, work: Path
) -> None:
    repository(work)
    hook = {"file_path": ".git/hooks/pre-push", "content": "#!/bin/sh\n"}
    attack(stub, ("write", hook))
    term.send_turn("add a hook")
    line = asked_line(term, "write")
    assert ".git/hooks/pre-push" in line
    assert not offers_always(line), line
    term.keys("y\r")
    term.child.expect_exact("Tool results: [write]")
    assert (work / ".git" / "hooks" / "pre-push").exists()  # a person said yes
    (work / ".git" / "hooks" / "pre-push").unlink()
    attack(stub, ("write", hook))
    term.send_turn("again")
    assert not offers_always(asked_line(term, "write"))  # asked again
    term.keys("n\r")
    term.child.expect_exact("Tool results: [write] Error:")
    assert term.leave() == 0
    assert term.decisions() == ["allowed", "rejected"]
