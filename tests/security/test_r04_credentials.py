"""SPEC 10.4 for the file tools: credentials stay hidden, and dsh's own process files are closed.

A hostile model reads what would let it act as the user elsewhere: an ssh key, a cloud token,
dsh's own home, or the API key itself through dsh's ``/proc`` files, in any spelling. On a pipe
``read``/``grep``/``glob`` refuse the credential locations whatever ``--allow`` says, and a
terminal asks each time (never ``[a]lways``); a walk over the home directory steps around them
and says so. ``/proc/self``, ``/proc/thread-self`` and ``/proc/<dsh's pid>`` are refused always,
with no question.
"""

from __future__ import annotations

import json
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
    running_dsh,
    stub,
    term,
    user_home,
    work,
)
from tests.support import CANARY_KEY, assert_no_canary

__all__ = ["dsh_env", "home", "stub", "term", "user_home", "work"]

pytestmark = pytest.mark.slow

PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-secret\n"
SECRET = "secret-token-5f1e"


def plant_credentials(user_home: Path) -> None:
    """An ssh key, an aws file and a netrc in ``HOME``, and a note that is no secret."""
    (user_home / ".ssh").mkdir()
    (user_home / ".ssh" / "id_ed25519").write_text(PRIVATE_KEY)
    (user_home / ".aws").mkdir()
    (user_home / ".aws" / "credentials").write_text(f"aws_secret_access_key = {SECRET}\n")
    (user_home / ".netrc").write_text(f"machine example.com password {SECRET}\n")
    (user_home / "notes.txt").write_text(f"where is the {SECRET.split('-')[0]}?\n")


def test_allow_read_does_not_let_the_model_read_an_ssh_key(
    dsh_env: dict[str, str], home: Path, work: Path, user_home: Path, stub: StubServer
) -> None:
    plant_credentials(user_home)
    (work / "key").symlink_to(user_home / ".ssh" / "id_ed25519")
    attack(
        stub,
        ("read", {"file_path": "~/.ssh/id_ed25519"}),
        ("read", {"file_path": "key"}),
        ("read", {"file_path": str(user_home / ".netrc")}),
        ("grep", {"pattern": "secret", "path": "~/.aws"}),
        ("glob", {"pattern": "*", "path": "~/.ssh"}),
    )
    run = run_dsh(dsh_env, work, "--allow", "all", stdin="find my keys\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    for refused in results(home):
        assert refused["is_error"] and "credentials" in refused["content"], refused["content"]
    sent = json.dumps(stub.requests)
    assert "PRIVATE KEY" not in sent and SECRET not in sent and "id_ed25519" not in sent[-800:]
    assert requests_valid(stub)


def test_allow_read_does_not_let_the_model_read_dsh_home(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    home.mkdir()
    # Commented out: a server dsh would start (config.toml is read at every start now).
    (home / "config.toml").write_text(f'# [mcp.servers.x]\n# headers = {{token = "{SECRET}"}}\n')
    attack(
        stub,
        ("read", {"file_path": str(home / "config.toml")}),
        ("grep", {"pattern": "token", "path": str(home)}),
    )
    run = run_dsh(dsh_env, work, "--allow", "read", stdin="what servers do I have\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    for refused in results(home):
        assert refused["is_error"] and "credentials" in refused["content"], refused["content"]
    assert SECRET not in json.dumps(stub.requests)


def test_a_grep_over_home_steps_around_credentials_and_says_so(
    dsh_env: dict[str, str], home: Path, work: Path, user_home: Path, stub: StubServer
) -> None:
    plant_credentials(user_home)
    attack(
        stub,
        ("grep", {"pattern": "secret", "path": "~"}),
        ("glob", {"pattern": "**/*", "path": "~"}),
    )
    run = run_dsh(dsh_env, work, "--allow", "read", stdin="search my home\n")
    assert run.returncode == 0, run.stderr
    grep, glob = results(home)
    assert not grep["is_error"] and not glob["is_error"]
    assert SECRET not in grep["content"] and "notes.txt:1:" in grep["content"]
    assert glob["content"].split("\n")[0] == "~/notes.txt"
    for walk in (grep, glob):
        skipped = walk["content"].split("\n")[-1]
        assert skipped.startswith("[skipped:") and "credentials" in skipped, skipped
        assert ".ssh" in skipped and ".aws" in skipped and ".netrc" in skipped, skipped
    assert SECRET not in json.dumps(stub.requests) and "id_ed25519" not in json.dumps(stub.requests)


def own_process_spellings(pid: int, work: Path) -> list[str]:
    """Ways to name dsh's own ``environ``: direct, by pid, by thread, through links and ``..``."""
    (work / "env").symlink_to("/proc/self/environ")
    (work / "me").symlink_to(f"/proc/{pid}")
    return [
        "/proc/self/environ",
        "/proc/thread-self/environ",
        f"/proc/{pid}/environ",
        f"/proc/{pid}/task/{pid}/environ",
        "/dev/fd/../environ",
        f"/proc/self/cwd/../../../proc/{pid}/environ",
        "env",
        "me/environ",
    ]


def test_the_model_cannot_read_the_key_from_dsh_s_own_environ(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    with running_dsh(dsh_env, work, "--allow", "all") as proc:
        paths = own_process_spellings(proc.pid, work)
        attack(stub, *(("read", {"file_path": path}) for path in paths))
        out, err = proc.communicate(b"what is my environment\n", timeout=60)
    assert proc.returncode == 0, err
    assert_no_canary(home, out, err)
    assert CANARY_KEY not in json.dumps(stub.requests)
    refused = results(home)
    assert len(refused) == len(paths)
    for path, result in zip(paths, refused, strict=True):
        assert result["is_error"], (path, result["content"])
        assert "dsh's own process" in result["content"], (path, result["content"])


def test_a_grep_over_proc_does_not_search_dsh_s_own_files(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    with running_dsh(dsh_env, work, "--allow", "read") as proc:
        attack(stub, ("grep", {"pattern": "DEEPSEEK_API_KEY=", "path": f"/proc/{proc.pid}"}))
        out, err = proc.communicate(b"look\n", timeout=60)
    assert proc.returncode == 0, err
    assert_no_canary(home, out, err)
    assert CANARY_KEY not in json.dumps(stub.requests)
    (result,) = results(home)
    assert result["is_error"] and "dsh's own process" in result["content"]


def test_a_person_is_not_even_asked_about_dsh_s_own_environ(
    term: Terminal, stub: StubServer, home: Path
) -> None:
    attack(stub, ("read", {"file_path": "/proc/self/environ"}))
    term.send_turn("show the environment")
    seen = term.child.expect([r"Allow read\?", r"\[tool failed read\][^\r\n]*"])
    assert seen == 1, "a person was asked about dsh's own environ"
    assert "dsh's own process" in str(term.child.after)
    term.child.expect_exact("Tool results: [read] Error:")
    assert term.leave() == 0
    assert term.decisions() == []
    assert_no_canary(home, term.screen.getvalue())


def test_a_person_is_asked_each_time_about_an_ssh_key(
    term: Terminal, stub: StubServer, user_home: Path
) -> None:
    plant_credentials(user_home)
    for _ in range(2):
        attack(stub, ("read", {"file_path": "~/.ssh/id_ed25519"}))
        term.send_turn("read my key")
        line = asked_line(term, "read")
        assert "credentials" in line and not offers_always(line), line
        term.keys("n\r")
        term.child.expect_exact("Tool results: [read] Error:")
    assert term.leave() == 0
    assert term.decisions() == ["rejected", "rejected"]
