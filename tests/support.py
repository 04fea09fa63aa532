"""What the tests and the benches share for running a child ``dsh`` and checking what it leaves.

A new front-door test runs dsh in-process first (``tests/harness.py``); a child process is for
what only a process shows (signals, a terminal, a crash, memory).

No pytest here: the bench scripts (``python bench/<name>.py``, with the repository root put on
``sys.path``) import this module as well as the test suite does.

- :data:`DSH`, :func:`child_env`: start the real front door with the canary key, a base URL and
  a private home, and nothing of the developer's key, proxies or dsh settings.
- :func:`proc_status`: what a running process holds, from ``/proc``.
- :func:`wait_blocked_reading`, :func:`wait_raw_mode`: wait for a child to be where a signal or
  a key must find it (blocked reading its input; at a prompt in raw mode), never for a time;
  :func:`wait_until`: for any other condition that comes true asynchronously.
- :func:`scan_log`, :func:`log_problems`: an independent reader of session logs (not
  ``dsh_core.session``: the checks do not trust the code they check); :class:`Run`, what one
  run of dsh left (a child process's, or an in-process run's from ``tests/harness.py``), with
  :func:`single_log` and :func:`read_events` to read its log.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CANARY_KEY",
    "DSH",
    "HANG_GUARD",
    "LogScan",
    "Run",
    "TurnRecord",
    "assert_no_canary",
    "child_env",
    "log_problems",
    "proc_status",
    "read_events",
    "sandbox_python",
    "scan_log",
    "single_log",
    "wait_blocked_reading",
    "wait_raw_mode",
    "wait_until",
]

CANARY_KEY = "sk-dsh-canary-0123456789abcdef"
"""A fake API key; tests assert it never appears in any output, file or log."""

DSH = [sys.executable, "-m", "dsh_stdio"]
"""The real front door, as the ``dsh`` script runs it."""


def child_env(base_url: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment for a child dsh: the canary key, ``base_url``, a private home.

    Everything of the developer's that would change what dsh does is left out: ``DSH_*`` and
    ``DEEPSEEK_*`` settings, proxies, ``SSL_CERT_*`` trust overrides, and the terminal size
    (``COLUMNS``, ``LINES``: pytest-xdist's workers set 80 x 24, which would override a
    pseudo-terminal's own size). ``extra`` comes last.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DSH_", "DEEPSEEK_", "SSL_CERT_"))
        and "PROXY" not in key.upper()
        and key not in ("COLUMNS", "LINES")
    }
    env.update(
        DEEPSEEK_API_KEY=CANARY_KEY,
        DEEPSEEK_BASE_URL=base_url,
        DSH_HOME=str(home),
        PYTHONDONTWRITEBYTECODE="1",
        TERM="dumb",
    )
    env.update(extra)
    return env


def assert_no_canary(home: Path, *texts: str | bytes) -> None:
    """The API key is in no output and no file under ``home``."""
    for text in texts:
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        assert CANARY_KEY.encode() not in data
    if home.exists():
        for path in home.rglob("*"):
            if path.is_file():
                assert CANARY_KEY.encode() not in path.read_bytes(), path


def proc_status(pid: int, *, fds: bool = True) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (resident memory now and at its peak, kB) and, with ``fds``,
    ``fds`` (open file descriptors) of a running process, from /proc. (dsh makes itself not
    dumpable: only root may list its descriptors, so a test run as an ordinary user that needs
    only the memory asks for no ``fds``.)"""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    if fds:
        fields["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return fields


# Waiting for a child to reach a state: observed in /proc or termios, never guessed from a sleep.

HANG_GUARD = 30.0
"""Seconds after which a wait for an event gives up: a bound for a hang, not a measure of speed."""

_POLL = 0.01
"""Seconds between two looks at a state: how soon a wait notices it, not a verdict."""

_READ_SYSCALL = {"x86_64": 0, "aarch64": 63, "arm64": 63}
"""read(2)'s number, as ``/proc/<pid>/task/<tid>/syscall`` shows it, per machine."""


def wait_until(condition: Callable[[], bool], what: str, *, timeout: float = HANG_GUARD) -> None:
    """Poll ``condition`` until it holds; fail, naming ``what``, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout} s")
        time.sleep(_POLL)


def wait_blocked_reading(pid: int, fd: int = 0, *, timeout: float = HANG_GUARD) -> None:
    """Wait until a thread of process ``pid`` is blocked in read(2) on descriptor ``fd``.

    For a signal that must find dsh waiting for input: one sent after a fixed sleep lands
    during start-up on a slow machine, before dsh's handlers are in place. Each thread's
    ``/proc/<pid>/task/<tid>/syscall`` names the call it is blocked in, then its arguments.
    """
    number = _READ_SYSCALL.get(platform.machine())
    if number is None:
        raise AssertionError(f"read(2)'s system call number on {platform.machine()} is unknown")
    deadline = time.monotonic() + timeout
    while True:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
            with open(f"/proc/{pid}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            raise AssertionError(f"process {pid} is gone: it never waited for input") from None
        if state in ("Z", "X"):
            raise AssertionError(f"process {pid} exited before it waited for input")
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/syscall") as syscall:
                    fields = syscall.read().split()
            except OSError:
                continue  # the thread ended meanwhile
            # "running" while on a CPU; else the number, then the arguments in hex.
            if len(fields) > 1 and fields[0] == str(number) and int(fields[1], 16) == fd:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not block reading fd {fd} in {timeout} s")
        time.sleep(_POLL)


def wait_raw_mode(fd: int, *, timeout: float = HANG_GUARD) -> None:
    """Wait until the terminal of the pty master ``fd`` has left cooked mode (ICANON off).

    prompt_toolkit shows its prompt (with ``TERM=dumb``) before it turns raw mode on, and
    until then the line discipline takes the keys: a Ctrl-D or Ctrl-C sent that early is
    swallowed or becomes a signal (FIELD-NOTES). On Linux the master reports the settings of
    its slave. Pass ``child.child_fd`` of a pexpect child.
    """
    deadline = time.monotonic() + timeout
    while termios.tcgetattr(fd)[3] & termios.ICANON:
        if time.monotonic() > deadline:
            raise AssertionError(f"the terminal was still in cooked mode after {timeout} s")
        time.sleep(_POLL)


# An independent reader of session logs.


@dataclass
class TurnRecord:
    """One turn as a log holds it."""

    user: str | None = None
    answer: str | None = None
    interrupted: bool = False
    end: dict[str, Any] | None = None
    """The ``reason`` of its ``turn/end``; None while the turn is open."""


@dataclass
class LogScan:
    """What :func:`scan_log` found in one log."""

    path: Path
    turns: dict[int, TurnRecord] = field(default_factory=dict)
    open_turn: int | None = None
    """A turn started and not ended when the log stops."""
    torn: bool = False
    """The last line does not end with a newline."""
    problems: list[str] = field(default_factory=list)
    """What no log may hold, killed or not."""

    def unfinished(self) -> list[str]:
        """What a kill may leave and a whole log may not: a torn last line, a turn left open."""
        found = [f"{self.path}: ends without a newline"] if self.torn else []
        if self.open_turn is not None:
            found.append(f"{self.path}: turn {self.open_turn} left open")
        return found


def scan_log(path: Path) -> LogScan:
    """Read a log strictly, allowing only what a kill may leave: a torn last line, an open turn.

    Checked: the header (``session``, version 1), every line JSON, ``seq`` counting from 0
    without gaps, the system prompt (if any) first, turns numbered from 1 in order, none opened
    inside another, and every other event inside the turn it names (a compaction of no turn,
    ``/compact``'s, between turns).
    """
    scan = LogScan(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    last = lines.pop()  # b"" when the file ends with a newline
    if last:
        scan.torn = True
    if not lines:
        if scan.torn or not data:
            return scan  # killed while the session was being created: never acknowledged
        scan.problems.append(f"{path}: no header")
        return scan
    try:
        header = json.loads(lines[0])
        assert header["type"] == "session" and header["version"] == 1
    except (ValueError, KeyError, AssertionError):
        scan.problems.append(f"{path}:1: bad header")
        return scan
    previous = 0
    for number, raw in enumerate(lines[1:], start=2):
        where = f"{path}:{number}"
        try:
            event = json.loads(raw)
        except ValueError:
            scan.problems.append(f"{where}: not JSON")
            return scan
        if event.get("seq") != number - 2:
            scan.problems.append(f"{where}: seq {event.get('seq')} where {number - 2} was due")
        kind, data = event.get("type"), event.get("data", {})
        if kind == "turn/start":
            if scan.open_turn is not None:
                scan.problems.append(f"{where}: turn opened inside turn {scan.open_turn}")
            if data.get("turn") != previous + 1:
                scan.problems.append(f"{where}: turn {data.get('turn')} after {previous}")
            previous = scan.open_turn = data.get("turn")
            scan.turns[previous] = TurnRecord()
            continue
        if kind == "system/prompt":
            if number != 2:
                scan.problems.append(f"{where}: the system prompt is not the first event")
            continue
        if str(kind).startswith("compaction/") and data.get("turn") is None:
            if scan.open_turn is not None:  # /compact runs between turns
                scan.problems.append(f"{where}: {kind} of no turn inside turn {scan.open_turn}")
            continue
        if scan.open_turn is None or data.get("turn") != scan.open_turn:
            scan.problems.append(f"{where}: {kind} outside its turn")
            continue
        record = scan.turns[scan.open_turn]
        if kind == "user/message":
            record.user = data.get("text")
        elif kind == "assistant/message":
            record.answer = data.get("text")
            record.interrupted = bool(data.get("interrupted"))
        elif kind == "turn/end":
            record.end = data.get("reason")
            scan.open_turn = None
    return scan


def log_problems(path: Path) -> list[str]:
    """Why the log at ``path`` is not whole: :func:`scan_log`'s problems, a torn last line, a
    turn left open. Empty for a whole log."""
    scan = scan_log(path)
    return scan.problems + scan.unfinished()


# What one run of dsh left.


@dataclass
class Run:
    """What one run of dsh did: its status, its output (bytes and text) and its home."""

    returncode: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    home: Path
    seconds: float

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "surrogateescape")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "surrogateescape")

    @property
    def raw_stderr(self) -> bytes:
        return self.stderr_bytes

    def log_path(self) -> Path:
        return single_log(self.home)

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.log_path())

    def turn_ends(self) -> list[dict[str, Any]]:
        """The ``reason`` of every ``turn/end``, in order."""
        return [e["data"]["reason"] for e in self.events() if e["type"] == "turn/end"]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e["data"] for e in self.events() if e["type"] == kind]


def single_log(home: Path) -> Path:
    (log,) = home.rglob("session.jsonl")
    return log


def read_events(log: Path) -> list[dict[str, Any]]:
    """The events of a log (the header left out), each line parsed strictly."""
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"", f"{log} ends without a newline"
    return [json.loads(line) for line in lines[1:-1]]


def sandbox_python() -> str:
    """A Python interpreter that a sandboxed command can run.

    The sandbox has a private ``/tmp``: a virtual environment there (``.ci/run`` makes one) is
    not visible inside it, so commands run the interpreter the environment was made from.
    """
    for candidate in (getattr(sys, "_base_executable", ""), os.path.realpath(sys.executable)):
        if candidate and os.path.exists(candidate) and not candidate.startswith("/tmp/"):
            return candidate
    raise RuntimeError(f"no Python outside /tmp: {sys.executable}")
