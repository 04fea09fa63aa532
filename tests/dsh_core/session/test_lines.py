"""A line written in parts (a long answer, a slice at a time) is the line written whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.errors import UsageError
from dsh_core.session.lines import encode_line, encode_line_parts

# What JSON escapes or encodes, what the line escapes (NEL, LINE and PARAGRAPH SEPARATOR), a
# character beyond the BMP, and a lone surrogate (no UTF-8 form: the line goes to \u escapes).
_CHARS = st.sampled_from([*'ab "\\\n\t\x00\x1f\x7fé€\U0001f600\x85\u2028\u2029', "\ud800"])
_STRINGS = st.lists(_CHARS, max_size=40).map("".join)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_STRINGS, inner, max_size=4),
    max_leaves=12,
)


def _whole(value: dict[str, Any], slice_chars: int) -> bytes:
    return b"".join(encode_line_parts(value, slice_chars=slice_chars))


@settings(max_examples=1000, deadline=None)
@given(st.dictionaries(_STRINGS, _VALUES, max_size=5), st.integers(1, 8))
def test_the_parts_are_the_line(value: dict[str, Any], slice_chars: int) -> None:
    assert _whole(value, slice_chars) == encode_line(value)


def test_a_long_string_is_written_in_slices() -> None:
    text = 'the answer \u2028 said "hi" \\ ' * 10
    value = {"type": "assistant/message", "data": {"text": text, "turn": 1}}
    parts = list(encode_line_parts(value, slice_chars=16))
    assert len(parts) > len(text) // 16
    assert max(map(len, parts)) < 100
    assert b"".join(parts) == encode_line(value)
    assert json.loads(b"".join(parts))["data"]["text"] == text


def test_a_short_line_is_one_part() -> None:
    value = {"type": "user/message", "data": {"text": "hello"}}
    assert list(encode_line_parts(value)) == [encode_line(value)]


def test_keys_json_would_convert_are_written_as_json_writes_them() -> None:
    value = {"data": {1: "x" * 20, None: [True, "y" * 20]}}
    assert _whole(value, 4) == encode_line(value)


def test_what_cannot_be_encoded_fails_before_the_first_part() -> None:
    parts = encode_line_parts({"text": "x" * 50, "what": object()}, slice_chars=8)
    with pytest.raises(UsageError, match="not JSON-serialisable"):
        next(parts)
