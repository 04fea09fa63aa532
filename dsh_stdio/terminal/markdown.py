"""An answer's Markdown in the scrollback: each finished block rendered once, the tail plain.

    answer = AnswerMarkdown(size=lambda: os.get_terminal_size(1))
    out.write(answer.feed(neutralise(delta)))   # for each delta, in order
    out.write(answer.end())                     # the answer is over: the rest, rendered

On a colour terminal (SPEC 17) a block of the answer (a paragraph, a list, a heading, a fenced
code block, a table) is printed rendered as soon as it is finished: code highlighted by its
language, headings and emphasis styled, tables aligned. Until then it streams plain, as it
comes. Finishing a block erases that plain tail (it is on the screen still, below the cursor's
row count) and prints the rendered block in its place; what is above the tail, rendered blocks
included, is never touched again, and there is no alternate screen. A tail taller than the
screen cannot be erased (its start scrolled away): it stays as it was printed, plain.

What is fed is already neutralised (:func:`~dsh_stdio.render.neutralise`): the model's text
holds no control character but newline and tab, so nothing in it can drive the terminal, and
the renderer's own output is checked to hold nothing but SGR colour sequences (:func:`_inert`).
Links are shown as text with their address beside it, never as terminal hyperlinks (OSC 8).

rich (with markdown-it-py and pygments, which it brings) renders; it costs about 90 ms to import
and 40 ms for the first highlighted block, so it is imported only here, when a colour terminal
shows an answer, and :func:`warm_up` loads it in a thread while the first request waits for
the model (docs/notes/2026-12-02-repl-craft.md has the comparison with markdown-it-py or mistune
and pygments by hand).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..cells import char_width

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["HIGHLIGHT_LIMIT", "AnswerMarkdown", "terminal_size", "warm_up"]

HIGHLIGHT_LIMIT = 64 * 1024
"""Characters of one group of blocks rendered; a larger one is printed plain: a hostile model
must not make a lexer spend minutes on a megabyte of crafted code."""
TAB = 8

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_ANY_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f]")
_TRAILING_BLANKS = re.compile(r"(?:[ ]|\x1b\[[0-9;]*m)*$")


def terminal_size(out: TextIO) -> os.terminal_size:
    """The size of the terminal ``out`` writes to (80 x 24 when it cannot be asked)."""
    try:
        return os.get_terminal_size(out.fileno())
    except (OSError, ValueError, AttributeError):
        return os.terminal_size((80, 24))


def _inert(rendered: str) -> str:
    """``rendered`` with every escape sequence but SGR (colour, bold) and every control
    character but newline and tab removed: what reaches the terminal is styling, never a command.

    The text fed in was neutralised already; this holds the renderer to the same rule (a
    library that starts emitting hyperlinks or cursor moves is caught here, not by a person)."""
    kept = _ANY_ESCAPE.sub(lambda m: m.group() if _SGR.fullmatch(m.group()) else "", rendered)
    return _CONTROL.sub("", kept)


def _strip_line_ends(rendered: str) -> str:
    """rich pads each line to the width with blanks: they would wrap when the window narrows
    and come along when text is copied. Kept: the SGR resets among them."""
    lines = []
    for line in rendered.split("\n"):
        end = _TRAILING_BLANKS.search(line)
        assert end is not None  # the pattern matches the empty string
        tail = end.group()
        lines.append(line[: end.start()] + "".join(_SGR.findall(tail)))
    # A table's blank top and bottom edges too: the blank line between blocks is dsh's.
    while lines and not _SGR.sub("", lines[0]):
        lines.pop(0)
    while lines and not _SGR.sub("", lines[-1]):
        lines.pop()
    return "\n".join(lines)


class _Screen:
    """Where the cursor is after plain text written from the start of a line: the rows it went
    down and its column, as the terminal wraps (a character that does not fit wraps first)."""

    def __init__(self) -> None:
        self.rows_down = 0
        self.column = 0

    def plain(self, text: str, columns: int) -> str:
        """``text`` as written, tabs expanded to spaces (so that the count is exact), counted."""
        out: list[str] = []
        for char in text:
            if char == "\n":
                self.rows_down += 1
                self.column = 0
                out.append(char)
                continue
            if char == "\t":
                spaces = TAB - self.column % TAB
                for _ in range(spaces):
                    self._advance(1, columns)
                out.append(" " * spaces)
                continue
            self._advance(char_width(char), columns)
            out.append(char)
        return "".join(out)

    def _advance(self, width: int, columns: int) -> None:
        if self.column + width > columns:
            self.rows_down += 1
            self.column = 0
        self.column += width


class AnswerMarkdown:
    """One answer's text (one step's), fed as it streams; see the module docstring.

    ``size`` gives the terminal's columns and lines when a block is rendered.
    """

    def __init__(self, size: Callable[[], os.terminal_size]) -> None:
        self._size = size
        self._tail = ""
        """The text of the blocks not rendered yet: on screen, plain, from a line's start."""
        self._screen = _Screen()
        self._columns = 0
        """The width ``_screen`` counted the tail at."""
        self._after_block = False
        """A block was just rendered, with the blank line that follows it."""

    def feed(self, text: str) -> str:
        """What to write for ``text`` (neutralised): itself, plain, or, when it finishes a
        block, the plain tail erased and the finished blocks rendered in its place."""
        if self._after_block:
            # The blank lines after a rendered block: it ended with one of its own.
            text = text.lstrip("\n")
            self._after_block = not text
        if not text:
            return ""
        if not self._tail:
            self._columns = max(1, self._size().columns)
            self._screen = _Screen()
        self._tail += text
        finished = _finished_length(self._tail) if "\n" in text and self._worth_parsing() else 0
        if finished == 0:
            return self._screen.plain(text, self._columns)
        erase = self._erase()
        if erase is None:
            # The tail's start scrolled off the screen: it stays plain, and so do its blocks.
            # What is left of it (whole lines, on the screen already) starts the next tail.
            shown = self._screen.plain(text, self._columns)
            self._restart(self._tail[finished:].lstrip("\n"))  # blank lines stay above it
            self._screen.plain(self._tail, self._columns)  # counted, not written again
            return shown
        done, rest = self._tail[:finished], self._tail[finished:].lstrip("\n")
        self._restart(rest)
        self._after_block = not rest
        return erase + self._render(done) + "\n" + self._screen.plain(rest, self._columns)

    def end(self) -> str:
        """The answer is over (or paused for something else to be shown): what is left of it,
        rendered, replacing its plain tail; after this the next text starts a new tail."""
        if not self._tail:
            return ""
        erase = self._erase()
        tail, self._tail = self._tail, ""
        self._after_block = False
        if erase is None:
            return ""  # it stays as it was printed; the caller ends its line
        return erase + self._render(tail)

    def _worth_parsing(self) -> bool:
        """Whether to look for finished blocks now. While the tail fits the screen, at every
        line; once it is taller (a long code block, which stays plain), only at a line where
        a block may end (blank, or a fence), so that a long block is not parsed again at each
        of its lines."""
        if self._screen.rows_down < self._size().lines:
            return True
        complete = self._tail[: self._tail.rfind("\n")]
        last = complete[complete.rfind("\n") + 1 :].strip()
        return not last or last.startswith(("```", "~~~"))

    @property
    def live(self) -> bool:
        """Part of the answer is on the screen plain, waiting for its block to finish."""
        return bool(self._tail)

    def interject(self, line: str) -> str:
        """What to write to show ``line`` (dsh's own, ending in a newline) in the middle of the
        answer: above the plain tail, which is written again below it."""
        erase = self._erase()
        if erase is None:
            # What is on the screen stays plain, and the next text starts a new tail.
            self._tail = ""
            return ("" if self._screen.column == 0 else "\n") + line
        tail = self._tail
        self._restart(tail)
        return erase + line + self._screen.plain(tail, self._columns)

    def _restart(self, rest: str) -> None:
        self._tail = rest
        self._screen = _Screen()
        self._columns = max(1, self._size().columns)

    def _erase(self) -> str | None:
        """Back to the tail's first row, and the screen cleared from there; None when that row
        is no longer on the screen (or the window was resized since: the count is off)."""
        size = self._size()
        up = self._screen.rows_down
        if size.columns != self._columns or up >= max(1, size.lines - 1):
            return None
        return "\r" + (f"\x1b[{up}A" if up else "") + "\x1b[J"

    def _render(self, source: str) -> str:
        """``source`` (whole blocks) rendered, ending with a newline."""
        body = source.strip("\n")
        if not body:
            return ""
        if len(body) > HIGHLIGHT_LIMIT:
            return body + "\n"
        # Block by block, a blank line between: the screen is the same however the answer
        # streamed (rich lays out a group of blocks a little differently from each alone).
        rendered = (_render(block, self._columns) for block in _blocks(body))
        return "\n".join(_strip_line_ends(_inert(block)) + "\n" for block in rendered)


def _finished_length(tail: str) -> int:
    """How much of ``tail`` is finished blocks (a whole number of lines): everything before
    the last block, and that one too when it can no longer grow (a closed code fence, a
    ``#`` heading, a rule). 0 when nothing is finished yet."""
    complete = tail[: tail.rfind("\n") + 1]
    lines = complete.split("\n")[:-1]
    tokens = _parser().parse(complete)
    starts: list[tuple[int, int, Any]] = [
        (token.map[0], token.map[1], token) for token in tokens if token.level == 0 and token.map
    ]
    if not starts:
        return 0
    last_start, last_end, last = starts[-1]
    ended = last_end < len(lines) and last.type in _ENDED_BY_A_BLANK_LINE
    grown = _cannot_grow(last, lines[last_start:last_end]) and last_end <= len(lines)
    boundary = last_end if ended or grown else last_start
    if boundary <= starts[0][0]:
        return 0  # blank lines before the first block are no block of their own
    return sum(len(line) + 1 for line in lines[:boundary])


_ENDED_BY_A_BLANK_LINE = frozenset(
    {"paragraph_open", "heading_open", "table_open", "blockquote_open", "hr"}
)
"""Blocks that nothing after a blank line can add to (a list can take another item, an
indented code block more code)."""


def _blocks(source: str) -> list[str]:
    """``source`` cut into its top-level blocks (each its own lines)."""
    lines = source.split("\n")
    spans = [token.map for token in _parser().parse(source) if token.level == 0 and token.map]
    return ["\n".join(lines[start:end]) for start, end in spans] or [source]


def _cannot_grow(token: Any, lines: list[str]) -> bool:
    """Whether ``token``, the last block, is finished with its own last line."""
    if token.type == "hr":
        return True
    if token.type == "heading_open":
        return str(token.markup).startswith("#")
    if token.type == "fence" and len(lines) >= 2:
        closing = lines[-1].strip()
        fence = str(token.markup)
        return closing.startswith(fence) and set(closing) == {fence[0]}
    return False


@functools.cache
def _parser() -> MarkdownIt:
    """The block parser, configured as rich's own (so that both see the same blocks)."""
    from markdown_it import MarkdownIt

    return MarkdownIt().enable("strikethrough").enable("table")


def _render(source: str, columns: int) -> str:
    import io

    console_type, markdown_type = _rich()
    buffer = io.StringIO()
    colours = "truecolor" if os.environ.get("COLORTERM") in ("truecolor", "24bit") else "256"
    console = console_type(
        file=buffer,
        force_terminal=True,
        color_system=colours,
        width=columns,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=False,
    )
    console.print(markdown_type(source, code_theme="monokai", hyperlinks=False))
    return buffer.getvalue()


@functools.cache
def _rich() -> tuple[Any, Any]:
    """rich's Console, and its Markdown with dsh's taste: every heading left-aligned, code
    without a background block or padding (it copies and wraps as plain text does)."""
    from rich.console import Console
    from rich.markdown import CodeBlock, Heading, Markdown
    from rich.syntax import Syntax

    class LeftHeading(Heading):
        LEVEL_ALIGN = dict.fromkeys(("h1", "h2", "h3", "h4", "h5", "h6"), "left")

    class PlainBackgroundCode(CodeBlock):
        def __rich_console__(self, console: Any, options: Any) -> Any:
            code = str(self.text).rstrip()
            yield Syntax(
                code, self.lexer_name, theme=self.theme, word_wrap=True, background_color="default"
            )

    class AnswerMarkdownStyle(Markdown):
        elements = {  # noqa: RUF012 - rich's own table, extended as its docs show
            **Markdown.elements,
            "heading_open": LeftHeading,
            "fence": PlainBackgroundCode,
            "code_block": PlainBackgroundCode,
        }

    return Console, AnswerMarkdownStyle


_warming: threading.Thread | None = None


def warm_up() -> None:
    """Import the renderer in a thread (once): the first answer of a run, on a colour
    terminal, then finds it loaded instead of waiting 100 ms for it at its first block."""
    global _warming
    if _warming is None:
        _warming = threading.Thread(target=_load, name="dsh-markdown-warm-up", daemon=True)
        _warming.start()


def _load() -> None:
    _parser()
    _rich()
    _render("# x\n\n```python\nx = 1\n```", 20)
