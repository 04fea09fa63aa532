"""Questions on the controlling terminal (SPEC 15): ``git diff | dsh "fix it"`` typed in a shell.

dsh runs in a pseudo-terminal that is its controlling terminal, with stdin a pipe from
``printf`` inside it: the question is asked on ``/dev/tty`` and answered there, as ``sudo`` asks
for a password. Under ``setsid`` the same command has no controlling terminal, and the call is
refused as on any pipe. Attacks on it (``y`` lines on stdin) are in
``tests/security/test_s15_piped_answers.py``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import StubServer
from tests.dsh_stdio.test_agent_terminal import Terminal, bash, spawn_terminal
from tests.support import DSH, read_events, single_log

pytestmark = pytest.mark.slow


def piped(stdin: str, *args: str, setsid: bool = False) -> list[str]:
    """``bash -c 'printf STDIN | [setsid -w] dsh ARGS'``: dsh's stdin a pipe, its stdout and
    stderr the terminal."""
    dsh = " ".join(shlex.quote(part) for part in [*DSH, *args])
    before = "setsid -w " if setsid else ""
    return ["bash", "-c", f"printf {shlex.quote(stdin)} | {before}{dsh}"]


def ended(term: Terminal) -> int:
    term.child.expect(pexpect.EOF)
    term.child.close()
    status: int | None = term.child.exitstatus
    assert status is not None
    return status


def decisions(home: Path) -> list[str]:
    events = read_events(single_log(home))
    return [e["data"]["outcome"] for e in events if e["type"] == "approval/decided"]


def test_a_piped_one_shot_asks_on_the_controlling_terminal(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    stub.enqueue(bash("ls -la"))
    term = spawn_terminal(piped("a diff\n", "fix it"), dsh_env, workdir, home)
    try:
        term.expect_question("bash", "$ ls -la")
        term.keys("y\r")
        term.child.expect_exact("Tool results: [bash] total")
        assert ended(term) == 0
    finally:
        term.child.close(force=True)
    assert decisions(home) == ["allowed"]


def test_a_persons_no_on_the_terminal_is_not_exit_3(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    stub.enqueue(bash("ls -la"))
    term = spawn_terminal(piped("a diff\n", "fix it"), dsh_env, workdir, home)
    try:
        term.expect_question("bash", "$ ls -la")
        term.keys("n\r")
        term.child.expect_exact("[tool refused bash]")
        assert ended(term) == 0
    finally:
        term.child.close(force=True)
    assert decisions(home) == ["rejected"]


def test_pipe_mode_asks_there_too_and_its_lines_stay_turns(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    stub.enqueue(bash("ls -la"))
    term = spawn_terminal(piped("list the files\ny\n"), dsh_env, workdir, home)
    try:
        term.expect_question("bash", "$ ls -la")
        term.keys("n\r")
        term.child.expect_exact("You said: y")  # the line "y" was the next turn
        assert ended(term) == 0
    finally:
        term.child.close(force=True)
    assert decisions(home) == ["rejected"]
    events = read_events(single_log(home))
    turns = [e["data"]["text"] for e in events if e["type"] == "user/message"]
    assert turns == ["list the files", "y"]


def test_without_a_controlling_terminal_the_call_is_refused(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    stub.enqueue(bash("ls -la"))
    term = spawn_terminal(piped("y\n", "fix it", setsid=True), dsh_env, workdir, home)
    try:
        term.child.expect_exact('tool "bash" needs approval and stdin is not a terminal')
        assert ended(term) == 3
    finally:
        term.child.close(force=True)
    assert "Allow bash?" not in term.screen.getvalue()
    assert decisions(home) == ["unavailable"]


def test_usage_shows_the_sessions_and_the_last_turns_dollars(term: Terminal) -> None:
    from tests.dsh_stdio.test_headless import FLASH, dollars, shown

    term.send_turn("first question")
    term.send_turn("second question")
    term.send_turn("/usage")
    term.child.expect(r"cost +(\$[\d.]+) \(the prompt cache saved (\$[\d.]+)\)\r\n")
    session, saved = term.child.match.groups()
    term.child.expect(r"last turn +(\$[\d.]+) \(cache saved \$[\d.]+\)\r\n")
    last = term.child.match.group(1)
    assert term.leave() == 0
    events = read_events(single_log(term.home))
    usages = [e["data"] for e in events if e["type"] == "usage"]
    assert session == shown(sum(dollars(u, FLASH) for u in usages))
    assert saved == shown(sum(u["cached_tokens"] * (FLASH[1] - FLASH[0]) / 1e6 for u in usages))
    assert last == shown(dollars(usages[-1], FLASH))
