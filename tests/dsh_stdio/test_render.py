"""Outcome lines exactly as SPEC section 3; model text made inert for a terminal."""

from __future__ import annotations

import pytest

from dsh_core.errors import FailureRecord
from dsh_core.events import ToolOutput, ToolResult, TurnEnd
from dsh_stdio.render import neutralise, next_step, outcome_line, output_tail, writable


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
