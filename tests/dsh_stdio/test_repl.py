"""The REPL in a real pseudo-terminal (pexpect, ``TERM=dumb``) against the stub server.

What needs the terminal or the process: Ctrl-C and SIGTERM as signals, text typed ahead into
the line discipline, a history file that cannot be opened. The rest of the REPL (commands,
history, Alt-Enter, what the screen shows) runs in-process in ``test_terminal.py``.
"""

from __future__ import annotations

import io
import signal
import termios
import threading
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import Answer, Held, StubServer
from tests.support import DSH, assert_no_canary, wait_raw_mode, wait_until

pytestmark = pytest.mark.slow

PROMPT = "> "


def spawn(env: dict[str, str], *args: str) -> tuple[pexpect.spawn, io.StringIO]:
    transcript = io.StringIO()
    child = pexpect.spawn(
        DSH[0], [*DSH[1:], *args], env=env, encoding="utf-8", timeout=20, dimensions=(24, 200)
    )
    child.logfile_read = transcript
    return child, transcript


def leave(child: pexpect.spawn) -> int:
    """Ctrl-D on an empty line, once the tty has left cooked mode (FIELD-NOTES)."""
    wait_raw_mode(child.child_fd)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus)


def test_answer_cancel_continue_and_leave(dsh_env: dict[str, str], home: Path) -> None:
    child, transcript = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("hello there")
    child.expect_exact("You said: hello there")
    child.expect_exact(PROMPT)

    child.sendline("something slow please")
    child.expect_exact("word3")
    child.sendintr()
    child.expect_exact("[turn aborted] user")
    child.expect_exact(PROMPT)

    child.sendline("and again")
    child.expect_exact("You said: and again")
    child.expect_exact(PROMPT)

    # Ctrl-C at the prompt clears the line and does not exit (a key only in raw mode).
    wait_raw_mode(child.child_fd)
    child.send("half a line")
    child.sendintr()
    child.expect_exact(PROMPT)
    child.sendline("still here")
    child.expect_exact("You said: still here")
    child.expect_exact(PROMPT)

    assert leave(child) == 0
    assert "half a line" not in transcript.getvalue().split("still here")[-1]
    assert_no_canary(home, transcript.getvalue())
    log = next(home.rglob("session.jsonl")).read_text()
    assert '"kind":"aborted"' in log.replace(" ", "")


def test_sigterm_during_a_turn_records_shutdown_and_exits_143(
    dsh_env: dict[str, str], home: Path
) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("slow please")
    child.expect_exact("word3")
    child.kill(signal.SIGTERM)
    child.expect_exact("[turn aborted] shutdown")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 143
    log = next(home.rglob("session.jsonl")).read_text()
    assert '"reason":{"kind":"aborted","reason":"shutdown"}' in log.replace(" ", "")


def test_sigterm_at_the_prompt_exits_143(dsh_env: dict[str, str]) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    wait_raw_mode(child.child_fd)  # prompting: the SIGTERM handler is in place by then
    child.kill(signal.SIGTERM)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 143


def test_ctrl_c_twice_during_a_turn_still_only_cancels_it(dsh_env: dict[str, str]) -> None:
    child, _ = spawn(dsh_env)
    for _ in range(3):
        child.expect_exact(PROMPT)
        child.sendline("slow please")
        child.expect_exact("word3")
        child.kill(signal.SIGINT)
        child.kill(signal.SIGINT)  # right after: must not find Python's KeyboardInterrupt
        child.expect_exact("[turn aborted] user")
        assert "^C" not in child.before  # the tty does not echo during a turn
    child.expect_exact(PROMPT)
    child.sendline("still alive")
    child.expect_exact("You said: still alive")
    child.expect_exact(PROMPT)
    assert leave(child) == 0


def test_typed_ahead_text_waits_for_the_prompt(dsh_env: dict[str, str]) -> None:
    child, transcript = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("are you busy")  # keep-alives for a few seconds, then the answer
    child.expect_exact("… server busy, waiting")
    child.send("typed ahead")  # not echoed into the answer
    child.expect_exact("You said: are you busy")
    child.expect_exact(PROMPT)
    child.expect_exact("typed ahead")  # it comes back at the next prompt
    child.send("\r")
    child.expect_exact("You said: typed ahead")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
    answer = transcript.getvalue().split("are you busy")[1].split("You said: are you busy")[0]
    assert "typed ahead" not in answer


def test_history_path_that_is_a_directory_is_a_startup_failure(
    dsh_env: dict[str, str], home: Path
) -> None:
    (home / "history").mkdir(parents=True)
    child, transcript = spawn(dsh_env)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert (
        transcript.getvalue()
        .strip()
        .startswith(
            f"dsh: startup failed: cannot use the history file {home / 'history'}: [Errno 21]"
        )
    )


def test_ctrl_d_typed_during_a_turn_leaves_at_the_next_prompt(
    dsh_env: dict[str, str], stub: StubServer
) -> None:
    """The audit's demo run sent Ctrl-D while a turn still ran (the banner's ``->`` passed for
    the prompt): the terminal was in cooked mode, its line discipline took ^D as end-of-file
    for a read nobody made, and the key was gone. It now waits, as typed text does.

    The answer is held until ^D is in: it is certainly typed while the turn runs."""
    gate = threading.Event()
    stub.enqueue(Held(gate, Answer("Here you are.")))
    child, transcript = spawn(dsh_env)
    try:
        child.expect_exact(PROMPT)
        child.sendline("are you busy")
        wait_until(lambda: _quiet(child.child_fd), "the turn's terminal: cooked mode, no echo")
        child.send("\x04")
    finally:
        gate.set()
    child.expect_exact("Here you are.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "^D" not in transcript.getvalue()


def _quiet(fd: int) -> bool:
    """The terminal of the pty master ``fd`` is as a running turn leaves it (``quiet_terminal``):
    lines are still cooked, but nothing typed is echoed."""
    flags = termios.tcgetattr(fd)[3]
    return bool(flags & termios.ICANON) and not flags & termios.ECHO
