"""Tools on a terminal, end to end: the approval question, its answers, and Ctrl-C.

The real ``dsh`` on a pseudo-terminal (pexpect, ``TERM=dumb``) in a working directory holding
``demo.txt``, against the stub server (trigger words, or scripted :class:`ToolCalls`). Every wait
is for something dsh shows, writes to its session log, or leaves in ``/proc`` and termios; the
assertions are about outcomes (what was shown, decided, recorded, left running), never times.

Here: what needs the terminal or the process (text typed ahead, Ctrl-C and SIGTERM as signals,
a running command's processes ended). The answers and what the question shows run in-process
in ``test_terminal.py``; the helpers below serve the other pexpect tests too.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import shlex
import signal
import termios
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest

from dsh_core.testing import Held, StubServer, ToolCalls
from tests.support import DSH, HANG_GUARD, assert_no_canary, wait_raw_mode, wait_until

__all__ = ["CHOICES", "PROMPT", "Terminal", "spawn_terminal"]

pytestmark = pytest.mark.slow

PROMPT = "> "
CHOICES = (
    r'\[y\]es / \[N\]o(?: / \[a\]lways (?:this session|for "[^"]*"|for this tool))?'
    r"(?: / \[s\] always for server [A-Za-z0-9_-]+)?: "
)
"""The choices, as a pattern: "always" for the session, for ``bash`` for one first word (and
not offered for a command that is more than one simple command), for an MCP tool the tool or
its whole server."""
CHOICES_ONCE = r"\[y\]es / \[N\]o: "
SANDBOX_NOTE = r" \((?:not )?sandboxed[^\r\n]*\)"
UNDO_NOTE = r"(?: \(undo covers files in [^\r\n]*?\))?"
"""What a command's or an MCP call's question says of undo when checkpoints are on (SPEC 14)."""
"""What a ``bash`` question says about the sandbox: either, whichever this machine gets."""

# -- waiting for a state, never for a time ------------------------------------------------------


def _raw(child: pexpect.spawn) -> bool:
    return not termios.tcgetattr(child.child_fd)[3] & termios.ICANON


def _command_lines() -> dict[int, bytes]:
    """Each process's command line, NUL-separated (a zombie's is empty)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue  # it ended meanwhile
    return found


def _children(pid: int) -> list[int]:
    """The processes that ``pid`` started (the thread ``pid``'s children)."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _running(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``: the shell and its sleep."""
    return [pid for pid, line in _command_lines().items() if marker.encode() in line]


def _sleeping(marker: str) -> bool:
    """``sleep <marker>`` itself runs: the shell got past what comes before it."""
    argv = [b"sleep", marker.encode()]
    return any(line.split(b"\0")[:2] == argv for line in _command_lines().values())


# -- one dsh on a terminal ------------------------------------------------------------------------


@dataclass
class Terminal:
    """One dsh on a pty, what it showed so far, and the home its session logs go to."""

    child: pexpect.spawn
    screen: io.StringIO
    home: Path

    def send_turn(self, line: str) -> None:
        """Wait for the prompt, then send ``line`` as a turn."""
        self.child.expect_exact(PROMPT)
        self.child.sendline(line)

    def expect_question(
        self, tool: str, shown: str, note: str | None = None, *, once: bool = False
    ) -> None:
        """The question's prompt line: ``Allow <tool>? <shown> [note] [y]es / [n]o / ...``.

        ``note`` is the remark after the call; by default, for ``bash`` whether it runs in the
        sandbox, for other tools none. ``once``: a call outside the working directory or
        leaving the sandbox, for which "always" is not offered.
        """
        default = SANDBOX_NOTE if tool == "bash" else ""
        remark = default if note is None else " " + re.escape(note) + UNDO_NOTE
        choices = CHOICES_ONCE if once else CHOICES
        self.child.expect(rf"Allow {re.escape(tool)}\? {re.escape(shown)}{remark} {choices}")

    def keys(self, keys: str) -> None:
        """Type ``keys`` once the question (or prompt) reads keys: raw mode, not cooked.

        Before that the line discipline takes them: Ctrl-C and Ctrl-D would become a signal
        and an end of file instead of keys (FIELD-NOTES).
        """
        wait_raw_mode(self.child.child_fd)
        self.child.send(keys)

    def leave(self) -> int:
        """Ctrl-D at the prompt; the exit status."""
        self.child.expect_exact(PROMPT)
        self.keys("\x04")
        self.child.expect(pexpect.EOF)
        self.child.close()
        return int(self.child.exitstatus)

    def logs(self) -> dict[str, Path]:
        """The session logs by session id."""
        return {path.parent.name: path for path in self.home.rglob("session.jsonl")}

    def events(self, kind: str, session: str | None = None) -> list[dict[str, Any]]:
        """The ``data`` of each event of type ``kind`` in a session's log (default: the only
        one)."""
        logs = self.logs()
        if session is None:
            [log] = logs.values()
        else:
            log = logs[session]
        # Line 1 is the header; the last piece is empty, or a line dsh is still writing.
        lines = log.read_text().split("\n")[1:-1]
        return [event["data"] for event in map(json.loads, lines) if event["type"] == kind]

    def decisions(self, session: str | None = None) -> list[str]:
        return [data["outcome"] for data in self.events("approval/decided", session)]

    def turn_ends(self, session: str | None = None) -> list[dict[str, Any]]:
        return [data["reason"] for data in self.events("turn/end", session)]


def spawn_terminal(argv: list[str], env: dict[str, str], cwd: Path, home: Path) -> Terminal:
    """Start ``argv`` on a pty of 24 x 200 (``env`` sets ``TERM=dumb``), its screen recorded."""
    screen = io.StringIO()
    child = pexpect.spawn(
        argv[0],
        argv[1:],
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        timeout=HANG_GUARD,
        dimensions=(24, 200),
    )
    child.logfile_read = screen
    return Terminal(child, screen, home)


def bash(command: str) -> ToolCalls:
    """One step asking for one ``bash`` call."""
    return ToolCalls((("bash", json.dumps({"command": command})),))


def unique_sleep() -> str:
    """``1000.<digits>``: a sleep nobody else runs, to find in /proc."""
    return f"1000.{secrets.randbelow(10**9):09d}"


# -- what only a real terminal shows ------------------------------------------------------------


def test_typed_ahead_text_does_not_answer_the_question(
    term: Terminal, stub: StubServer, workdir: Path
) -> None:
    gate = threading.Event()
    stub.enqueue(Held(gate, bash("touch typed-ahead-ran")))
    try:
        term.send_turn("run something")
        term.child.expect_exact("… waiting for the model")
        term.child.send("y\r")  # typed while the model works: it must not count as a yes
        term.child.expect_exact("queued: y")  # (SPEC 17) and sent as the next turn
    finally:
        gate.set()  # the model answers: the question comes after the typing
    term.expect_question("bash", "$ touch typed-ahead-ran")
    term.keys("n\r")
    taken = term.child.expect_exact(["[tool refused bash]", "[tool bash exit"])
    assert taken == 0, "the line typed ahead answered the question"
    term.child.expect_exact("You said: y")  # the queued line: the next turn
    term.send_turn("after")
    term.child.expect_exact("You said: after")
    assert term.leave() == 0
    assert term.decisions() == ["rejected"]
    assert not (workdir / "typed-ahead-ran").exists()
    texts = [data["text"] for data in term.events("user/message")]
    assert texts == ["run something", "y", "after"]


# -- Ctrl-C -------------------------------------------------------------------------------------


def test_ctrl_c_at_the_question_aborts_the_turn(term: Terminal, stub: StubServer) -> None:
    stub.enqueue(bash("echo never"))
    term.send_turn("run something")
    term.expect_question("bash", "$ echo never")
    term.keys("\x03")  # the key, read by the question
    term.child.expect_exact("[turn aborted] user\r\n")
    stub.enqueue(bash("echo never either"))
    term.send_turn("run something else")
    term.expect_question("bash", "$ echo never either")
    # The signal, whether or not the question reads keys yet: the same outcome.
    term.child.kill(signal.SIGINT)
    term.child.expect_exact("[turn aborted] user\r\n")
    term.send_turn("and now")
    term.child.expect_exact("You said: and now")  # a valid next request (the stub checks it)
    assert term.leave() == 0
    assert term.decisions() == ["cancelled", "cancelled"]
    assert term.events("tool/call") == []
    codes = [result["error"]["code"] for result in term.events("tool/result")]
    assert codes == ["ABORTED_BEFORE_DISPATCH"] * 2
    assert term.turn_ends() == [{"kind": "aborted", "reason": "user"}] * 2 + [{"kind": "completed"}]
    roles = [m["role"] for m in stub.requests[-1]["messages"]]
    assert roles[1:] == ["user", "assistant", "tool"] * 2 + ["user"]


def test_sigterm_at_the_question_exits_143_with_the_terminal_restored(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    # Through a shell that reports the status and the terminal's modes once dsh has gone.
    script = f"{shlex.join(DSH)}; echo status=$?; stty -a"
    term = spawn_terminal(["bash", "-c", script], dsh_env, workdir, home)
    try:
        stub.enqueue(bash("echo never"))
        term.send_turn("run something")
        term.expect_question("bash", "$ echo never")
        wait_until(lambda: _raw(term.child), "the question to read keys")
        [dsh] = _children(term.child.pid)
        os.kill(dsh, signal.SIGTERM)
        term.child.expect_exact("[turn aborted] shutdown\r\n")
        term.child.expect_exact("status=143\r\n")
        term.child.expect(pexpect.EOF)
    finally:
        term.child.close(force=True)
    modes = term.child.before.split()
    assert "icanon" in modes and "echo" in modes and "isig" in modes  # cooked, as it was
    assert_no_canary(home, term.screen.getvalue())
    assert term.decisions() == ["cancelled"]
    assert term.turn_ends() == [{"kind": "aborted", "reason": "shutdown"}]


def _cancel_running(term: Terminal, stub: StubServer, command: str, marker: str) -> None:
    """Ask for ``command``, answer yes, and press Ctrl-C once it runs; back at the prompt."""
    stub.enqueue(bash(command))
    try:
        term.send_turn("run it")
        term.expect_question("bash", f"$ {command}")
        term.keys("y\r")
        # The tool's output is not shown live: the log and /proc say that it runs.
        wait_until(lambda: term.events("tool/call") != [], "the call to start")
        wait_until(lambda: _sleeping(marker), "the command's sleep")
        term.child.sendintr()  # cooked mode: the terminal sends SIGINT to dsh
        term.child.sendintr()  # a second Ctrl-C cannot cut the ending short
        term.child.expect_exact("[turn aborted] user\r\n", timeout=HANG_GUARD)
        term.child.expect_exact(PROMPT)
        # Killed processes leave /proc a moment after the kill: wait, bounded, for that.
        wait_until(lambda: _running(marker) == [], "the command's processes to end")
    finally:
        for pid in _running(marker):  # our own command, if dsh left it behind
            os.kill(pid, signal.SIGKILL)
    term.child.sendline("next")
    term.child.expect_exact("You said: next")


def test_ctrl_c_ends_a_running_command_and_keeps_its_output(
    term: Terminal, stub: StubServer
) -> None:
    marker = unique_sleep()
    _cancel_running(term, stub, f"echo started; sleep {marker}", marker)
    assert term.leave() == 0
    [result] = term.events("tool/result")
    assert result["is_error"]
    assert result["error"]["code"] == "ABORTED"
    # SIGINT ends it; a machine slow enough to take 2 s over that also sends SIGTERM.
    assert result["error"]["message"].startswith("the command was cancelled (sent SIGINT")
    assert "started" in result["content"]  # the partial output reaches the model
    assert term.turn_ends()[0] == {"kind": "aborted", "reason": "user"}


def test_ctrl_c_escalates_to_sigkill_for_a_command_that_ignores_signals(
    term: Terminal, stub: StubServer
) -> None:
    marker = unique_sleep()
    # Ignored signals stay ignored in the children: only SIGKILL ends the loop and its sleep.
    command = f"trap '' INT TERM; echo ready; while :; do sleep {marker}; done"
    _cancel_running(term, stub, command, marker)
    assert term.leave() == 0
    [result] = term.events("tool/result")
    assert result["error"]["code"] == "ABORTED"
    assert result["error"]["message"] == (
        "the command was cancelled (sent SIGINT, then SIGTERM, then SIGKILL)"
    )
    assert "ready" in result["content"]
    assert term.turn_ends()[0] == {"kind": "aborted", "reason": "user"}
