"""``/undo``, ``/redo`` and ``/rewind`` on a terminal (SPEC 14): the real ``dsh`` on a pty.

The model's changes are allowed at the question (which says what undo covers); the commands
run at the prompt; conflicts are asked about; a rewind puts the withdrawn message back in the
prompt and the model no longer sees the withdrawn turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.testing import StubServer, ToolCalls
from tests.dsh_stdio.test_agent_terminal import PROMPT, Terminal, spawn_terminal
from tests.support import DSH, child_env

pytestmark = pytest.mark.slow


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.md").write_text("# Notes\n")
    return path


@pytest.fixture
def term(stub: StubServer, tmp_path: Path, work: Path) -> Iterator[Terminal]:
    home = tmp_path / "dsh-home"
    env = child_env(stub.url, home, PROMPT_TOOLKIT_NO_CPR="1")
    session = spawn_terminal(DSH, env, work, home)
    try:
        yield session
    finally:
        if session.child.isalive():
            session.child.close(force=True)


def command_turn(term: Terminal, stub: StubServer, line: str, command: str) -> None:
    """A turn whose model runs ``command``, allowed at the question (at the prompt the last
    output ended with)."""
    stub.enqueue(ToolCalls((("bash", json.dumps({"command": command})),)))
    term.keys(line + "\r")
    term.child.expect(r"Allow bash\? [^\r\n]*\(undo covers files in [^\r\n]*\) \[y\]es")
    term.keys("y\r")
    term.child.expect_exact("Tool results: [bash]")
    term.child.expect_exact(PROMPT)  # the turn has ended: its changes are recorded


def at_prompt(term: Terminal, line: str) -> None:
    """A command at the prompt (the one the last output ended with)."""
    term.keys(line + "\r")


def test_undo_takes_back_the_last_turn_and_asks_about_a_conflict(
    term: Terminal, stub: StubServer, work: Path
) -> None:
    term.child.expect_exact(PROMPT)
    command_turn(term, stub, "first", "echo one > a.txt")
    command_turn(term, stub, "second", "echo two > b.txt && echo changed > notes.md")
    (work / "notes.md").write_text("the person's edit\n")
    at_prompt(term, "/undo")
    term.child.expect_exact("notes.md: changed since the turn ended")
    term.child.expect_exact("overwrite them too? [y]es / [N]o (leave them): ")
    term.keys("n\r")
    term.child.expect_exact("[undo turn 2] restored 1: b.txt (removed)")
    assert not (work / "b.txt").exists()
    assert (work / "notes.md").read_text() == "the person's edit\n"
    term.child.expect_exact(PROMPT)
    at_prompt(term, "/undo")  # again: a turn further back
    term.child.expect_exact("[undo turn 1] restored 1: a.txt (removed)")
    term.child.expect_exact(PROMPT)
    at_prompt(term, "/redo")
    term.child.expect_exact("[redo turn 1] restored 1: a.txt")
    assert (work / "a.txt").read_text() == "one\n"
    term.child.expect_exact(PROMPT)
    at_prompt(term, "/session")
    term.child.expect(r"undo +on: a checkpoint before each turn's first change")
    assert term.leave() == 0


def test_rewind_restores_withdraws_and_puts_the_message_back(
    term: Terminal, stub: StubServer, work: Path
) -> None:
    term.child.expect_exact(PROMPT)
    command_turn(term, stub, "make a", "echo one > a.txt")
    command_turn(term, stub, "make b", "echo two > b.txt")
    at_prompt(term, "/rewind")
    term.child.expect(r"  +1  make a  \[a\.txt\]")
    term.child.expect(r"  +2  make b  \[b\.txt\]")
    term.child.expect_exact("rewind to turn (its number; Enter: none): ")
    term.keys("1\r")
    term.child.expect_exact("[rewind to turn 1 (files of turns 1, 2)] restored 2")
    term.child.expect_exact(PROMPT)
    assert not (work / "a.txt").exists() and not (work / "b.txt").exists()
    term.keys(" differently\r")  # after the withdrawn message, which is in the prompt
    term.child.expect_exact("You said: make a differently")
    sent = [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == ["make a differently"]  # the withdrawn turns are gone from what it sees
    assert term.leave() == 0
