"""SPEC section 12, on the real ``dsh`` process: what a first week with dsh tripped over.

Pipe behaviour runs ``dsh`` on real pipes; terminal behaviour on a pseudo-terminal (pexpect,
``TERM=dumb``). Every wait is for something dsh shows or writes, never for a time. What needs
no process (resuming elsewhere, stopping a pipe, next steps, ids, ``--quiet``, a keyless local
server) runs in-process in ``test_main.py``, and the terminal habits that need no terminal
(leaving, Ctrl-C at the prompt, ``/session``, a running command's live line, a diff after
``[a]``) in ``test_terminal.py``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.dsh_stdio.test_agent_terminal import spawn_terminal
from tests.support import DSH, HANG_GUARD, assert_no_canary

pytestmark = pytest.mark.slow

SESSION_ID = r"\d{8}-\d{6}-[0-9a-f]{6}"


# -- helpers ----------------------------------------------------------------------------------


def events(home: Path, kind: str) -> list[dict[str, Any]]:
    """The ``data`` of every ``kind`` event in the one session log under ``home``."""
    (log,) = home.rglob("session.jsonl")
    lines = log.read_text().splitlines()[1:]
    return [event["data"] for event in map(json.loads, lines) if event["type"] == kind]


def session_of(stderr: str) -> str:
    """The id in the ``dsh: session <id> (dsh -r <id> to resume)`` line."""
    [line] = [line for line in stderr.splitlines() if line.startswith("dsh: session ")]
    return line.split()[2]


# -- pipes: a reader that goes away ---------------------------------------------------------------


def test_a_closed_stdout_ends_the_turn_as_aborted_output_closed(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    # `dsh long | head -c 50`: the answer (about 95 KB) outgrows the pipe, so dsh is still
    # writing when its reader goes away.
    with subprocess.Popen(
        [*DSH, "long"],
        cwd=workdir,
        env=dsh_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        head = process.stdout.read(50)
        process.stdout.close()
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=HANG_GUARD)
    assert status == 1, stderr  # not -13: no death by SIGPIPE
    assert len(head) == 50
    assert "dsh: cannot write to standard output: [Errno 32] Broken pipe\n" in stderr
    assert events(home, "turn/end")[-1] == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": "output closed"},
    }
    [answer] = events(home, "assistant/message")
    assert answer["interrupted"] is True


# -- one-shot at a terminal asks there -----------------------------------------------------------


def test_one_shot_at_a_terminal_asks_on_it(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    # stdout goes to a file, the question to the terminal: the answer file holds the answer.
    script = f"{shlex.join([*DSH, 'toolbash'])} > answer.txt; echo status=$?"
    term = spawn_terminal(["bash", "-c", script], dsh_env, workdir, home)
    try:
        term.expect_question("bash", "$ ls -la")
        term.keys("y\r")
        term.child.expect_exact("status=0")
        term.child.expect(pexpect.EOF)
    finally:
        term.child.close(force=True)
    assert (workdir / "answer.txt").read_text().startswith("Tool results: [bash] total ")
    assert [data["outcome"] for data in events(home, "approval/decided")] == ["allowed"]
    assert_no_canary(home, term.screen.getvalue())
