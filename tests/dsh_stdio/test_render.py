"""Outcome lines exactly as SPEC section 3; model text made inert for a terminal."""

from __future__ import annotations

import pytest

from dsh_core.errors import FailureRecord
from dsh_core.events import TurnEnd
from dsh_stdio.render import neutralise, outcome_line, writable


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
        (end("max-steps"), "[turn stopped at the step limit]"),
        (end("merged-by-a-newer-version"), None),
    ],
)
def test_outcome_lines(turn_end: TurnEnd, line: str | None) -> None:
    assert outcome_line(turn_end) == line


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


def test_writable_replaces_lone_surrogates_only() -> None:
    assert writable("half \ud800 pair \U0001f600") == "half \ufffd pair \U0001f600"
    assert writable("plain") == "plain"
