"""Outcome lines exactly as SPEC section 3; model text made inert for a terminal."""

from __future__ import annotations

import unicodedata

import pytest

from dsh_core.errors import FailureRecord
from dsh_core.session.events import ToolOutput, ToolResult, TurnEnd
from dsh_stdio import render
from dsh_stdio.render import (
    clip,
    compact,
    neutralise,
    next_step,
    outcome_line,
    output_tail,
    shown,
    writable,
)


def end(kind: str, *, failure: FailureRecord | None = None, reason: str | None = None) -> TurnEnd:
    # As the log is read: a kind this version does not know becomes "other".
    data = {"turn": 0, "reason": {"kind": kind}}
    end = TurnEnd.from_data(data)
    return TurnEnd(end.turn, end.kind, failure, reason, end.other_kind)


@pytest.mark.parametrize(
    ("turn_end", "line"),
    [
        (end("completed"), None),
        (
            end("error", failure=FailureRecord("SERVER", "boom: inner")),
            "[turn failed SERVER] boom: inner",
        ),
        (end("aborted", reason="user"), "[turn aborted] user"),
        (end("aborted", reason="shutdown"), "[turn aborted] shutdown"),
        (end("rejected", reason="too long"), "[turn rejected] too long"),
        (end("interrupted"), "[turn interrupted by a previous process exit]"),
        (end("max-tokens"), "[turn stopped at the output token limit]"),
        (end("merged-by-a-newer-version"), None),
    ],
)
def test_outcome_lines(turn_end: TurnEnd, line: str | None) -> None:
    assert outcome_line(turn_end) == line


def test_the_step_limit_names_the_limit_and_its_flag() -> None:
    step = "(next: send a message to go on, or raise --max-steps)"
    assert outcome_line(end("max-steps"), steps=50) == (
        f"[turn stopped at the step limit] 50 steps {step}"
    )
    assert (
        outcome_line(end("max-steps"), steps=1) == f"[turn stopped at the step limit] 1 step {step}"
    )
    assert outcome_line(end("max-steps")) == f"[turn stopped at the step limit] {step}"


@pytest.mark.parametrize(
    ("failure", "step"),
    [
        (FailureRecord("AUTH", "x", 401), "check DEEPSEEK_API_KEY"),
        (FailureRecord("QUOTA", "x", 402), "top up the account's balance"),
        (FailureRecord("QUOTA", "x"), "top up the account's balance"),  # in-band
        (
            FailureRecord("TRANSPORT", "x"),
            "check --base-url, the network and HTTPS_PROXY, then try again",
        ),
        (FailureRecord("TIMEOUT", "x"), "try again, or raise --timeout"),
        (
            FailureRecord("MISSING_CREDENTIAL", "x"),
            "export DEEPSEEK_API_KEY=..., or try dsh --demo",
        ),
        (FailureRecord("HTTP_404", "x", 404), "check --base-url: dsh adds /chat/completions to it"),
        (FailureRecord("HTTP_405", "x", 405), "check --base-url: dsh adds /chat/completions to it"),
        (FailureRecord("SERVER", "x", 501), "check --base-url: dsh adds /chat/completions to it"),
        (FailureRecord("HTTP_409", "x", 409), "check --base-url and --model"),
        (FailureRecord("HTTP_418", "x", 418), "check --base-url and --model"),
        (FailureRecord("SERVER", "x", 503), None),
        (FailureRecord("RATE_LIMIT", "x", 429), None),
        (FailureRecord("CONTENT_FILTER", "x"), None),
        (FailureRecord("UNKNOWN", "x"), None),
    ],
)
def test_a_failure_a_person_can_act_on_ends_with_the_next_step(
    failure: FailureRecord, step: str | None
) -> None:
    assert next_step(failure) == step
    line = outcome_line(TurnEnd(1, "error", failure))
    assert line == f"[turn failed {failure.code}] x" + (f" (next: {step})" if step else "")


def result(content: str, exit_code: int | None = 0, *, is_error: bool = False) -> ToolResult:
    failure = FailureRecord("TOOL_FAILED", content) if is_error else None
    return ToolResult(1, 1, "call", ToolOutput(content, failure, exit_code=exit_code))


@pytest.mark.parametrize(
    ("tool_result", "tail"),
    [
        (result("a\nb\n"), ["a", "b"]),
        (result("1\n2\n3\n4\n5\n6\n7\n"), ["3", "4", "5", "6", "7"]),
        (result("out\n\n   \n[exit code: 2]", 2), ["out"]),  # blank lines and the marker go
        (result("(no output)"), []),
        (result("12 lines of a file\n", None), []),  # not a command
        (
            result("Error: command timed out after 1 s\npartial", 124, is_error=True),
            ["partial"],
        ),
        (result("x" * 300), ["x" * 199 + "…"]),
    ],
)
def test_output_tail(tool_result: ToolResult, tail: list[str]) -> None:
    assert output_tail(tool_result) == tail


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain\ttext\nnext", "plain\ttext\nnext"),
        ("\x1b[2J\x1b]0;pwned\x07", "^[[2J^[]0;pwned^G"),
        ("a\rb", "a^Mb"),
        ("line\r\n", "line\n"),
        ("\x9b31m", "<U+009B>31m"),
        ("abc\u202edef", "abc<U+202E>def"),
        ("\x7f", "^?"),
        ("emoji \U0001f600 ok", "emoji \U0001f600 ok"),
        ("half \ud800 pair", "half <U+D800> pair"),  # a lone surrogate cannot be written
    ],
)
def test_neutralise(text: str, shown: str) -> None:
    assert neutralise(text) == shown
    assert "\x1b" not in neutralise(text)


# SPEC 10.9: every control, invisible and format character a person could be fooled by.
INVISIBLE = [
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    0xAD,
    0x61C,
    0x180E,
    *range(0x200B, 0x2010),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2060, 0x2065),
    *range(0x2066, 0x2070),
    0xFEFF,
    *range(0xFFF9, 0xFFFC),
    *range(0xE0000, 0xE0080),
]


@pytest.mark.parametrize("code", INVISIBLE, ids=lambda code: f"U+{code:04X}")
def test_every_control_and_invisible_character_is_shown_visibly(code: int) -> None:
    shown = neutralise(f"a{chr(code)}b")
    assert chr(code) not in shown
    assert shown in (f"a^{chr(code + 0x40)}b", "a^?b", f"a<U+{code:04X}>b")


@pytest.mark.parametrize(
    "text",
    ["tab\tand\nnewline", "emoji \U0001f600", "accents éàü", "CJK 漢字", "a\u00a0b", "♥\ufe0f"],
)
def test_visible_text_is_left_alone(text: str) -> None:
    assert neutralise(text) == text


def test_writable_replaces_lone_surrogates_only() -> None:
    assert writable("half \ud800 pair \U0001f600") == "half \ufffd pair \U0001f600"
    assert writable("plain") == "plain"


# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties) less what is Cf anyway: its
# Other_Default_Ignorable_Code_Point part (PropList) and the variation selectors, which
# ``unicodedata`` does not name. Both lists are stable: Unicode reserves them.
OTHER_IGNORABLE = [(0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065)]
OTHER_IGNORABLE += [(0x3164, 0x3164), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0FFF)]
SELECTORS = [(0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF)]


def test_what_neutralise_shows_visibly_is_exactly_the_unicode_properties() -> None:
    """The class is written out as ranges (nothing computed at startup); derived here from
    the interpreter's Unicode tables, it must be the same set. On a newer Unicode this fails
    with the characters to add to ``render._UNSAFE_RANGES``."""
    expected = {
        code
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")
    }
    for first, last in OTHER_IGNORABLE + SELECTORS:
        expected.update(range(first, last + 1))
    expected.add(0x2800)  # braille pattern blank: renders as a blank column
    expected -= {0x09, 0x0A}
    everything = "".join(map(chr, range(0x110000)))
    matched = {ord(char) for char in render._UNSAFE.findall(everything)}
    assert sorted(f"U+{c:04X}" for c in expected - matched) == []
    assert sorted(f"U+{c:04X}" for c in matched - expected) == []


@pytest.mark.parametrize(
    ("command", "seen"),
    [
        ("ls\u00a0/../run.sh", "ls<U+00A0>/../run.sh"),  # one word to bash, not two
        ("ls\u2003-la\u3000x", "ls<U+2003>-la<U+3000>x"),
        ("ls\r", "ls^M"),
        ("ls -la\tx", "ls -la\tx"),
    ],
)
def test_a_command_shows_every_space_bash_does_not_split_at(command: str, seen: str) -> None:
    assert shown(command) == seen


@pytest.mark.parametrize(
    ("text", "compacted"),
    [
        ("a" + " " * 79 + "b", "a" + " " * 79 + "b"),
        ("a" + " " * 80 + "b", "a[80 spaces]b"),
        ("a" + "\u3000" * 40 + "b", "a[40 blanks]b"),  # 80 columns
        ("a" + "\u3000" * 39 + "b", "a" + "\u3000" * 39 + "b"),
        ("a" + "\t" * 10 + "b", "a[10 blanks]b"),
        ("a" + "<U+2800>" * 3000 + "b", "a[3,000 x <U+2800>]b"),
        ("<U+200B>" * 3 + "x", "<U+200B>" * 3 + "x"),
        ("^[^[^[^[[2J", "[4 x ^[][2J"),
        ("x\n\n\n\ny", "x\n[3 blank lines]\ny"),
    ],
)
def test_compact_counts_what_would_take_a_line(text: str, compacted: str) -> None:
    assert compact(text) == compacted


def test_clip_counts_rows_by_display_width() -> None:
    wide = "\u4e00" * 50  # 100 columns: two rows of 80
    part = clip("\n".join([wide] * 10), rows=5, columns=80)
    assert part.shown == f"{wide}\n{wide}\n" + "\u4e00" * 39 + "…"  # the fifth row
    assert (part.hidden, part.cut_short) == (7, 1)
    assert part.notice("diff") == (
        "[diff cut: the end of a long line and 7 more lines hidden; answer v to see all of it]"
    )
    assert clip("a\nb", rows=2, columns=80) == render.Clipped("a\nb", 0, 0)
    long = clip("x" * 1000, rows=2, columns=80, line_rows=1)
    assert long.shown == "x" * 79 + "…" and long.cut_short == 1


def test_the_tail_of_a_command_is_cut_by_columns() -> None:
    wide = "\u4e00" * 150
    [line] = output_tail(result(f"{wide}\n[exit code: 1]", 1))
    assert line == "\u4e00" * 99 + "…"
