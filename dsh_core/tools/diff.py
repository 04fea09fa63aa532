"""The unified diff an approval question shows for ``write`` and ``edit``.

    --- a/src/app.py
    +++ b/src/app.py
    @@ -41,7 +41,7 @@
    ...

A new file is diffed from ``/dev/null``; an absolute (outside) path keeps its own name. The diff
is whole: how much of it fits on a screen is the front door's business, which says how many
lines it leaves out and shows them all when asked (SPEC 10.10).
"""

from __future__ import annotations

import os
import re

from .paths import counted

__all__ = ["MAX_DIFF_SPAN", "unified_diff"]

MAX_DIFF_SPAN = 5_000
"""Lines that differ, per side, beyond which no line-by-line diff is computed (difflib is
quadratic at worst): the preview says what changed in size instead."""


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_diff(shown: str, old: str | None, new: str) -> str:
    """A unified diff from ``old`` (None: a new file, from ``/dev/null``) to ``new``.

    The common head and tail are trimmed before difflib sees the rest (an edit in a long file
    costs what the edit costs); past :data:`MAX_DIFF_SPAN` differing lines no line-by-line
    diff is made, and the result says what changed in size instead.
    """
    name = shown if os.path.isabs(shown) else None
    before = _split(old or "")
    after = _split(new)
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(before), len(after)) - head
        and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]
    ):
        tail += 1
    if old is not None and head == len(before) == len(after):
        return "(no change: the file already holds this content)"
    start = max(0, head - 3)
    a = before[start : len(before) - max(0, tail - 3)]
    b = after[start : len(after) - max(0, tail - 3)]
    if len(a) - head + start > MAX_DIFF_SPAN or len(b) - head + start > MAX_DIFF_SPAN:
        replaced, replacing = counted(len(a), "line"), counted(len(b), "line")
        return (
            f"(no line-by-line diff: {replaced} replaced by {replacing}, from line {head + 1}; "
            f"the new content has {counted(len(after), 'line')})"
        )
    import difflib  # only an approval question needs it: kept out of startup

    lines = list(
        difflib.unified_diff(
            a,
            b,
            "/dev/null" if old is None else (name or f"a/{shown}"),
            name or f"b/{shown}",
            lineterm="",
        )
    )
    if not lines:
        return "(a new, empty file)"
    out: list[str] = []
    for index, line in enumerate(lines):
        if index < 2:  # the ---/+++ header: difflib puts a newline on neither
            text = line.rstrip("\n")
        else:
            text = _renumber(line, start) if line.startswith("@@") else line
            if text.endswith("\n"):
                text = text[:-1]
            elif not text.startswith("@@"):
                text += "\n\\ No newline at end of file"
        out.append(text)
    return "\n".join(out)


def _split(text: str) -> list[str]:
    """Lines with their newlines, split on ``\\n`` only (a form feed is not a line break)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _renumber(hunk: str, offset: int) -> str:
    match = _HUNK.match(hunk)
    if match is None or offset == 0:
        return hunk
    a, a_len, b, b_len = match.groups()
    return (
        f"@@ -{int(a) + offset}{a_len or ''} +{int(b) + offset}{b_len or ''} @@"
        + hunk[match.end() :]
    )
