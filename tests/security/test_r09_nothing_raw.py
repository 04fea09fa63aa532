"""SPEC 10.9: nothing raw reaches a person.

Every byte meant for a human (the terminal, stderr notices, ``--show-reasoning``, ``--show``,
``--sessions``, questions, diffs) shows control characters and invisible or format characters
visibly (``^[``, ``<U+200B>``). A pipe's stdout still carries the model's answer as it is: it
is data. Each test is one attack: a model or a server whose words carry escape sequences,
zero-width, bidi and tag characters, through each way to a person. On a pipe and at the REPL
dsh runs in-process (``tests/harness.py``: the screen is the text it writes); ``--show`` on a
terminal runs the real ``dsh`` on a pseudo-terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import Answer, HttpError, StubServer
from tests.harness import Terminal, on_terminal
from tests.reliability.conftest import assert_sane
from tests.security._support_display import (  # noqa: F401 (fixtures, used by name)
    RAW,
    call,
    env_fixture,
    home_fixture,
    pipe,
    stub_fixture,
    terminal,
    work_fixture,
)
from tests.support import DSH, assert_no_canary

HOSTILE = (
    "clear\x1b[2J title\x1b]0;pwned\x07 csi\x9b31m zero\u200bwidth join\u200d "
    "word\u2060joiner bidi\u202eevil\u202c isolate\u2066x\u2069 bom\ufeff tag\U000e0041 "
    "mark\u200e nbsp-free"
)
SHOWN = (
    "clear^[[2J title^[]0;pwned^G csi<U+009B>31m zero<U+200B>width join<U+200D> "
    "word<U+2060>joiner bidi<U+202E>evil<U+202C> isolate<U+2066>x<U+2069> bom<U+FEFF> "
    "tag<U+E0041> mark<U+200E> nbsp-free"
)
"""``HOSTILE`` as a person must see it."""


def _inert(text: str) -> None:
    """No hostile character in ``text``; for a screen, see :func:`_inert_screen`."""
    for char in RAW:
        assert char not in text, f"{char!r} reached a person raw: {text[-500:]!r}"


def _inert_screen(screen: str) -> None:
    """What the terminal received: prompt_toolkit's own cursor escapes are allowed, nothing of
    ``HOSTILE``."""
    for sequence in ("\x1b[2J", "\x1b]0;", "\x1b[31m", *RAW[1:]):
        assert sequence not in screen, f"{sequence!r} reached the terminal: {screen[-500:]!r}"


def test_show_reasoning_writes_no_escape_or_invisible_character_to_stderr(
    env: dict[str, str], stub: StubServer, work: Path
) -> None:
    stub.enqueue(Answer(HOSTILE, reasoning=HOSTILE))
    run = pipe(env, work, "--show-reasoning", stdin="think\n")
    assert run.stdout == HOSTILE + "\n"  # the answer on a pipe is data: as it came
    assert SHOWN in run.stderr
    _inert(run.stderr)
    assert_sane(run)


def test_a_server_message_in_a_retry_notice_is_inert(
    env: dict[str, str], stub: StubServer, work: Path
) -> None:
    stub.enqueue(HttpError(503, f"Overloaded {HOSTILE}", retry_after=0), Answer("fine"))
    run = pipe(env, work, stdin="hello\n")
    assert run.stdout == "fine\n"
    [notice] = [line for line in run.stderr.splitlines() if "retrying" in line]
    assert SHOWN in notice
    _inert(run.stderr)


def test_file_names_in_tool_lines_on_stderr_are_inert(
    env: dict[str, str], stub: StubServer, work: Path
) -> None:
    name = "notes\u200b\u202etxt.exe"
    (work / name).write_text("hello\n")
    stub.enqueue(call("read", file_path=name), call("read", file_path="gone\x1b[2J\u2066.txt"))
    run = pipe(env, work, stdin="read it\nand that\n")
    assert "dsh: [tool read] notes<U+200B><U+202E>txt.exe\n" in run.stderr
    assert "dsh: [tool failed read] " in run.stderr and "gone^[[2J<U+2066>.txt" in run.stderr
    _inert(run.stderr)


def test_the_terminal_shows_invisible_characters_in_an_answer(
    env: dict[str, str], home: Path, stub: StubServer, work: Path
) -> None:
    stub.enqueue(Answer(HOSTILE + " end of answer"))

    async def script(term: Terminal) -> None:
        await term.turn("say it")
        await term.expect(SHOWN + " end of answer")
        assert await term.leave() == 0

    term = on_terminal(env, work, script)
    _inert_screen(term.text)
    assert_no_canary(home, term.text)


def test_a_question_and_its_diff_show_invisible_characters(
    env: dict[str, str], home: Path, stub: StubServer, work: Path
) -> None:
    stub.enqueue(call("bash", command="echo hi\u200b > out\u202e.txt"))

    async def script(term: Terminal) -> None:
        await term.turn("run it")
        await term.expect("Allow bash? $ echo hi<U+200B> > out<U+202E>.txt")
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        await term.expect("Tool results: [bash] Error: the user rejected")  # the turn's end
        stub.enqueue(
            call("read", file_path="demo.txt"),
            call("edit", file_path="demo.txt", old_string="Hello", new_string="\x1b[31mHi\u2066"),
        )
        await term.turn("edit it")
        await term.expect("+^[[31mHi<U+2066>")
        await term.expect("Allow edit? demo.txt")
        term.keys("n\r")
        await term.expect("[tool refused edit]")
        assert await term.leave() == 0

    term = on_terminal(env, work, script)
    _inert_screen(term.text)
    assert_no_canary(home, term.text)


@pytest.mark.slow
def test_sessions_and_show_show_invisible_characters(
    env: dict[str, str], home: Path, work: Path
) -> None:
    first = "hello\u200b there\u202e \x1b[2J"
    made = pipe(env, work, stdin=first + "\n")
    assert made.returncode == 0
    listing = pipe(env, work, "--sessions")
    assert "hello<U+200B> there<U+202E> ^[[2J" in listing.stdout
    _inert(listing.stdout)
    # On a terminal, --show shows the user's line and the answer inert.
    with terminal(env, work, home, [*DSH, "--show", "last"]) as shown:
        shown.child.expect_exact("> hello<U+200B> there<U+202E> ^[[2J\r\n")
        shown.child.expect_exact("You said: hello<U+200B> there<U+202E> ^[[2J\r\n")
        shown.child.expect(pexpect.EOF)
        _inert_screen(shown.screen.getvalue())


@pytest.mark.slow
def test_json_on_a_terminal_writes_no_c1_or_bidi_character_raw(
    env: dict[str, str], home: Path, stub: StubServer, work: Path
) -> None:
    """The review's answer: C1 CSI/OSC/ST and bidi overrides, which JSON leaves raw in UTF-8;
    on a terminal every one is a ``\\u`` escape. On a pipe the line stays data (as it is)."""
    hostile = "ans \u009b2J\u009d0;pwned\u009c\u202eevil\u2066x\u2069 del\x7f \x1b[31m"
    stub.enqueue(Answer(hostile))
    with terminal(env, work, home, [*DSH, "--json", "hi"]) as shown:
        shown.child.expect_exact('"type":"turn/end"')
        shown.child.expect(pexpect.EOF)
        screen = shown.screen.getvalue()
    _inert(screen)
    for char in ("\u009d", "\u009c", "\u2069", "\x7f"):
        assert char not in screen
    assert "\\u009b2J\\u009d0;pwned\\u009c\\u202eevil\\u2066x\\u2069 del\\u007f" in screen
    stub.enqueue(Answer(hostile))
    piped = pipe(env, work, "--json", "hi")
    assert f'"text":{json.dumps(hostile, ensure_ascii=False)}' in piped.stdout
