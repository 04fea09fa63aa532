"""Linear-time pattern matching (SPEC 10.7): the patterns a model or a repository hands dsh
are compiled by RE2, which matches in time linear in the text whatever the pattern.

    regex = linear_regex("(a+)+$", "pattern", multiline=True)   # ToolError if RE2 refuses it
    regex.search(b"aaaa!", 0)        # (start, end) of the leftmost match, or None
    regex.fullmatch("src/app.py")    # True or False

Python's ``re`` backtracks: ``(a+)+$`` on 41 bytes, or a glob ``a*a*a*...b`` on a long name,
ran for hours, holding the GIL (so Ctrl-C was not even seen). RE2 (``google-re2``) has no
backreferences or lookaround, which is what makes it linear: a pattern that uses them is an
error naming why. It releases the GIL while it matches, and its errors are not logged to
stderr (they are raw pattern text): the ToolError carries them.
"""

from __future__ import annotations

from typing import Any

import re2

from .base import ToolError

__all__ = ["MAX_PATTERN_CHARS", "LinearRegex", "check_length", "linear_regex", "literal"]

MAX_PATTERN_CHARS = 10_000
"""The longest pattern a model may hand a tool (``grep``'s, a glob): compiling one is work on
the event loop, before Ctrl-C can reach it, and RE2 compiles about 2 MB a second; nobody
searches with a longer one."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the message comes back in the exception instead
_OPTIONS.never_capture = True  # only where a match is, never its groups: faster


class LinearRegex:
    """A compiled RE2 pattern: searched over bytes (UTF-8), or matched whole against a str."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def search(self, data: bytes, position: int = 0) -> tuple[int, int] | None:
        """The byte span of the leftmost match in ``data`` from ``position``; None if none."""
        match = self._compiled.search(data, position)
        return None if match is None else (match.start(), match.end())

    def renew(self) -> None:
        """Compile the pattern again, into an object of its own: ``re2.compile`` hands every
        thread the same cached one, whose locks another thread may hold (for a forked process,
        :mod:`.tree.divided`, held for ever)."""
        compiled = self._compiled
        self._compiled = type(compiled)(compiled.pattern, compiled.options)

    def fullmatch(self, text: str) -> bool:
        """Whether all of ``text`` matches."""
        return self._compiled.fullmatch(text.encode("utf-8", "surrogateescape")) is not None


def literal(text: str) -> str:
    """``text`` escaped to match itself in an RE2 pattern."""
    return str(re2.escape(text))


def check_length(pattern: str, what: str) -> None:
    """ToolError ``invalid arguments: <what> ...`` for a pattern longer than
    :data:`MAX_PATTERN_CHARS`."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(
            f"invalid arguments: {what} is {len(pattern):,} characters long; "
            f"the limit is {MAX_PATTERN_CHARS:,}"
        )


def linear_regex(pattern: str, what: str, *, multiline: bool = False) -> LinearRegex:
    """``pattern`` compiled by RE2; ToolError ``invalid arguments: <what> ...`` saying why not.

    ``multiline``: ``^`` and ``$`` match at line ends too, as ``grep`` means them.
    """
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate from JSON
        raise ToolError(f"invalid arguments: {what} is not valid Unicode text") from exc
    try:
        compiled = re2.compile(encoded, _OPTIONS)  # alone first: its error quotes only it
        if multiline:
            compiled = re2.compile(b"(?m)" + encoded, _OPTIONS)
        return LinearRegex(compiled)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else b""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        hint = _hint(str(reason))
    raise ToolError(f"invalid arguments: {what} is not valid RE2 syntax: {reason}{hint}")


_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _hint(reason: str) -> str:
    """What a model most often means by the construct RE2 refused."""
    if reason.startswith("invalid escape sequence: \\") and reason[-1:].isdigit():
        return " (RE2 has no backreferences)"
    if reason.startswith("invalid perl operator: ") and reason.endswith(_LOOKAROUND):
        return " (RE2 has no lookahead or lookbehind)"
    return ""
