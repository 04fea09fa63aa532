"""Running the real ``dsh`` process against loopback servers, and checking what it leaves behind.

Every run here is a real child process on real pipes with the canary key; nothing inside it is
patched. :func:`run_dsh` returns a :class:`Run`; :func:`assert_sane` is the check every run
gets: no traceback, no "internal error", the canary key in no output and no file, and the
session log (when there is one) whole: gapless ``seq``, every turn closed.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

import pytest

from dsh_core.testing import StubServer
from tests.support import (
    DSH,
    Run,
    assert_no_canary,
    child_env,
    log_problems,
    proc_status,
    read_events,
    single_log,
)

REPO = Path(__file__).resolve().parents[2]

OVERSIZED_LINE = b"x" * (300 * 1024) + b"\n"
"""Over the 256 KiB message limit: rejected at once, without a request (a cheap 'next line')."""
OVERSIZED_OUTCOME = (
    "[turn rejected] the message is 300 KiB, over the limit of 256 KiB per message: "
    "shorten it, or send it in parts"
)


def run_dsh(
    env: Mapping[str, str],
    *args: str,
    stdin: bytes = b"",
    timeout: float = 60,
    cwd: Path | None = None,
) -> Run:
    """Run dsh to its end with ``stdin`` on a pipe; the home is ``env["DSH_HOME"]``."""
    started = time.monotonic()
    result = subprocess.run(
        [*DSH, *args],
        input=stdin,
        env=dict(env),
        capture_output=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
    return Run(
        result.returncode,
        result.stdout,
        result.stderr,
        Path(env["DSH_HOME"]),
        time.monotonic() - started,
    )


class Live:
    """A dsh process still running, fed and read a piece at a time (to signal it mid-turn)."""

    def __init__(self, env: Mapping[str, str], *args: str) -> None:
        self.home = Path(env["DSH_HOME"])
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [*DSH, *args],
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self.seen = b""
        """stdout read so far by :meth:`read_until`."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def read_until(self, marker: bytes, stream: str = "stdout", timeout: float = 20) -> bytes:
        """Read ``stream`` until ``marker`` has appeared; return everything read from it so far."""
        pipe: IO[bytes] | None = self.proc.stdout if stream == "stdout" else self.proc.stderr
        assert pipe is not None
        deadline = time.monotonic() + timeout
        data = self.seen if stream == "stdout" else b""
        while marker not in data:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{marker!r} not seen on {stream} within {timeout} s: {data!r}"
                )
            piece = os.read(pipe.fileno(), 65536)
            if not piece:
                raise AssertionError(f"{stream} ended before {marker!r}: {data!r}")
            data += piece
        if stream == "stdout":
            self.seen = data
        return data

    def status(self) -> dict[str, int]:
        """``VmRSS``, ``VmHWM`` (kB) and the open descriptor count of the running process."""
        return proc_status(self.pid)

    def finish(
        self, sig: int | None = None, *, close_stdin: bool = True, timeout: float = 20
    ) -> Run:
        """Signal (optionally), close stdin, and collect the rest of the output."""
        if sig is not None:
            self.proc.send_signal(sig)
        assert self.proc.stdin is not None
        if close_stdin and sig is None:
            self.proc.stdin.close()
        # wait() first: closing stdin right after a signal would race the signal with an EOF.
        self.proc.wait(timeout=timeout)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        out, err = self.proc.stdout.read(), self.proc.stderr.read()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            pipe.close()
        return Run(
            self.proc.returncode,
            self.seen + out,
            err,
            self.home,
            time.monotonic() - self.started,
        )

    def kill(self) -> None:
        """Make sure the process is gone and its pipes closed (after a failed test, too)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()


def assert_log_whole(log: Path) -> None:
    """Gapless seq, turns numbered from 1, each closed before the next opens, none left open;
    the header good, every line whole JSON, every event inside its turn (see ``scan_log``)."""
    problems = log_problems(log)
    assert problems == [], "\n".join(problems)


def assert_sane(run: Run, *, log_whole: bool = True) -> None:
    """What every run must give: no traceback, no internal error, no key anywhere."""
    for text in (run.stdout, run.stderr):
        assert "Traceback" not in text, text[-2000:]
        assert "internal error" not in text, text[-2000:]
    assert_no_canary(run.home, run.stdout_bytes, run.stderr_bytes)
    if log_whole and run.home.exists():
        for log in run.home.rglob("session.jsonl"):
            assert_log_whole(log)


def outcome_lines(stdout: str) -> list[str]:
    """The outcome lines of a transcript (SPEC section 3)."""
    return [line for line in stdout.splitlines() if re.match(r"\[turn [a-z]", line)]


# Fixtures.


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """A stub of its own for each test (a few ms): no queued behaviour or count leaks across."""
    with StubServer() as server:
        yield server


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def env(stub: StubServer, home: Path) -> dict[str, str]:
    """The environment for a child dsh talking to the shared stub."""
    return child_env(stub.url, home)


__all__ = [
    "DSH",
    "OVERSIZED_LINE",
    "OVERSIZED_OUTCOME",
    "REPO",
    "Live",
    "Run",
    "assert_log_whole",
    "assert_no_canary",
    "assert_sane",
    "child_env",
    "outcome_lines",
    "proc_status",
    "read_events",
    "run_dsh",
    "single_log",
]
