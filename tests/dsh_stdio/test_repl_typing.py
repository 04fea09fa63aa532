"""SPEC 17, typing at the REPL: Tab completion, ``@path``, ``!command``, the editor, the queue.

In-process (``tests/harness.py``) where the prompt's keys are enough; on a real pty (pexpect,
``@pytest.mark.slow``) what needs a terminal: an editor run on it, lines typed into the line
discipline while a turn runs, Ctrl-C as a signal.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import Answer, Held, StubServer
from dsh_stdio.commands.demo import DEMO_FILE_TEXT
from dsh_stdio.terminal import repl
from tests.dsh_stdio.test_agent_terminal import spawn_terminal
from tests.harness import Terminal, on_terminal
from tests.support import CANARY_KEY, DSH, assert_no_canary, wait_until

# -- Tab ------------------------------------------------------------------------------------------


async def tab(term: Terminal, typed: str, completed: str) -> None:
    """Type ``typed`` and Tab; wait until the completion ending in ``completed`` is in.

    Completions arrive in a task of their own, and a key typed before then would cancel them.
    The dumb-terminal prompt echoes the character before the cursor at each change: ``typed``
    as it is typed, then the last character of the completed text."""
    term.keys(typed + "\t")
    await term.expect(typed + completed[-1])


def test_tab_completes_commands_and_their_arguments(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.expect("> ")
        await tab(term, "/mod", "/model")
        await tab(term, " deepseek-v4-p", "deepseek-v4-pro")
        term.keys("\r")
        await term.expect("model: deepseek-v4-pro\n")
        await term.expect("> ")
        await tab(term, "/thi", "/think")
        await tab(term, " of", "off")
        term.keys("\r")
        await term.expect("thinking: off for the next turns")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


def test_a_command_added_to_the_help_table_completes(
    dsh_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completion reads the table ``/help`` lists: another branch's command needs no more."""
    monkeypatch.setitem(repl.COMMANDS, "/frobnicate-of-another-branch", "a command added elsewhere")

    async def script(term: Terminal) -> None:
        await term.expect("> ")
        await tab(term, "/frob", "/frobnicate-of-another-branch")
        term.keys("\r")
        await term.expect("unknown command /frobnicate-of-another-branch")  # (not wired here)
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


def test_resume_completes_this_directorys_session_ids(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("first session")
        await term.expect("You said: first session")
        first = term.runtime.conversation.log.id
        await term.turn("/new")
        await term.expect("new session")
        await term.expect("> ")
        await tab(term, "/resume ", first)
        term.keys("\r")
        await term.expect(f"dsh: resumed session {first} (1 turn)")
        await term.expect("You said: first session")  # its last exchange
        await term.turn("and on")
        await term.expect("You said: and on")
        assert term.runtime.conversation.log.id == first
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


# -- @path ----------------------------------------------------------------------------------------


def test_at_path_completes_and_attaches_the_file(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.expect("> ")
        await tab(term, "look at @dem", "demo.txt")
        term.keys(" please\r")
        await term.expect("[attached demo.txt]")
        await term.expect("You said: look at @demo.txt please")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    [sent] = [data["text"] for data in term.events("user/message")]
    assert sent.startswith("look at @demo.txt please\n\n[the file demo.txt, attached")
    assert "     1\t" + DEMO_FILE_TEXT.splitlines()[0] in sent  # as `read` numbers it


def test_a_word_that_names_no_file_stays_text(dsh_env: dict[str, str], workdir: Path) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("thanks @everyone, mail ann@example.com")
        await term.expect("You said: thanks @everyone, mail ann@example.com")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    assert [d["text"] for d in term.events("user/message")] == [
        "thanks @everyone, mail ann@example.com"
    ]


def test_a_credential_is_asked_about_and_a_no_sends_nothing(
    dsh_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    """``@~/.ssh/id_rsa``: outside and a credential, so asked, as the model's read would be; a
    no keeps the line at the prompt, and nothing reaches the model."""
    home = tmp_path / "person"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")

    async def script(term: Terminal) -> None:
        await term.turn("check @~/.ssh/id_rsa")
        await term.expect(re.compile(r"Allow read\? [^\n]*id_rsa"))
        term.keys("n\r")
        await term.expect("the message was not sent")
        await term.expect("> ")
        assert term.runtime.conversation.log.events == []  # nothing sent, nothing logged
        term.keys("\r")  # the line came back: Enter sends it again, and it is asked again
        await term.expect(re.compile(r"Allow read\? [^\n]*id_rsa"))
        term.keys("y\r")
        await term.expect("[attached ~/.ssh/id_rsa]")
        await term.expect("You said: check @~/.ssh/id_rsa")
        assert await term.leave() == 0

    term = on_terminal(dict(dsh_env, HOME=str(home)), workdir, script)
    assert term.decisions() == []  # the person's own reads are not the model's calls
    [sent] = [data["text"] for data in term.events("user/message")]
    assert "secret" in sent


# -- !command -------------------------------------------------------------------------------------


def test_a_command_of_ones_own_runs_and_its_output_goes_with_the_next_message(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("!echo made-by-me; env")
        await term.expect("made-by-me\n")
        await term.expect(re.compile(r"\[! exit 0\] \d+ lines, offered to the model"))
        await term.turn("what do you see")
        await term.expect("You said: [I ran a command in the working directory: $ echo")
        await term.turn("and now")  # offered once
        await term.expect("You said: and now\n")
        assert await term.leave() == 0

    term = on_terminal(dsh_env, workdir, script)
    first, second = (data["text"] for data in term.events("user/message"))
    assert first.startswith("[I ran a command in the working directory: $ echo made-by-me; env")
    assert "made-by-me\n" in first and first.endswith("]\n\nwhat do you see")
    assert second == "and now"
    assert CANARY_KEY not in term.text  # the command's environment has no key
    assert_no_canary(term.home, term.text)


def test_bang_alone_says_how_and_a_double_bang_sends_a_message(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    async def script(term: Terminal) -> None:
        await term.turn("!")
        await term.expect("dsh: !COMMAND runs a command of yours")
        await term.turn("!!important")
        await term.expect("You said: !important")
        await term.turn("!exit 3")
        await term.expect("[! exit 3] 0 lines")
        assert await term.leave() == 0

    on_terminal(dsh_env, workdir, script)


# -- on a real terminal ---------------------------------------------------------------------------


def _spawn(env: dict[str, str], workdir: Path, home: Path) -> pexpect.spawn:
    term = spawn_terminal(DSH, env, workdir, home)
    term.child.expect_exact("Ctrl-D leaves.")
    return term


@pytest.mark.slow
def test_ctrl_x_ctrl_e_edits_the_message_in_editor(
    dsh_env: dict[str, str], workdir: Path, home: Path, tmp_path: Path
) -> None:
    editor = tmp_path / "editor.sh"
    seen = tmp_path / "editor-saw"
    editor.write_text(
        f'#!/bin/sh\n{{ cat "$1"; env; }} > {seen}\nprintf "from the editor\\n" > "$1"\n'
    )
    editor.chmod(0o755)
    # A colour terminal: the prompt is redrawn whole when the editor is done.
    term = _spawn(dict(dsh_env, EDITOR=str(editor), TERM="xterm-256color"), workdir, home)
    try:
        term.keys("a draft")
        term.keys("\x18\x05")  # Ctrl-X Ctrl-E
        term.child.expect_exact("from the editor")  # the prompt shows what the editor left
        term.keys("\r")
        term.child.expect_exact("You said: from the editor")
        term.child.expect_exact("tokens in")
        term.keys("\x04")
        term.child.expect(pexpect.EOF)
    finally:
        term.child.close(force=True)
    saw = seen.read_text()
    assert saw.startswith("a draft")
    assert CANARY_KEY not in saw and "DEEPSEEK_API_KEY" not in saw


@pytest.mark.slow
def test_a_line_entered_during_a_turn_is_queued_and_sent_next(
    dsh_env: dict[str, str], stub: StubServer, workdir: Path, home: Path
) -> None:
    gate = threading.Event()
    stub.enqueue(Held(gate, Answer("The first answer.")))
    term = _spawn(dsh_env, workdir, home)
    try:
        term.send_turn("first")
        term.child.expect_exact("… waiting for the model")
        term.child.send("second\r")
        term.child.expect_exact("queued: second (sent when this turn ends; Ctrl-C drops it)")
        term.child.send("half typ")  # typed, not entered: it waits for the prompt
        gate.set()
        term.child.expect_exact("The first answer.")
        term.child.expect_exact("> second\r\n")  # sent as the next turn, shown as typed
        term.child.expect_exact("You said: second")
        term.child.expect_exact("> ")
        term.child.sendline("ed")
        term.child.expect_exact("You said: half typed")
        assert term.leave() == 0
    finally:
        gate.set()
        term.child.close(force=True)
    texts = [data["text"] for data in term.events("user/message")]
    assert texts == ["first", "second", "half typed"]


@pytest.mark.slow
def test_ctrl_c_drops_the_queue(
    dsh_env: dict[str, str], stub: StubServer, workdir: Path, home: Path
) -> None:
    gate = threading.Event()
    stub.enqueue(Held(gate, Answer("never shown")))
    served = len(stub.served)
    term = _spawn(dsh_env, workdir, home)
    try:
        term.send_turn("first")
        term.child.expect_exact("… waiting for the model")
        # The spinner shows before the request is on the wire: a Ctrl-C before the stub has
        # it would leave the held answer scripted, to hold the next turn's request instead.
        wait_until(lambda: len(stub.served) > served, "the first turn's request at the stub")
        term.child.send("second\r")
        term.child.expect_exact("queued: second")
        term.child.sendintr()  # Ctrl-C, as the line discipline makes it a signal
        term.child.expect_exact("dropped 1 queued line")
        term.child.expect_exact("[turn aborted] user")
        term.send_turn("third")
        term.child.expect_exact("You said: third")
        assert term.leave() == 0
    finally:
        gate.set()
        term.child.close(force=True)
    assert [data["text"] for data in term.events("user/message")] == ["first", "third"]
