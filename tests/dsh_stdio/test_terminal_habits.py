"""SPEC section 12, on the real ``dsh`` process: what a first week with dsh tripped over.

Pipe behaviour runs ``dsh`` on real pipes; terminal behaviour on a pseudo-terminal (pexpect,
``TERM=dumb``). Every wait is for something dsh shows or writes, never for a time. What needs
no process (resuming elsewhere, stopping a pipe, next steps, ids, ``--quiet``, a keyless local
server) runs in-process in ``test_main.py``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pexpect
import pytest

from dsh_core.testing import StubServer
from tests.dsh_stdio.test_agent_terminal import PROMPT, Terminal, bash, spawn_terminal
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


# -- tools on a terminal ------------------------------------------------------------------------


def test_a_running_command_shows_a_live_line_then_its_last_lines(
    term: Terminal, stub: StubServer, workdir: Path
) -> None:
    # The command waits for a file that the test makes once the live line is on screen.
    command = "while [ ! -e go ]; do sleep 0.05; done; seq 1 7"
    stub.enqueue(bash(command))
    term.send_turn("count")
    term.expect_question("bash", f"$ {command}")
    term.keys("y\r")
    term.child.expect(r"… bash running \d+ s \(Ctrl-C to stop\)")
    (workdir / "go").touch()
    term.child.expect_exact("[tool bash exit 0] 7 lines\r\n")
    term.child.expect_exact("  3\r\n  4\r\n  5\r\n  6\r\n  7\r\n")  # the last five
    term.child.expect_exact("Tool results: [bash] 1")
    assert term.leave() == 0


def test_an_edit_allowed_always_still_shows_its_diff(term: Terminal, workdir: Path) -> None:
    term.send_turn("tooledit")
    term.expect_question("edit", "demo.txt")
    term.keys("a\r")
    term.child.expect_exact("[tool edit done]")
    term.send_turn("tooledit again")
    term.child.expect_exact("[tool edit] demo.txt\r\n")
    term.child.expect_exact(
        "--- a/demo.txt\r\n+++ b/demo.txt\r\n@@ -1,2 +1,2 @@\r\n"
        "-Hello again from the dsh demo.\r\n+Hello again again from the dsh demo.\r\n"
    )
    term.child.expect_exact("[tool edit done]")
    assert term.leave() == 0
    assert (workdir / "demo.txt").read_text().startswith("Hello again again from")


# -- leaving, Ctrl-C, /help, /session -------------------------------------------------------------


@pytest.mark.parametrize("line", ["/quit", "exit", "quit"])
def test_quit_and_exit_leave(term: Terminal, line: str) -> None:
    term.send_turn(line)
    term.child.expect(pexpect.EOF)
    term.child.close()
    assert term.child.exitstatus == 0


def test_ctrl_c_at_an_empty_prompt_says_how_to_leave_and_help_lists_slashes(
    term: Terminal,
) -> None:
    term.child.expect_exact(PROMPT)
    term.keys("\x03")
    term.child.expect_exact("dsh: Ctrl-C clears the line; to leave: Ctrl-D on an empty line")
    term.send_turn("/help")
    term.child.expect(r"//TEXT +send a message that starts with /")
    assert term.leave() == 0


def test_session_shows_model_url_directory_sandbox_and_grants(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    term = spawn_terminal([*DSH, "--allow", "write", "-m", "some-model"], dsh_env, workdir, home)
    try:
        term.send_turn("/session")
        term.child.expect(rf"session +{SESSION_ID}\r\n")
        term.child.expect(r"log +\S+session\.jsonl\r\n")
        term.child.expect_exact("some-model\r\n")
        term.child.expect(rf"base URL +{stub.url}\r\n")
        term.child.expect(rf"directory +{workdir}\r\n")
        term.child.expect(r"sandbox +\S")
        term.child.expect_exact("grants     --allow: write; always this session: none\r\n")
        assert term.leave() == 0
    finally:
        term.child.close(force=True)
