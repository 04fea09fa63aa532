"""The glob patterns ``glob`` and ``grep`` understand (``*``, ``**``, ``?``, ``[...]``,
``{a,b}``), matched in linear time: a suffix test for the common ``*.py`` and ``**/*.py``,
RE2 for the rest (:mod:`.linear`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise

from ..base import ToolError
from ..linear import LinearRegex, check_length, linear_regex, literal

__all__ = ["MAX_BRACE_DEPTH", "glob_regex", "glob_test", "split_pattern"]

_MAGIC = frozenset("*?[{\\")
"""Characters that make a glob part a pattern rather than a name."""


def split_pattern(pattern: str) -> tuple[str, str]:
    """``src/**/*.py`` -> (``src``, ``**/*.py``): the literal directories first, walked to."""
    lead = "/" if pattern.startswith("/") else ""
    parts = pattern[len(lead) :].split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _MAGIC.intersection(part):
            break
        literal.append(part)
    base = lead + "/".join(literal)
    return base, "/".join(parts[len(literal) :])


def glob_test(pattern: str, what: str = "pattern") -> Callable[[str], bool]:
    """Whether a ``/``-separated relative path matches the glob (see :func:`glob_regex`).

    The globs models write most, ``*.py`` and ``**/*.py``, are a test of the path's end, a
    fifth of the cost of a regex call; any other is an RE2 full match.
    """
    check_length(pattern, what)
    suffix_only = _SUFFIX_ONLY.fullmatch(pattern)
    if suffix_only is None:
        return glob_regex(pattern, what).fullmatch
    any_depth, suffix = suffix_only.groups()
    if any_depth:
        return lambda path: path.endswith(suffix)
    return lambda path: path.endswith(suffix) and "/" not in path


_SUFFIX_ONLY = re.compile(r"(\*\*/)?\*([^*?\[{\\/]*)")
"""``*<text>`` or ``**/*<text>`` with nothing special in the text (one pass: no choices)."""


def glob_regex(pattern: str, what: str = "pattern") -> LinearRegex:
    """A glob as a linear-time regex for ``fullmatch`` on ``/``-separated relative paths;
    ToolError ``invalid arguments: <what> ...`` when it is none.

    ``*`` and ``?`` stay within a directory level, ``**`` as a whole level matches any number
    of levels, ``[...]`` (``[!...]`` negated) one character, ``{a,b}`` either, ``\\`` escapes.
    Names starting with a dot match like any other. The translation is one pass over the
    pattern (SPEC 10.7: a model's ``{{{{...`` took minutes, quadratic, on the event loop), at
    most :data:`~.linear.MAX_PATTERN_CHARS` long and :data:`MAX_BRACE_DEPTH` braces deep.
    """
    check_length(pattern, what)
    return linear_regex("(?s)" + _Translation(pattern, what).text(), what)


MAX_BRACE_DEPTH = 32
"""``{a,{b,...}}`` nested this deep at most: no glob a person writes comes close."""


class _Translation:
    """A glob as RE2 syntax, in one pass: the braces matched first, with a stack."""

    def __init__(self, pattern: str, what: str) -> None:
        self.pattern = pattern
        self.groups = _brace_groups(pattern)
        self.what = what
        self.last_close = pattern.rfind("]")

    def text(self) -> str:
        return self._translate(0, len(self.pattern), 0)

    def _translate(self, start: int, end: int, depth: int) -> str:
        if depth > MAX_BRACE_DEPTH:
            raise ToolError(
                f"invalid arguments: {self.what} nests braces more than {MAX_BRACE_DEPTH} deep"
            )
        pattern = self.pattern
        out: list[str] = []
        i = start
        while i < end:
            char = pattern[i]
            if char == "*":
                j = i
                while j < end and pattern[j] == "*":
                    j += 1
                whole = (i == start or pattern[i - 1] == "/") and (j == end or pattern[j] == "/")
                if j - i >= 2 and whole:
                    if j == end:
                        out.append(".*")
                    else:
                        out.append("(?:[^/]*/)*")
                        j += 1
                else:
                    out.append("[^/]*")
                i = j
            elif char == "?":
                out.append("[^/]")
                i += 1
            elif char == "[" and (close := self._class_end(i, end)) > 0:
                body = pattern[i + 1 : close]
                negate = body[:1] in ("!", "^")
                body = re.sub(r"([\\&~|\[^])", r"\\\1", body[1:] if negate else body)
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = close + 1
            elif char == "{" and (group := self.groups.get(i)) is not None and group[-1] < end:
                bounds = [i, *group]  # the brace, its commas, its closing brace
                choices = (self._translate(a + 1, b, depth + 1) for a, b in pairwise(bounds))
                out.append("(?:" + "|".join(choices) + ")")
                i = group[-1] + 1
            elif char == "\\" and i + 1 < end:
                out.append(literal(pattern[i + 1]))
                i += 2
            else:
                out.append(literal(char))
                i += 1
        return "".join(out)

    def _class_end(self, start: int, end: int) -> int:
        """The ``]`` closing the class at ``start`` before ``end``, or -1."""
        if start >= self.last_close:  # none further on: no need to look (linear, not n^2)
            return -1
        pattern = self.pattern
        j = start + 1
        if j < end and pattern[j] in "!^":
            j += 1
        if j < end and pattern[j] == "]":
            j += 1
        close = pattern.find("]", j, end)
        return close


def _brace_groups(pattern: str) -> dict[int, list[int]]:
    """Each ``{`` that opens a group with a comma at its own level: its commas' indexes and,
    last, its closing brace's. One pass; a ``\\`` escapes the next character."""
    groups: dict[int, list[int]] = {}
    open_braces: list[tuple[int, list[int]]] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            open_braces.append((i, []))
        elif char == "," and open_braces:
            open_braces[-1][1].append(i)
        elif char == "}" and open_braces:
            start, commas = open_braces.pop()
            if commas:
                groups[start] = [*commas, i]
        i += 1
    return groups
