"""SPEC 10.11: ``write``/``edit`` never follow a symlink swapped in after the check.

The attack is a race: the call is checked (the path is inside the working directory), and
before the file is written a directory on its way is replaced by a symlink that leads out (a
command the model ran earlier can leave a process behind to do it, or the person is still
reading the question). The write must land where it was checked, or nowhere. A hard link to a
file elsewhere is refused for the same reason: its name is inside, its content is not.

The swap is made deterministic twice: in-process, between ``prepare`` (the check) and ``run``
(the write); and on the real process, while the approval question waits for its answer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from dsh_core.tools import ToolError, Workspace
from dsh_core.tools.edit import EditTool, WriteTool
from dsh_core.tools.read import ReadTool
from tests.dsh_core.tools.test_builtin import complete
from tests.security._support_toolrules import (
    Terminal,
    asked_line,
    attack,
    dsh_env,
    home,
    results,
    run_dsh,
    stub,
    term,
    user_home,
    work,
)

__all__ = ["dsh_env", "home", "stub", "term", "user_home", "work"]


def swap_for_symlink(directory: Path, target: Path) -> None:
    """Put a symlink to ``target`` where ``directory`` was (the old one moved aside)."""
    directory.rename(directory.with_name(directory.name + ".moved"))
    directory.symlink_to(target)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


@pytest.mark.parametrize(
    "path", ["docs/new.md", "docs/pkg/deep/mod.py"], ids=["new file", "new directories"]
)
def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    work: Path, outside: Path, tmp_path: Path, path: str
) -> None:
    (work / "docs").mkdir()
    write = WriteTool(Workspace.at(work, tmp_path / "out"))
    invocation = write.prepare({"file_path": path, "content": "planted\n"})
    assert invocation.access.outside == ()  # checked: inside
    swap_for_symlink(work / "docs", outside)
    with pytest.raises(ToolError, match="symlink"):
        complete(invocation)
    assert list(outside.iterdir()) == []


def test_an_edited_file_swapped_for_a_symlink_is_not_written_through(
    work: Path, outside: Path, tmp_path: Path
) -> None:
    victim = outside / "victim.txt"
    victim.write_text("old\n")
    (work / "notes").mkdir()
    (work / "notes" / "a.txt").write_text("old\n")
    workspace = Workspace.at(work, tmp_path / "out")
    complete(ReadTool(workspace).prepare({"file_path": "notes/a.txt"}))
    edit = EditTool(workspace).prepare(
        {"file_path": "notes/a.txt", "old_string": "old", "new_string": "new"}
    )
    swap_for_symlink(work / "notes", outside)
    (outside / "a.txt").hardlink_to(victim)  # same name, another file
    with pytest.raises(ToolError):
        complete(edit)
    assert victim.read_text() == "old\n"


@pytest.mark.slow
def test_a_hard_link_to_a_file_outside_is_not_edited_under_allow_write(
    dsh_env: dict[str, str], home: Path, work: Path, outside: Path, stub: StubServer
) -> None:
    secret = outside / "authorized_keys"
    secret.write_text("ssh-ed25519 AAAA user\n")
    os.link(secret, work / "keys.txt")
    attack(
        stub,
        ("read", {"file_path": "keys.txt"}),
        ("edit", {"file_path": "keys.txt", "old_string": "user", "new_string": "attacker"}),
        ("write", {"file_path": "keys.txt", "content": "ssh-ed25519 BBBB attacker\n"}),
    )
    run = run_dsh(dsh_env, work, "--allow", "write", stdin="fix the keys\n")
    assert run.returncode == 0, run.stderr
    assert os.stat(work / "keys.txt").st_ino == secret.stat().st_ino  # still one file, unchanged
    assert secret.read_text() == "ssh-ed25519 AAAA user\n"
    _, edit, write = results(home)
    for refused in (edit, write):
        assert refused["is_error"] and "hard link" in refused["content"], refused["content"]


@pytest.mark.slow
def test_a_directory_swapped_while_the_question_waits_is_not_followed(
    term: Terminal, stub: StubServer, work: Path, outside: Path
) -> None:
    (work / "docs").mkdir()
    attack(stub, ("write", {"file_path": "docs/new.md", "content": "planted\n"}))
    term.send_turn("write the docs")
    asked_line(term, "write")  # checked: the question is on screen
    swap_for_symlink(work / "docs", outside)
    term.keys("y\r")
    term.child.expect(r"\[tool failed write\][^\r\n]*symlink")
    term.child.expect_exact("Tool results: [write] Error:")
    assert term.leave() == 0
    assert list(outside.iterdir()) == []
    assert term.decisions() == ["allowed"]
