"""How many columns of a terminal text takes: the one measure dsh lays out its words by.

    width("ls -la")        # 6
    width("一二")           # 4: East Asian wide characters take two columns
    rows("x" * 81, 80)     # 2: the line wraps
    cut("一二三", 5)        # "一二": what fits in 5 columns

Counting characters is not enough: a model's text of wide characters takes twice the rows its
length says, and zero-width ones take none (SPEC 10.10). The measure comes from
``unicodedata`` (the interpreter's own Unicode tables, so no dependency): East Asian Wide and
Fullwidth take 2, combining marks and format characters 0, the rest 1; a tab up to 8, counted
as 8, since a row estimate must never come out short. Text here is already neutralised
(:func:`~dsh_stdio.render.neutralise`): no control character reaches this count.

``wcwidth`` (which prompt_toolkit brings) measures the same way, with tables of its own and
more cases, but takes about 30 ms to import: a run on a pipe that shows a tool line would pay
that; this takes nothing to import and costs ~0.1 us a character once its cache is warm.
"""

from __future__ import annotations

import unicodedata

__all__ = ["TAB_COLUMNS", "char_width", "cut", "rows", "width"]

TAB_COLUMNS = 8
"""What a tab is counted as: the most it can take."""

_WIDTHS: dict[str, int] = {"\t": TAB_COLUMNS, "\n": 0}
"""Each non-ASCII character's width, once it was measured."""


def _char_width(char: str) -> int:
    known = _WIDTHS.get(char)
    if known is not None:
        return known
    code = ord(char)
    if code < 0x7F:
        measured = 1 if code >= 0x20 else 0
    elif char == "\ufe0f":
        measured = 1  # emoji presentation: the character before it takes two columns
    elif 0x1160 <= code <= 0x11FF:
        measured = 0  # Hangul vowels and final consonants join the syllable before them
    elif unicodedata.category(char) in ("Mn", "Me", "Cf", "Cc"):
        measured = 0  # combining marks sit on the character before them
    elif unicodedata.east_asian_width(char) in ("W", "F"):
        measured = 2
    else:
        measured = 1
    _WIDTHS[char] = measured
    return measured


def char_width(char: str) -> int:
    """The columns one character takes (a tab: :data:`TAB_COLUMNS`, its most)."""
    return _char_width(char)


def width(text: str) -> int:
    """The columns ``text`` (one line) takes on a terminal."""
    if text.isascii():  # the common case, in C
        return len(text) + (TAB_COLUMNS - 1) * text.count("\t")
    return sum(map(_char_width, text))


def rows(line: str, columns: int) -> int:
    """The rows one ``line`` takes on a terminal ``columns`` wide (an empty one takes one)."""
    return max(1, -(-width(line) // max(1, columns)))


def cut(line: str, columns: int) -> str:
    """The longest start of ``line`` that fits in ``columns`` columns."""
    if line.isascii() and "\t" not in line:
        return line[:columns]
    used = 0
    for index, char in enumerate(line):
        used += _char_width(char)
        if used > columns:
            return line[:index]
    return line
