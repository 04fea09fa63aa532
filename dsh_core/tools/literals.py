"""The literal text any match of a pattern must contain: what lets ``grep`` skip a file unread
by RE2.

    required_literals("[Nn]EEDLE_4007")               # (b"EEDLE_4007",)
    required_literals("(frobnicate|quuxify)_[a-z]+")  # (b"frobnicate", b"quuxify"): one of them
    required_literals("(?i)needle")                   # (): nothing known, search every file

A file (or a piece of one) that holds none of the returned byte strings cannot hold a match, so
RE2 need not run over it; a bytes ``in`` is several times faster than RE2 looking for a start.
The answer is a set of alternatives (any of them), as ripgrep's and RE2's own prefilters
compute, from the pattern parsed by Python's ``re`` parser (``re._parser``: RE2's Python API
does not expose its prefilter). Only what both syntaxes read the same way is trusted:

- RE2 compiles the pattern first (:func:`~dsh_core.tools.linear.linear_regex`); this runs after,
  so lookaround, backreferences and the like never get here.
- RE2 syntax Python does not accept (``\\pL``, ``\\Q...\\E``, ``\\z``, ``(?U)``, ``\\x{41}``)
  fails to parse: () is returned, and every file is searched. So does anything Python only
  warns about (``[[:alpha:]]`` is a POSIX class to RE2, a set and a ``]`` to Python).
- Case-insensitive parts (``(?i)``, ``(?i:...)``) count as unknown: RE2 folds Unicode cases
  (``k`` matches KELVIN SIGN) that a byte search cannot.
- Where the two differ and Python reads a repetition RE2 reads as text (``a{,3}``), Python's
  reading requires less, which is safe: () or fewer literals, never a wrong one.

The tests compare grep's results with and without the prefilter on generated patterns and files
(``tests/dsh_core/tools/test_literals.py``).
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

__all__ = ["rarest_byte", "required_literals"]

_MAX_SET = 16
"""The most strings an exact set or a set of alternatives may hold: beyond it, unknown."""
_MAX_USED = 8
"""The most alternatives worth a byte search each; more cost more than one RE2 pass."""
_MIN_CHARS = 4
"""The shortest literal worth a search of its own: for a shorter one, a bytes ``in`` is slower
than RE2 looking for a start that is a common letter (measured on ``bench/tools.py``'s tree)."""

_UNTRUSTED_FLAGS = sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_VERBOSE | sre.SRE_FLAG_LOCALE


@dataclass(frozen=True, slots=True)
class _Info:
    """What is known of the strings one part of a pattern matches."""

    exact: frozenset[str] | None = None
    """Every string it matches is one of these (None: too many, or unknown)."""
    contains: frozenset[str] | None = None
    """Every string it matches contains one of these (None: nothing known)."""

    def best(self) -> frozenset[str] | None:
        """The alternatives to search for, from what is known: the better of the two sets."""
        return _better(self.exact, self.contains)


_UNKNOWN = _Info()
_EMPTY = _Info(exact=frozenset({""}))
"""A zero-width assertion (``^``, ``$``, ``\\b``): it matches the empty string only."""


def required_literals(pattern: str) -> tuple[bytes, ...]:
    """UTF-8 byte strings one of which every match of ``pattern`` contains; () when nothing
    worth a search is known (then every file must be searched)."""
    if "[:" in pattern:  # a POSIX class to RE2 (``[[:digit:]]``); literal text to Python
        return ()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "possible nested set": the syntaxes part ways
            parsed = sre_parse.parse(pattern)
    except (re.error, Warning, RecursionError, OverflowError, ValueError):
        return ()
    if parsed.state.flags & _UNTRUSTED_FLAGS:
        return ()
    try:
        found = _usable(_sequence(parsed.data).best())
    except RecursionError:  # nesting deeper than Python's stack: as good as unknown
        return ()
    if found is None:
        return ()
    try:
        return tuple(sorted(text.encode("utf-8") for text in found))
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form to look for
        return ()


def _sequence(items: list[tuple[Any, Any]]) -> _Info:
    """One after another: runs of exact parts multiply out, and any stretch of exact parts
    stands for the whole (each match holds one of its strings): the best one found is kept."""
    run: frozenset[str] | None = frozenset({""})
    """The product of the exact parts since the last part that was not exact."""
    single = ""
    """The text since the last part that was not one string: ``EEDLE_4007`` in
    ``[Nn]EEDLE_4007``, one search rather than two."""
    all_exact = True
    best: frozenset[str] | None = None
    for op, argument in items:
        info = _item(op, argument)
        exact = info.exact
        if exact is not None and len(exact) == 1:
            single += next(iter(exact))
        else:
            best = _better(best, frozenset({single}))
            single = ""
        if exact is not None and run is not None:
            product = frozenset(a + b for a in run for b in exact)
            if len(product) <= _MAX_SET:
                run = product
                continue
        # The run ends here: it is a candidate, and so is what this part itself contains.
        all_exact = False
        best = _better(_better(best, run), info.best())
        run = exact
    best = _better(_better(best, run), frozenset({single}))
    return _Info(exact=run if all_exact else None, contains=best)


def _item(op: Any, argument: Any) -> _Info:
    if op is sre.LITERAL:
        return _Info(exact=frozenset({chr(argument)}))
    if op is sre.AT:
        return _EMPTY
    if op is sre.IN:
        return _char_set(argument)
    if op is sre.SUBPATTERN:
        _, added, _, items = argument
        if added & _UNTRUSTED_FLAGS:
            return _UNKNOWN
        return _sequence(items.data)
    if op is sre.BRANCH:
        return _alternation([branch.data for branch in argument[1]])
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        least, most, items = argument
        inner = _sequence(items.data)
        if least == most == 1:
            return inner
        if least == 0 and most == 1 and inner.exact is not None:
            return _Info(exact=inner.exact | {""})  # ``colou?r``: two exact strings
        if least >= 1:
            return _Info(contains=inner.best())  # at least once: it holds what one holds
        return _UNKNOWN
    return _UNKNOWN  # ``.``, ``\d``, a negated class, and anything not analysed


def _char_set(items: list[tuple[Any, Any]]) -> _Info:
    """A class of a few characters is an exact set of one-character strings."""
    chars: set[str] = set()
    for op, argument in items:
        if op is sre.LITERAL:
            chars.add(chr(argument))
        elif op is sre.RANGE and argument[1] - argument[0] < _MAX_SET:
            chars.update(chr(code) for code in range(argument[0], argument[1] + 1))
        else:  # a negation, a category (``\w``), a wide range
            return _UNKNOWN
        if len(chars) > _MAX_SET:
            return _UNKNOWN
    return _Info(exact=frozenset(chars))


def _alternation(branches: list[list[tuple[Any, Any]]]) -> _Info:
    infos = [_sequence(branch) for branch in branches]
    if all(info.exact is not None for info in infos):
        exact = frozenset().union(*(info.exact or () for info in infos))
        if len(exact) <= _MAX_SET:
            return _Info(exact=exact)
    contains: set[str] = set()
    for info in infos:
        best = info.best()
        if best is None:  # a branch with nothing known: a match need hold nothing
            return _UNKNOWN
        contains |= best
    if len(contains) > _MAX_SET:
        return _UNKNOWN
    return _Info(contains=frozenset(contains))


def _usable(found: frozenset[str] | None) -> frozenset[str] | None:
    if not found or len(found) > _MAX_USED or min(map(len, found)) < _MIN_CHARS:
        return None
    return found


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The set that skips more files for less: usable first, then fewer alternatives (each one
    is a pass over the file), then longer."""
    if b is None or (a is not None and _score(a) >= _score(b)):
        return a
    return b


def _score(found: frozenset[str]) -> tuple[bool, int, int]:
    shortest = min(map(len, found), default=0)
    return (_usable(found) is not None, -len(found), shortest)


_COMMON = (
    b" etaoinsrlhdcu\nmpfgybw.,_v()k=\"'-:/0x1T2#SAIEC>R<;N3D[]PLOMF4j5q{}9z6*8\t7+HUBWGVXK$@!%&|"
    b"\\^`~YJZQ?"
)
"""Bytes in the order of how common they are in source code and text, the most common first
(a rough order; any byte not here is rarer)."""


@functools.lru_cache(maxsize=256)
def rarest_byte(literal: bytes) -> int:
    """Where in ``literal`` (not empty) the byte least likely in a file is: ``bytes.find`` of
    one byte runs at memory speed (``memchr``), a longer string several times slower, so a file
    without that byte is passed over at once, and one with it is searched from there."""
    ranks = [_COMMON.find(byte) % (len(_COMMON) + 1) for byte in literal]  # absent: -1, rarest
    return max(range(len(literal)), key=ranks.__getitem__)
