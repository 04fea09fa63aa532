"""What the display attacks share (SPEC 10.5, 10.9, 10.10): fixtures, ``dsh`` on a pipe
(in-process) or on a terminal (the real process, pexpect), and the checks that the key is
nowhere and that nothing raw was shown.

Fixtures are imported by the test files that use them, as ``<name>_fixture`` (the fixture is
called ``<name>``): no conftest here, others write tests in this directory too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import ManualClock, StubServer, ToolCalls
from tests.dsh_stdio.test_agent_terminal import Terminal, spawn_terminal
from tests.harness import run_in_process
from tests.support import CANARY_KEY, DSH, Run, assert_no_canary, child_env, read_events, single_log

__all__ = [
    "CANARY_KEY",
    "MASK",
    "RAW",
    "Run",
    "call",
    "env_fixture",
    "events_of",
    "home_fixture",
    "no_key_in_requests",
    "pipe",
    "stub_fixture",
    "terminal",
    "work_fixture",
]

MASK = "[DEEPSEEK_API_KEY]"
"""What the key's value is shown, stored and sent as."""

RAW = ("\x1b", "\x07", "\x9b", "\u200b", "\u200d", "\u202e", "\u2060", "\u2066", "\ufeff")
"""Characters that must never reach a person raw: ESC, BEL, CSI, zero-width, bidi, BOM."""


@pytest.fixture(name="stub")
def stub_fixture() -> Iterator[StubServer]:
    """A stub server for this test alone (its queue and requests start empty)."""
    with StubServer() as server:
        yield server


@pytest.fixture(name="home")
def home_fixture(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture(name="work")
def work_fixture(tmp_path: Path) -> Path:
    """The working directory dsh runs in, holding ``demo.txt``."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "demo.txt").write_text("Hello\n")
    return path


@pytest.fixture(name="env")
def env_fixture(stub: StubServer, home: Path) -> dict[str, str]:
    """A child dsh's environment: the canary key, the stub, a private home, ``TERM=dumb``."""
    return child_env(stub.url, home, PROMPT_TOOLKIT_NO_CPR="1")


class terminal:  # used as a function: `with terminal(env, cwd, home) as term:`
    """``dsh`` (or ``argv``) on a 24 x 200 pseudo-terminal; on leaving, it is closed and its
    screen and home are checked for the key."""

    def __init__(
        self, env: dict[str, str], cwd: Path, home: Path, argv: list[str] | None = None
    ) -> None:
        self._term = spawn_terminal(argv or DSH, env, cwd, home)

    def __enter__(self) -> Terminal:
        return self._term

    def __exit__(self, *exc: object) -> None:
        if self._term.child.isalive():
            self._term.child.close(force=True)
        assert_no_canary(self._term.home, self._term.screen.getvalue())


def pipe(env: dict[str, str], cwd: Path, *args: str, stdin: str = "") -> Run:
    """Run dsh to its end in ``cwd`` with ``stdin`` as its input, as on a pipe: in-process
    (``tests/harness.py``), since what a pipe run shows and stores needs no process. A retry's
    wait costs no time (a clock that jumps)."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd, clock=ManualClock(autojump=True))


def call(name: str, **arguments: Any) -> ToolCalls:
    """One step asking for one call of ``name``."""
    return ToolCalls(((name, json.dumps(arguments)),))


def events_of(home: Path, kind: str) -> list[dict[str, Any]]:
    """The ``data`` of the events of type ``kind`` in the one session log under ``home``."""
    return [e["data"] for e in read_events(single_log(home)) if e["type"] == kind]


def no_key_in_requests(stub: StubServer) -> None:
    """What the model was sent (every request body) holds no key: only the header does."""
    for request in stub.requests:
        assert CANARY_KEY not in json.dumps(request), request
