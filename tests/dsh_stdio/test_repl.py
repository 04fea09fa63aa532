"""The REPL in a real pseudo-terminal (pexpect, ``TERM=dumb``) against the stub server."""

from __future__ import annotations

import io
import signal
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import HttpError, StubServer
from tests.support import DSH, assert_no_canary, wait_raw_mode

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


def test_exit_command_and_unknown_command(dsh_env: dict[str, str]) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("/nope")
    child.expect_exact(
        "unknown command /nope; commands: /help /exit /new /model /think /compact /usage /session"
    )
    child.expect_exact(PROMPT)
    child.sendline("/session")
    child.expect("session +[0-9a-zA-Z_-]+")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_history_survives_a_restart(dsh_env: dict[str, str], home: Path) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("remember me")
    child.expect_exact("You said: remember me")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
    assert (home / "history").stat().st_mode & 0o777 == 0o600

    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    wait_raw_mode(child.child_fd)
    child.send("\x1b[A")  # Up: the previous session's line comes back
    child.send("\r")
    child.expect_exact("You said: remember me")
    child.expect_exact(PROMPT)
    assert leave(child) == 0


def test_escape_sequences_from_the_model_do_not_reach_the_terminal(
    dsh_env: dict[str, str],
) -> None:
    child, transcript = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("show me an escape")
    child.expect_exact("newline and\ttab stay.")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
    answer = transcript.getvalue().split("show me an escape")[-1]
    assert "^[[2J" in answer
    assert "^[]0;pwned^G" in answer
    assert "<U+202E>" in answer
    for raw in ("\x1b[2J", "\x1b]0;", "\x07", "\u202e", "\x08"):
        assert raw not in answer


def test_alt_enter_inserts_a_newline(dsh_env: dict[str, str]) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    wait_raw_mode(child.child_fd)
    child.send("first")
    child.send("\x1b\r")  # Alt-Enter
    child.send("second\r")
    child.expect_exact("You said: first\nsecond".replace("\n", "\r\n"))
    child.expect_exact(PROMPT)
    assert leave(child) == 0


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


def test_retry_notice_and_waiting_indicator_keep_their_order(dsh_env: dict[str, str]) -> None:
    child, transcript = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("ratelimit me")
    child.expect(r"retrying in \d+\.\d s \(retry 1 of 4\): DeepSeek API returned HTTP 429")
    child.expect_exact("You said: ratelimit me")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
    screen = transcript.getvalue()
    # The indicator is erased before the notice is written: never glued to it.
    assert "the modelretrying" not in screen
    assert "\nretrying in" in screen.replace("\r", "\n")


def test_server_words_in_an_outcome_line_are_neutralised(
    dsh_env: dict[str, str], stub: StubServer
) -> None:
    stub.enqueue(HttpError(400, "boom \x1b[2J\x1b]0;pwned\x07 end"))
    child, transcript = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("anything")
    child.expect_exact("[turn failed INVALID_REQUEST] DeepSeek API returned HTTP 400")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
    screen = transcript.getvalue()
    assert "boom ^[[2J^[]0;pwned^G end" in screen
    assert "\x1b[2J" not in screen and "\x07" not in screen


def test_slash_commands(dsh_env: dict[str, str], home: Path, stub: StubServer) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("/help")
    for name in ("/help", "/exit", "/new", "/model NAME", "/session"):
        child.expect_exact(name)
    child.expect_exact(PROMPT)
    child.sendline("/session")
    child.expect(r"session +(\S+)\r\n")
    first = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("/model deepseek-v4-pro")
    child.expect_exact("model: deepseek-v4-pro")
    child.expect_exact(PROMPT)
    child.sendline("which model")
    child.expect_exact("You said: which model")
    child.expect_exact(PROMPT)
    assert stub.requests[-1]["model"] == "deepseek-v4-pro"
    child.sendline("/new")
    child.expect(r"new session (\S+)\r\n")
    second = child.match.group(1)
    assert second != first
    child.expect_exact(PROMPT)
    child.sendline("fresh start")
    child.expect_exact("You said: fresh start")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
    # The new session starts empty (but for its system prompt) and keeps the chosen model.
    messages = stub.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "fresh start"
    assert stub.requests[-1]["model"] == "deepseek-v4-pro"
    assert len(list(home.rglob("session.jsonl"))) == 2


def test_waiting_indicator_says_when_the_server_is_busy(dsh_env: dict[str, str]) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("are you busy")
    child.expect_exact("… waiting for the model")
    child.expect_exact("… server busy, waiting")  # keep-alive comments arrive first
    child.expect_exact("You said: are you busy")
    child.expect(r"tokens in \d+ \(cached \d+\) / out \d+, \d+\.\d\d s")  # the usage line
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


def test_double_slash_sends_a_message_that_starts_with_a_slash(dsh_env: dict[str, str]) -> None:
    child, _ = spawn(dsh_env)
    child.expect_exact(PROMPT)
    child.sendline("//etc/hosts explain")
    child.expect_exact("You said: /etc/hosts explain")
    child.expect_exact(PROMPT)
    child.sendline("/model two words")
    child.expect_exact("(usage: /model NAME, one word)")
    child.expect_exact(PROMPT)
    assert leave(child) == 0
