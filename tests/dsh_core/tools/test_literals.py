"""The literals a match must contain: what they are, and that skipping by them never hides a
match (generated patterns and texts; ``grep`` with and without them on generated files)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_core.tools import ToolError, search
from dsh_core.tools.linear import linear_regex
from dsh_core.tools.literals import required_literals
from dsh_core.tools.tree.walk import Walk
from tests.dsh_core.tools.test_builtin import Tools, tools

__all__ = ["tools"]


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        ("needle_[0-9]+", ["needle_"]),
        ("^def main", ["def main"]),
        (r"\bclass\b", ["class"]),
        (r"main\.py", ["main.py"]),
        ("abcde*", ["abcd"]),
        ("abcde{2}", ["abcd"]),
        ("abcd?e", ["abce", "abcde"]),  # two exact strings
        ("[Nn]EEDLE_4007", ["EEDLE_4007"]),  # one search rather than two
        ("zq[xv]_absent", ["_absent"]),
        ("[ab]cdef", ["cdef"]),
        ("(frobnicate|quuxify)_[a-z]+", ["frobnicate_", "quuxify_"]),
        ("needle_1[0-9]+|quux_absent", ["needle_1", "quux_absent"]),
        ("(foo)?barbaz", ["barbaz"]),
        ("(abcd)+", ["abcd"]),
        (r"abcd\ncd", ["abcd\ncd"]),
        (r"\x41BCD", ["ABCD"]),
        ("é+ëtéé", ["ëtéé"]),
        ("a{,3}bcde", ["bcde"]),  # RE2 reads a{,3} as text: Python's reading requires less
        ("(?i:abcd)efgh", ["efgh"]),
        # Nothing worth a search, or nothing to trust: every file is searched.
        ("x", []),
        ("abc|abd", []),  # three characters: RE2 finds them faster than a search would
        ("abcd|b", []),
        ("(abcd)*x", []),
        (r"\d+\w+", []),
        (".*", []),
        ("(?i)abcd", []),  # RE2 folds Unicode cases (KELVIN SIGN for k): no byte search can
        ("[[:alpha:]]abcd", []),  # a POSIX class to RE2, a set and a "]" to Python
        (r"\pLabcd", []),  # RE2 syntax Python does not parse
        (r"\Qabcd\E", []),
        (r"abcd\z", []),
        ("(?U)abcd", []),
        ("(a|b|c|d|e|f|g|h|i)bcde", ["bcde"]),
        ("(abcd|bcde|cdef|defg|efgh|fghi|ghij|hijk|ijkl)", []),  # nine passes: RE2's one wins
    ],
)
def test_required_literals(pattern: str, literals: list[str]) -> None:
    linear_regex(pattern, "pattern", multiline=True)  # only patterns RE2 takes come here
    assert required_literals(pattern) == tuple(sorted(text.encode() for text in literals))


def test_deep_nesting_and_long_patterns_give_an_answer() -> None:
    assert required_literals("(" * 5000 + "abcd" + ")" * 5000) in ((), (b"abcd",))
    assert required_literals("[ab]" * 2000 + "abcd") == (b"abcd",)
    assert required_literals("(?:abcd|efgh)" * 300) != ()


# Pieces of pattern: literals (with cases RE2 folds beyond ASCII), classes, groups, flags,
# escapes, and RE2 syntax Python reads otherwise or not at all.
_PATTERN_PIECES = st.sampled_from(
    [
        "a", "b", "ab", "abcd", "bcda", "dcba", "A", "B", "é", "ß", "k", "K", "\u212a", "\u017f",
        "s", ".", "*", "+", "?", "|", "(", ")", "(?:", "(?i)", "(?i:", "(?s)", "(?-i:", "[", "]",
        "[^", "-", "{", "}", ",", "0", "2", r"\b", r"\B", r"\d", r"\w", r"\s", r"\.", r"\x61",
        r"\n", "^", "$", r"\pL", "[:alpha:]", "[[:alpha:]]", r"\Q", r"\E", r"\z", r"\A", "\n",
        "[ab]", "[a-d]", "{,3}", "{2}", "{1,}", r"\141", r"\0",
    ]
)  # fmt: skip
_TEXT_PIECES = st.sampled_from(
    [
        "a", "b", "ab", "abcd", "bcda", "dcba", "ABCD", "A", "é", "ß", "SS", "k", "K", "\u212a",
        "\u017f", "s", "S", "\n", " ", ".", "-", "_", "0", "2", ",", "{", "}", "[", "]", ":",
    ]
)  # fmt: skip
_PATTERNS = st.builds(
    str.__add__,
    st.sampled_from(["", "", "(?i)", "(?s)", "(?i:", "(?-i:", "[[:alpha:]]"]),  # flags first
    st.lists(_PATTERN_PIECES, max_size=8).map("".join),
)
_TEXTS = st.lists(_TEXT_PIECES, max_size=30).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_PATTERNS, _TEXTS)
def test_a_text_without_the_literals_holds_no_match(pattern: str, text: str) -> None:
    try:
        regex = linear_regex(pattern, "pattern", multiline=True)
    except ToolError:
        return
    literals = required_literals(pattern)
    data = text.encode()
    if literals and regex.search(data, 0) is not None:
        assert any(literal in data for literal in literals), (pattern, text, literals)


def _lines(path: Path, pattern: str, needles: tuple[bytes, ...]) -> list[str]:
    walk = Walk(threading.Event(), (str(path.parent),))
    found: list[str] = []
    regex = linear_regex(pattern, "pattern", multiline=True)
    search._search(str(path), regex, needles, path.name, found, walk)
    return found


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(_PATTERNS, st.lists(_TEXTS, min_size=1, max_size=5))
def test_grep_finds_the_same_lines_with_and_without_the_literals(
    tmp_path: Path, pattern: str, texts: list[str]
) -> None:
    try:
        linear_regex(pattern, "pattern", multiline=True)
    except ToolError:
        return
    literals = required_literals(pattern)
    for number, text in enumerate(texts):
        path = tmp_path / f"file{number}.txt"
        path.write_text(text)
        assert _lines(path, pattern, literals) == _lines(path, pattern, ()), (pattern, text)


def test_each_piece_of_a_large_file_is_tested_for_the_literals(tools: Tools) -> None:
    """A file larger than a piece is searched piece by piece; a piece without the literal is
    skipped, and the line numbers after it still count its lines."""
    filler = "word " * 15 + "\n"
    lines = [filler] * (2 * search._CHUNK // len(filler) + 10)
    lines[3] = "first NEEDLE_4007\n"
    lines[-2] = "last nEEDLE_4007\n"
    (tools.root / "big.txt").write_text("".join(lines))
    assert tools.run("grep", pattern="[Nn]EEDLE_4007") == (
        f"big.txt:4:first NEEDLE_4007\nbig.txt:{len(lines) - 1}:last nEEDLE_4007"
    )


def test_one_buffer_reused_from_file_to_file_finds_what_fresh_reads_find(tmp_path: Path) -> None:
    """The walk reads small files into one buffer: what an earlier, longer file left in it (a
    NUL, the literal) changes nothing, and a file as large as the buffer is read as before."""
    texts = [
        b"x NEEDLE_4007\n" * 3 + b"\0" + b"y" * 30,  # binary: a NUL left in the buffer
        b"a nEEDLE_4007 short\n",
        b"z" * 40 + b" NEEDLE_4007\n",  # leaves the literal beyond the next file's end
        b"no literal here\n",
        b"",
        b"NEEDLE_4007 " * 5 + b"\n",  # exactly the buffer's size: not through it
        b"last NEEDLE_4007",
    ]
    buffer = bytearray(len(texts[5]))
    regex = linear_regex("[Nn]EEDLE_4007", "pattern", multiline=True)
    needles = required_literals("[Nn]EEDLE_4007")
    with_buffer, without = (
        Walk(threading.Event(), (str(tmp_path),)),
        Walk(threading.Event(), (str(tmp_path),)),
    )
    found: list[str] = []
    expected: list[str] = []
    for number, text in enumerate(texts):
        path = tmp_path / f"file{number}.txt"
        path.write_bytes(text)
        search._search(str(path), regex, needles, path.name, found, with_buffer, None, buffer)
        search._search(str(path), regex, needles, path.name, expected, without)
    assert found == expected
    assert len(found) == 4
    assert with_buffer.binary == without.binary == 1


@settings(max_examples=2000, deadline=None)
@given(
    st.binary(max_size=60),
    st.binary(max_size=20),
    st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=3),
)
def test_the_rarest_byte_first_finds_what_a_plain_search_finds(
    text: bytes, stale: bytes, needles: list[bytes]
) -> None:
    """The buffer test looks for each needle's rarest byte first, and never past the file's end
    (``stale``: what an earlier file left in the buffer after it)."""
    alphabet = b"ab_E7\0"
    text = bytes(alphabet[b % len(alphabet)] for b in text)  # few bytes: many near misses
    needles = [bytes(alphabet[b % len(alphabet)] for b in n) for n in needles]
    buffer = bytearray(text + stale)
    expected = any(needle in text for needle in needles)
    assert search._buffer_holds_any(buffer, len(text), tuple(needles)) == expected
