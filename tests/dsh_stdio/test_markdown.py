"""``dsh_stdio.terminal.markdown``: an answer's finished blocks rendered in the scrollback.

What the terminal shows is checked on a terminal emulator (pyte, 60 x 24): the bytes the
renderer writes, fed as a terminal would take them, whatever pieces the answer streamed in.
"""

from __future__ import annotations

import os
import re

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_stdio.render import neutralise
from dsh_stdio.terminal.markdown import HIGHLIGHT_LIMIT, AnswerMarkdown, _inert

ANSWER = """# The plan

Some *emphasis*, **bold** and `code`, and a [link](https://example.com/x).

```python
def double(x):
    return x * 2
```

| name | value |
|------|------:|
| a | 1 |
| longer name | 22 |

- one
- two
"""

SHOWN = [
    "The plan",
    "",
    "Some emphasis, bold and code, and a link",
    "(https://example.com/x).",
    "",
    "def double(x):",
    "    return x * 2",
    "",
    " name         value",
    " ──────────────────",
    " a                1",
    " longer name     22",
    "",
    " • one",
    " • two",
]

SGR = re.compile(r"\x1b\[[0-9;]*m")


def size(columns: int = 60, lines: int = 24) -> os.terminal_size:
    return os.terminal_size((columns, lines))


def stream(text: str, pieces: list[int], *, columns: int = 60, lines: int = 24) -> str:
    """What the renderer writes for ``text`` arriving in pieces of the given lengths."""
    answer = AnswerMarkdown(lambda: size(columns, lines))
    out, at = [], 0
    for length in pieces:
        out.append(answer.feed(text[at : at + length]))
        at += length
    out.append(answer.feed(text[at:]))
    out.append(answer.end())
    return "".join(out)


def screen_of(written: str, *, before: str = "", columns: int = 60, lines: int = 24) -> list[str]:
    screen = pyte.Screen(columns, lines)
    feed = pyte.Stream(screen)
    feed.feed((before + written).replace("\n", "\r\n"))
    shown = [line.rstrip() for line in screen.display]
    while shown and not shown[-1]:
        shown.pop()
    return shown


def test_finished_blocks_are_rendered_and_styled() -> None:
    written = stream(ANSWER, [5] * (len(ANSWER) // 5))
    assert screen_of(written) == SHOWN
    assert "\x1b[1;4mThe plan" in written  # the heading: bold, underlined
    assert "\x1b[3memphasis" in written
    assert re.search(r"\x1b\[38;5;\d+;49mdef\x1b\[0m", written)  # code highlighted by language


def test_the_unfinished_tail_streams_plain_and_a_block_is_rendered_once_finished() -> None:
    answer = AnswerMarkdown(size)
    assert answer.feed("Some *words*") == "Some *words*"  # as it came
    assert answer.feed(" more\n") == " more\n"  # a paragraph could still go on
    finished = answer.feed("\n")  # a blank line ends it
    assert finished == "\r\x1b[1A\x1b[JSome \x1b[3mwords\x1b[0m more\n\n"
    assert answer.feed("```py\nx = 1\n") == "```py\nx = 1\n"
    assert "\x1b[2A\x1b[J" in answer.feed("```\n")  # a closed fence is finished at once


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), max_size=60))
def test_the_screen_is_the_same_however_the_answer_streams(pieces: list[int]) -> None:
    assert screen_of(stream(ANSWER, pieces)) == SHOWN


def test_nothing_above_the_answer_is_touched() -> None:
    before = "> the question\n"
    written = stream(ANSWER, [1] * len(ANSWER))
    assert screen_of(written, before=before) == ["> the question", *SHOWN]


def test_wrapped_wide_and_tabbed_lines_are_counted_as_the_terminal_wraps_them() -> None:
    text = "x" * 58 + "一\n" + "\tb" * 20 + "\n" + "y" * 60 + "\n" + "一二" * 31 + "\n\n- done\n"
    written = stream(text, [3] * (len(text) // 3), columns=60)
    assert screen_of(written, before="> q\n", columns=60)[0] == "> q"


def test_a_wide_character_that_does_not_fit_wraps_first() -> None:
    """As xterm, VTE and kitty wrap it (pyte does not, so this is counted, not shown)."""
    answer = AnswerMarkdown(size)
    answer.feed("x" * 59 + "一")
    assert answer.interject("!\n").startswith("\r\x1b[1A\x1b[J")


def test_a_tail_taller_than_the_screen_stays_plain() -> None:
    paragraph = "\n".join(f"line {n}" for n in range(40)) + "\n"
    written = stream(paragraph + "\n- after\n\nlast\n", [7] * 60, lines=24)
    assert written.count("line 39") == 1  # never erased (its start scrolled off), never twice
    assert "\x1b[" not in written.split("- after")[0]
    assert "\x1b[1m • \x1b[0mafter" in written  # the next block is rendered again
    shown = screen_of(written)
    assert shown[-4:] == ["line 39", "", " • after", "", "last"][-4:]
    assert shown.count("line 30") == 1


def test_a_line_said_in_the_middle_goes_above_the_tail() -> None:
    answer = AnswerMarkdown(size)
    out = answer.feed("half a para")
    out += answer.interject("queued: next\n")
    out += answer.feed("graph\n\n") + answer.end()
    assert screen_of(out) == ["queued: next", "half a paragraph"]


def test_a_huge_block_is_shown_plain() -> None:
    code = "```python\n" + "x = 1\n" * (HIGHLIGHT_LIMIT // 6 + 10) + "```\n"
    written = stream(code, [len(code)])
    assert "\x1b[38;5" not in written
    assert "x = 1\n```\n" in written


@pytest.mark.parametrize(
    "hostile",
    [
        "```\nrm \x1b[2J -rf\n```\n",
        "# head\x1b]0;title\x07ing\n",
        "[click](http://x/\x1b]8;;http://evil\x1b\\) and <http://y/\x1b[5m>\n",
        "| a | b |\n|---|---|\n| \x1b[31mred | \x9b2J |\n",
    ],
)
def test_escapes_in_any_block_stay_inert(hostile: str) -> None:
    written = stream(neutralise(hostile), [4] * 20)
    escapes = re.findall(r"\x1b(?:\[[0-9;?]*[A-Za-z]|.)", written)
    allowed = re.compile(r"\x1b\[(?:[0-9;]*m|\d*A|J)")
    assert all(allowed.fullmatch(escape) for escape in escapes), escapes
    assert "\x07" not in written and "\x9b" not in written
    assert "^[" in "".join(screen_of(written))


def test_the_renderers_own_output_is_held_to_sgr() -> None:
    assert _inert("a\x1b]8;;http://x\x1b\\b\x1b[1mc\x1b[2Jd\x07e\x1b[0m") == "ab\x1b[1mcde\x1b[0m"
    assert SGR.sub("", _inert("\x1b[?25l\x1bP1$q\x1b\\x")) == "1$qx"
