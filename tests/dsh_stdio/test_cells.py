"""The one measure of display width (``dsh_stdio.cells``), against what terminals do."""

from __future__ import annotations

import pytest

from dsh_stdio.cells import cut, rows, width


@pytest.mark.parametrize(
    ("text", "columns"),
    [
        ("ls -la", 6),
        ("a\tb", 10),  # a tab counts as the most it can take
        ("\u4e00\u4e8c", 4),  # East Asian wide
        ("\uff21", 2),  # fullwidth A
        ("\u3000", 2),  # ideographic space
        ("e\u0301", 1),  # a combining accent sits on the e
        ("\u1100\u1161", 2),  # a Hangul syllable from its jamo: the vowel joins the consonant
        ("\U0001f600", 2),  # emoji
        ("\u26a0\ufe0f", 2),  # emoji presentation widens the character before it
        ("\u2800", 1),
        ("<U+2800>", 8),
    ],
)
def test_width(text: str, columns: int) -> None:
    assert width(text) == columns


def test_rows_and_cut() -> None:
    assert [rows(line, 80) for line in ("", "x" * 80, "x" * 81, "\u4e00" * 41)] == [1, 1, 2, 2]
    assert cut("\u4e00\u4e8c\u4e09", 5) == "\u4e00\u4e8c"
    assert cut("abc", 2) == "ab" and cut("a\tb", 8) == "a"
