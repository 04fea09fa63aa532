"""The REPL and its approval question in-process (``tests/harness.py``): what a terminal shows.

The real ``run_repl`` and ``TerminalQuestion``, prompt_toolkit reading typed keys from a pipe
and drawing its dumb-terminal prompt (``TERM=dumb``) on the screen dsh writes to, against the
stub server (trigger words, or scripted :class:`ToolCalls`) in a working directory holding
``demo.txt``. Moved here from the pexpect tests, with their assertions (``\\r\\n`` is ``\\n``
here: no terminal translates it). What needs a real terminal or a real signal stays there:
Ctrl-C and SIGTERM as signals, text typed ahead into the line discipline, the terminal's modes,
colour, a history file that cannot be opened (``test_repl.py``, ``test_agent_terminal.py``,
``test_question_terminal.py``, ``test_terminal_habits.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsh_core.testing import Answer as Reply
from dsh_core.testing import HttpError, KeepAlives, ManualClock, StubServer, ToolCalls
from dsh_stdio.view import TurnView
from tests.dsh_stdio.test_agent_terminal import bash
from tests.harness import SANDBOX_NOTE, Terminal, on_terminal
from tests.support import assert_no_canary

PROMPT = "> "
SESSION_ID = r"\d{8}-\d{6}-[0-9a-f]{6}"


async def _prompt(term: Terminal) -> str:
    """The question's prompt line, once it is on screen."""
    match = await term.expect(re.compile(r"Allow [^\n]*: "))
    assert isinstance(match, re.Match)
    return match.group(0)


# -- the REPL (from test_repl.py) -----------------------------------------------------------------


def test_exit_command_and_unknown_command(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("/nope")
        await term.expect(
            "unknown command /nope; commands: /help /exit /new /model /think /compact /usage "
            "/session"
        )
        await term.turn("/session")
        await term.expect(re.compile("session +[0-9a-zA-Z_-]+"))
        await term.turn("/exit")
        assert await term.task == 0

    on_terminal(dsh_env, workdir, script)


def test_history_survives_a_restart(dsh_env: dict[str, str], home: Path, workdir: Path) -> None:
    async def first(term: Terminal) -> None:
        await term.turn("remember me")
        await term.expect("You said: remember me")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, first)
    assert (home / "history").stat().st_mode & 0o777 == 0o600

    async def again(term: Terminal) -> None:
        await term.expect(PROMPT)
        term.keys("\x1b[A")  # Up: the previous session's line comes back
        term.keys("\r")
        await term.expect("You said: remember me")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, again)


def test_escape_sequences_from_the_model_do_not_reach_the_terminal(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("show me an escape")
        await term.expect("newline and\ttab stay.")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    answer = term.text.split("show me an escape")[-1]
    assert "^[[2J" in answer
    assert "^[]0;pwned^G" in answer
    assert "<U+202E>" in answer
    for raw in ("\x1b[2J", "\x1b]0;", "\x07", "\u202e", "\x08"):
        assert raw not in answer


def test_alt_enter_inserts_a_newline(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.expect(PROMPT)
        term.keys("first")
        term.keys("\x1b\r")  # Alt-Enter
        term.keys("second\r")
        await term.expect("You said: first\nsecond")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


def test_retry_notice_and_waiting_indicator_keep_their_order(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("ratelimit me")
        await term.expect(
            re.compile(r"retrying in \d+\.\d s \(retry 1 of 4\): DeepSeek API returned HTTP 429")
        )
        await term.expect("You said: ratelimit me")
        assert await term.leave() == 0

    # The Retry-After wait, on a clock that jumps.
    term = on_terminal(dsh_env, workdir, script, clock=ManualClock(autojump=True))
    # The indicator is erased before the notice is written: never glued to it.
    assert "the modelretrying" not in term.text
    assert "\nretrying in" in term.text.replace("\r", "\n")


def test_server_words_in_an_outcome_line_are_neutralised(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    stub.enqueue(HttpError(400, "boom \x1b[2J\x1b]0;pwned\x07 end"))

    async def script(term: Terminal) -> None:
        await term.turn("anything")
        await term.expect("[turn failed INVALID_REQUEST] DeepSeek API returned HTTP 400")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert "boom ^[[2J^[]0;pwned^G end" in term.text
    assert "\x1b[2J" not in term.text and "\x07" not in term.text


def test_slash_commands(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    sessions: list[str] = []

    async def script(term: Terminal) -> None:
        await term.turn("/help")
        for name in ("/help", "/exit", "/new", "/model NAME", "/session"):
            await term.expect(name)
        await term.turn("/session")
        sessions.append(_group(await term.expect(re.compile(r"session +(\S+)\n"))))
        await term.turn("/model deepseek-v4-pro")
        await term.expect("model: deepseek-v4-pro")
        await term.turn("which model")
        await term.expect("You said: which model")
        await term.expect(PROMPT)
        assert stub.requests[-1]["model"] == "deepseek-v4-pro"
        term.keys("/new\r")
        sessions.append(_group(await term.expect(re.compile(r"new session (\S+)\n"))))
        await term.turn("fresh start")
        await term.expect("You said: fresh start")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)
    first, second = sessions
    assert second != first
    # The new session starts empty (but for its system prompt) and keeps the chosen model.
    messages = stub.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "fresh start"
    assert stub.requests[-1]["model"] == "deepseek-v4-pro"
    assert len(list(home.rglob("session.jsonl"))) == 2


def _group(match: object) -> str:
    assert isinstance(match, re.Match)
    return str(match.group(1))


def test_waiting_indicator_says_when_the_server_is_busy(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    # What the "busy" trigger sends, with shorter pauses: keep-alives first, then the answer.
    stub.enqueue(KeepAlives(3, 0.05, Reply("You said: are you busy")))

    async def script(term: Terminal) -> None:
        await term.turn("are you busy")
        await term.expect("… waiting for the model")
        await term.expect("… server busy, waiting")  # keep-alive comments arrive first
        await term.expect("You said: are you busy")
        usage = r"tokens in \d+ \(cached \d+\) / out \d+, .*, ctx \d+% of 1M, \d+\.\d\d s"
        await term.expect(re.compile(usage))
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


def test_double_slash_sends_a_message_that_starts_with_a_slash(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("//etc/hosts explain")
        await term.expect("You said: /etc/hosts explain")
        await term.turn("/model two words")
        await term.expect("(usage: /model NAME, one word)")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


# -- leaving, Ctrl-C at the prompt, /help, /session (from test_terminal_habits.py) ---------------


@pytest.mark.parametrize("line", ["/quit", "exit", "quit"])
def test_quit_and_exit_leave(dsh_env: dict[str, str], workdir: Path, line: str) -> None:
    async def script(term: Terminal) -> None:
        await term.turn(line)
        assert await term.task == 0

    on_terminal(dsh_env, workdir, script)


def test_ctrl_c_at_an_empty_prompt_says_how_to_leave_and_help_lists_slashes(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.expect(PROMPT)
        term.keys("\x03")  # the key, as prompt_toolkit reads it at the prompt
        await term.expect("dsh: Ctrl-C clears the line; to leave: Ctrl-D on an empty line")
        await term.turn("/help")
        await term.expect(re.compile(r"//TEXT +send a message that starts with /"))
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


def test_session_shows_model_url_directory_sandbox_and_grants(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("/session")
        await term.expect(re.compile(rf"session +{SESSION_ID}\n"))
        await term.expect(re.compile(r"log +\S+session\.jsonl\n"))
        await term.expect("some-model\n")
        await term.expect(re.compile(rf"base URL +{re.escape(stub.url)}\n"))
        await term.expect(re.compile(rf"directory +{re.escape(str(workdir))}\n"))
        await term.expect(re.compile(r"sandbox +\S"))
        await term.expect("grants     --allow: write; always this session: none\n")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script, "--allow", "write", "-m", "some-model")


def test_a_running_command_shows_a_live_line_then_its_last_lines(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TurnView, "TICK", 0.05)  # the line's period (1 s): sooner, same line
    # The command waits for a file that the test makes once the live line is on screen.
    command = "while [ ! -e go ]; do sleep 0.05; done; seq 1 7"
    stub.enqueue(bash(command))

    async def script(term: Terminal) -> None:
        await term.turn("count")
        await term.expect_question("bash", f"$ {command}")
        term.keys("y\r")
        await term.expect(re.compile(r"… bash running \d+ s \(Ctrl-C to stop\)"))
        (workdir / "go").touch()
        await term.expect("[tool bash exit 0] 7 lines\n")
        await term.expect("  3\n  4\n  5\n  6\n  7\n")  # the last five
        await term.expect("Tool results: [bash] 1")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


def test_an_edit_allowed_always_still_shows_its_diff(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("tooledit")
        await term.expect_question("edit", "demo.txt")
        term.keys("a\r")
        await term.expect("[tool edit done]")
        await term.turn("tooledit again")
        await term.expect("[tool edit] demo.txt\n")
        await term.expect(
            "--- a/demo.txt\n+++ b/demo.txt\n@@ -1,2 +1,2 @@\n"
            "-Hello again from the dsh demo.\n+Hello again again from the dsh demo.\n"
        )
        await term.expect("[tool edit done]")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)
    assert (workdir / "demo.txt").read_text().startswith("Hello again again from")


# -- the answers (from test_agent_terminal.py) ----------------------------------------------------


def test_yes_runs_the_command(dsh_env: dict[str, str], home: Path, workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        await term.expect(re.compile(rf"\[tool bash\] \$ ls -la{SANDBOX_NOTE}\n"))
        await term.expect_question("bash", "$ ls -la")
        term.keys("y\r")
        await term.expect(re.compile(r"\[tool bash exit 0\] \d+ lines\n"))
        await term.expect("Tool results: [bash] total")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["allowed"]
    assert term.turn_ends() == [{"kind": "completed"}]
    assert [data["name"] for data in term.events("tool/call")] == ["bash"]
    assert_no_canary(home, term.text)


def test_no_refuses_and_the_turn_goes_on(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        await term.expect_question("bash", "$ ls -la")
        term.keys("n\r")
        await term.expect('[tool refused bash] the user rejected tool "bash"\n')
        await term.expect('Tool results: [bash] Error: the user rejected tool "bash"')
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["rejected"]
    assert term.events("tool/call") == []  # it never ran
    assert term.turn_ends() == [{"kind": "completed"}]


def test_always_lasts_for_the_session_and_not_after_new(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    sessions: list[str] = []

    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        await term.expect_question("bash", "$ ls -la")
        term.keys("a\r")
        await term.expect(re.compile(r"\[tool bash exit 0\] \d+ lines"))
        await term.turn("toolbash again")
        await term.expect(re.compile(rf"\[tool bash\] \$ ls -la{SANDBOX_NOTE}\n"))
        ran = await term.expect(re.compile(r"Allow bash\?|\[tool bash exit 0\] \d+ lines"))
        assert isinstance(ran, re.Match) and ran.group(0).startswith("[tool"), "asked again"
        await term.turn("/session")
        sessions.append(_group(await term.expect(re.compile(r"session +(\S+)\n"))))
        await term.turn("/new")
        sessions.append(_group(await term.expect(re.compile(r"new session (\S+)\n"))))
        await term.turn("toolbash in a new session")
        await term.expect_question("bash", "$ ls -la")
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    first, second = sessions
    assert {path.parent.name for path in term.home.rglob("session.jsonl")} == {first, second}
    assert term.decisions(first) == ["allowed-always", "allowed-always"]
    assert term.decisions(second) == ["rejected"]


def test_enter_and_ctrl_d_answer_no(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        await term.expect_question("bash", "$ ls -la")
        term.keys("\r")  # the default
        await term.expect("[tool refused bash]")
        await term.turn("toolbash")
        await term.expect_question("bash", "$ ls -la")
        term.keys("\x04")  # Ctrl-D: no, and dsh stays
        await term.expect("[tool refused bash]")
        await term.turn("still here")
        await term.expect("You said: still here")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["rejected", "rejected"]
    assert [end["kind"] for end in term.turn_ends()] == ["completed"] * 3


def test_ctrl_c_as_a_key_at_the_question_aborts_the_turn(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    """The key read by the question (the signal is ``test_agent_terminal.py``'s)."""
    stub.enqueue(bash("echo never"))

    async def script(term: Terminal) -> None:
        await term.turn("run something")
        await term.expect_question("bash", "$ echo never")
        term.keys("\x03")
        await term.expect("[turn aborted] user\n")
        await term.turn("and now")
        await term.expect("You said: and now")  # a valid next request (the stub checks it)
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["cancelled"]
    assert term.events("tool/call") == []
    codes = [result["error"]["code"] for result in term.events("tool/result")]
    assert codes == ["ABORTED_BEFORE_DISPATCH"]
    assert term.turn_ends() == [{"kind": "aborted", "reason": "user"}, {"kind": "completed"}]
    roles = [m["role"] for m in stub.requests[-1]["messages"]]
    assert roles[1:] == ["user", "assistant", "tool", "user"]


def test_escape_sequences_and_a_multi_line_command_are_shown_whole_and_inert(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    async def script(term: Terminal) -> None:
        stub.enqueue(bash("echo \x1b[31mred\x07"))
        await term.turn("colour")
        await term.expect(re.compile(rf"\[tool bash\] \$ echo \^\[\[31mred\^G{SANDBOX_NOTE}\n"))
        await term.expect_question("bash", "$ echo ^[[31mred^G")
        term.keys("y\r")
        await term.expect("[tool bash exit 0] 1 line\n")
        await term.expect("Tool results: [bash] ^[[31mred")  # the output, inert too

        stub.enqueue(bash("echo one\necho two\necho three"))
        await term.turn("lines")
        await term.expect(
            re.compile(rf"\[tool bash\] \$ echo one\n  echo two\n  echo three{SANDBOX_NOTE}\n")
        )
        await term.expect("$ echo one\n  echo two\n  echo three\n")  # whole, before asking
        await term.expect_question("bash", "the 3 lines above")
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert "\x1b[31m" not in term.text
    assert "\x07" not in term.text


def test_edit_shows_a_diff_and_reading_outside_asks(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("out of bounds\n")

    async def script(term: Terminal) -> None:
        await term.turn("tooledit")
        await term.expect("[tool read done] 2 lines\n")  # inside: no question
        await term.expect("[tool edit] demo.txt\n")
        await term.expect(
            "--- a/demo.txt\n+++ b/demo.txt\n@@ -1,2 +1,2 @@\n"
            "-Hello from the dsh demo.\n+Hello again from the dsh demo.\n"
        )
        await term.expect_question("edit", "demo.txt")
        term.keys("y\r")
        await term.expect("[tool edit done]")
        await term.expect("Tool results:")
        assert (workdir / "demo.txt").read_text().startswith("Hello again from the dsh demo.\n")

        stub.enqueue(ToolCalls((("read", json.dumps({"file_path": str(outside)})),)))
        await term.turn("look around")
        await term.expect_question(
            "read", str(outside), "(outside the working directory)", once=True
        )
        term.keys("y\r")
        await term.expect("[tool read done] 1 line\n")
        await term.expect("Tool results: [read]")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["allowed", "allowed"]  # the read inside needed none


# -- the question's answers (from test_question_terminal.py) --------------------------------------


def test_the_default_is_shown_and_any_other_answer_asks_again(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        prompt = await _prompt(term)
        assert prompt.endswith('[y]es / [N]o / [a]lways for "ls ...": ')
        term.keys("x\r")
        await term.expect("please answer y or n (Enter is no;")
        assert await _prompt(term) == prompt  # asked again, the same question
        term.keys("maybe\r")
        assert await _prompt(term) == prompt
        term.keys("\r")  # Enter: the default, no
        await term.expect('[tool refused bash] the user rejected tool "bash"\n')
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["rejected"]
    assert term.events("tool/call") == []


def test_no_with_a_reason_reaches_the_model_and_the_log(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    refusal = 'the user rejected tool "bash": use uv instead'

    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        await _prompt(term)
        term.keys("n use uv instead\r")
        await term.expect(f"[tool refused bash] {refusal}\n")
        await term.expect(f"Tool results: [bash] Error: {refusal}")  # what the model got
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    [decided] = term.events("approval/decided")
    assert (decided["outcome"], decided["reason"]) == ("rejected", "use uv instead")


def test_always_for_a_command_covers_only_commands_with_its_first_word(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    async def turn(term: Terminal, command: str) -> None:
        stub.enqueue(bash(command))
        await term.turn(f"run {command}")

    async def script(term: Terminal) -> None:
        await turn(term, "echo one")
        assert (await _prompt(term)).endswith('[a]lways for "echo ...": ')
        term.keys("a\r")
        await term.expect("Tool results: [bash] one")
        await turn(term, "echo two")  # the same first word: not asked
        ran = await term.expect(re.compile(r"Allow bash\?|Tool results: \[bash\] two"))
        assert isinstance(ran, re.Match) and ran.group(0).startswith("Tool"), "asked again"
        await turn(term, "touch made-by-ls")  # another word: asked
        assert (await _prompt(term)).endswith('[a]lways for "touch ...": ')
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        await term.expect("Tool results: [bash] Error:")
        await turn(term, "echo three; touch sneaky")  # the word, and more: asked, no [a]
        assert (await _prompt(term)).endswith(" [y]es / [N]o: ")
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert term.decisions() == ["allowed-always", "allowed-always", "rejected", "rejected"]
    assert not (workdir / "made-by-ls").exists() and not (workdir / "sneaky").exists()
