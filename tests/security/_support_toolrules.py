"""What the file-tool attacks (SPEC 10 rules 2, 3, 4, 7, 11) share.

Each attack runs ``dsh`` against a stub server of its own that plays a hostile model: the
test queues the tool calls it asks for (:func:`attack`), then checks what dsh did. On a pipe the
run goes to its end in-process (:func:`run_dsh`, through ``tests/harness.py``: what the file
tools do needs no process of its own); on a terminal, ``term`` is a pexpect session
(``TERM=dumb``); :func:`running_dsh` is the real process, for what ``/proc`` shows of it.
``HOME`` is a directory of the test's own, so ``~/.ssh`` or ``~/.bashrc`` is a file the test
planted, never the developer's.

The fixtures and helpers that start dsh and read what it left are the agent tests' own
(tests/dsh_stdio/test_agent_pipe.py, test_agent_terminal.py: ``stub``, ``work``, the runners,
the log readers): one of each, not a copy. This module adds the child's ``HOME``, and ``term``
on it (the agent tests' own ``term`` lives in their conftest, out of reach here).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import StubServer, ToolCalls, validate_request
from tests import support
from tests.dsh_stdio.test_agent_pipe import (
    Run,
    assert_log_whole,
    data_of,
    log_path,
    read_events,
    start_dsh,
    stub,
    tool_lines,
    work,
)
from tests.dsh_stdio.test_agent_terminal import Terminal, spawn_terminal
from tests.harness import run_in_process
from tests.support import DSH, assert_no_canary, child_env

__all__ = [
    "DSH",
    "Run",
    "Terminal",
    "asked_line",
    "attack",
    "data_of",
    "dsh_env",
    "home",
    "log_path",
    "offers_always",
    "read_events",
    "results",
    "run_dsh",
    "running_dsh",
    "spawn_terminal",
    "start_dsh",
    "stub",
    "term",
    "tool_lines",
    "user_home",
    "work",
]


def run_dsh(env: dict[str, str], cwd: Path, *args: str, stdin: str = "") -> support.Run:
    """Run dsh to its end in ``cwd`` with ``stdin`` as its input, as on a pipe (in-process)."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """``DSH_HOME``: where the session logs go."""
    return tmp_path / "dsh-home"


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    """``HOME`` for the child: the test plants ``.ssh``, ``.bashrc`` and friends here."""
    path = tmp_path / "user"
    path.mkdir()
    return path


@pytest.fixture
def dsh_env(stub: StubServer, home: Path, user_home: Path) -> dict[str, str]:
    return child_env(stub.url, home, HOME=str(user_home), PROMPT_TOOLKIT_NO_CPR="1")


def attack(stub: StubServer, *calls: tuple[str, dict[str, Any]]) -> None:
    """The hostile model's next answer: these calls, in one step (then it quotes the results)."""
    stub.enqueue(ToolCalls(tuple((name, json.dumps(arguments)) for name, arguments in calls)))


def results(home: Path) -> list[dict[str, Any]]:
    """Each ``tool/result`` of the run, in order; the log is checked whole and paired first.
    No request the model received broke DeepSeek's rules either (checked by the caller's stub)."""
    return data_of(assert_log_whole(home), "tool/result")


def requests_valid(stub: StubServer) -> bool:
    return all(validate_request(request) is None for request in stub.requests)


@pytest.fixture
def term(dsh_env: dict[str, str], home: Path, work: Path) -> Iterator[Terminal]:
    """dsh on a pseudo-terminal in ``work``; the key must appear nowhere it showed or wrote."""
    session = spawn_terminal(DSH, dsh_env, work, home)
    try:
        yield session
    finally:
        if session.child.isalive():
            session.child.close(force=True)
    assert_no_canary(home, session.screen.getvalue())


def asked_line(session: Terminal, tool: str) -> str:
    """The approval question's line for ``tool``, once it is on screen (up to its ``: ``)."""
    session.child.expect(rf"Allow {re.escape(tool)}\? [^\r\n]*: ")
    return str(session.child.after)


def offers_always(question: str) -> bool:
    """Whether a question line offers to remember the answer (``[a]lways``, in any wording)."""
    return "[a]" in question or "always" in question.lower()


@contextlib.contextmanager
def running_dsh(env: dict[str, str], cwd: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """dsh started on pipes (:func:`start_dsh`), killed at the end if a failed test left it
    running: an attack that pins a core must not outlive its test."""
    proc = start_dsh(env, cwd, *args)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
