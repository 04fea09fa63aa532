"""SSEDecoder: WHATWG edge cases, every chunk split, and a naive reference implementation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.model.sse import Comment, Item, LineTooLong, ServerSentEvent, SSEDecoder


def decode(*chunks: bytes) -> list[Item]:
    decoder = SSEDecoder()
    items: list[Item] = []
    for chunk in chunks:
        items += decoder.feed(chunk)
    return items + decoder.flush()


def reference(stream: bytes) -> list[Item]:
    """The WHATWG algorithm, character by character, on the whole stream at once."""
    text = stream.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    line: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in "\r\n":
            lines.append("".join(line))
            line = []
            if char == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
        else:
            line.append(char)
        i += 1
    last_line_complete = not line
    items: list[Item] = []
    data: str | None = None
    event = ""
    last_id: str | None = None
    for number, current in enumerate(lines + ([] if last_line_complete else ["".join(line)])):
        final_partial = not last_line_complete and number == len(lines)
        if current == "":
            if data is not None:
                value = data[:-1]
                if event and event != "message":
                    items.append(ServerSentEvent(value, event, last_id))
                else:
                    items.append(value)
            data = None
            event = ""
            continue
        if current.startswith(":"):
            items.append(Comment(current[1:]))
            continue
        name, colon, value = current.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data = (data or "") + value + "\n"
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        if final_partial:
            break
    return items


# -- line ends ------------------------------------------------------------------------------


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
def test_each_line_end(end: bytes) -> None:
    stream = b"data: one" + end + b"data: two" + end + end + b"data: three" + end + end
    assert decode(stream) == ["one\ntwo", "three"]


def test_mixed_line_ends() -> None:
    assert decode(b"data: a\r\ndata: b\rdata: c\n\r\n") == ["a\nb\nc"]


def test_cr_at_chunk_end_and_lf_at_next_start_is_one_line_end() -> None:
    # Were the CR and the LF two line ends, the blank line between them would dispatch "a".
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == ["a\nb"]


def test_cr_at_chunk_end_then_cr_is_a_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\r") == ["a"]  # dispatched at once, not held for a possible LF


def test_lf_after_cr_is_swallowed_once_only() -> None:
    assert decode(b"data: a\r", b"\n", b"\n") == ["a"]


def test_cr_pending_across_an_empty_chunk() -> None:
    assert decode(b"data: a\r", b"", b"\ndata: b\n\n") == ["a\nb"]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b"])
def test_only_cr_and_lf_end_lines(separator: str) -> None:
    text = f'data: {{"content": "a{separator}b"}}\n\n'
    assert decode(text.encode()) == [f'{{"content": "a{separator}b"}}']


# -- fields ---------------------------------------------------------------------------------


def test_one_leading_space_is_stripped() -> None:
    assert decode(b"data:x\n\ndata: x\n\ndata:  x\n\n") == ["x", "x", " x"]


def test_multi_line_data_is_joined_with_lf() -> None:
    assert decode(b"data: a\ndata:\ndata: c\n\n") == ["a\n\nc"]


def test_field_without_colon() -> None:
    assert decode(b"data\n\n") == [""]
    assert decode(b"data\ndata\n\n") == ["\n"]


def test_empty_data_value_still_dispatches() -> None:
    assert decode(b"data:\n\n") == [""]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert decode(b"\n\n\n\nevent: x\n\n\ndata: y\n\n") == ["y"]


def test_comments_are_reported_in_order() -> None:
    assert decode(b": keep-alive\n\ndata: a\n:\n:x\n\n") == [
        Comment(" keep-alive"),
        Comment(""),
        Comment("x"),
        "a",
    ]


def test_comment_line_is_reported_when_its_line_completes() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b": ping") == []
    assert decoder.feed(b"\n") == [Comment(" ping")]  # no blank line needed


def test_named_event_and_its_reset() -> None:
    assert decode(b"event: error\ndata: x\n\ndata: y\n\n") == [
        ServerSentEvent("x", "error", None),
        "y",
    ]


def test_event_named_message_is_a_plain_event() -> None:
    assert decode(b"event: message\ndata: x\n\n") == ["x"]


def test_event_type_reset_by_blank_line_without_data() -> None:
    assert decode(b"event: error\n\ndata: y\n\n") == ["y"]


def test_id_carries_over_and_nul_is_ignored() -> None:
    decoder = SSEDecoder()
    items = decoder.feed(b"id: 7\nevent: e\ndata: a\n\nid: 8\x00\nevent: e\ndata: b\n\n")
    assert items == [ServerSentEvent("a", "e", "7"), ServerSentEvent("b", "e", "7")]
    assert decoder.last_event_id == "7"


def test_retry_digits_only() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"retry: 1500\n\n")
    assert decoder.retry == 1500
    decoder.feed(b"retry: 15x\nretry: \xd9\xa3\n\n")  # not ASCII digits: ignored
    assert decoder.retry == 1500


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"foo: bar\nData: no\ndata: yes\n\n") == ["yes"]


def test_done_marker_is_plain_data() -> None:
    assert decode(b"data: [DONE]\n\n") == ["[DONE]"]


# -- bytes and text ---------------------------------------------------------------------------


def test_multibyte_characters_split_across_chunks() -> None:
    stream = "data: héllo wörld 🙂 — 中文\n\n".encode()
    for size in (1, 2, 3):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert decode(*chunks) == ["héllo wörld 🙂 — 中文"]


def test_invalid_utf8_is_replaced() -> None:
    assert decode(b"data: a\xffb\n\n") == ["a\ufffdb"]


def test_leading_bom_is_dropped_once() -> None:
    assert decode(b"\xef\xbb\xbf", b"data: a\n\n") == ["a"]
    assert decode(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == ["a"]  # a later BOM is a field name


# -- end of stream ----------------------------------------------------------------------------


def test_event_without_closing_blank_line_is_dropped() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == ["a"]
    assert decoder.flush() == []


def test_unterminated_last_line() -> None:
    assert decode(b"data: a\n\ndata: b") == ["a"]
    assert decode(b"data: a\n\n: bye") == ["a", Comment(" bye")]


def test_every_split_point_gives_the_same_items() -> None:
    stream = (
        b": keep-alive\r\n\r\nevent: x\rid: 1\rdata: a\r\rdata:b\ndata\n\n"
        + "data: 🙂\u2028\r\n\r\n".encode()
    )
    expected = decode(stream)
    assert expected == reference(stream)
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1):
            assert decode(stream[:i], stream[i:j], stream[j:]) == expected


# -- against the reference, on generated streams --------------------------------------------

_LINES = st.sampled_from(
    [
        "data: {}",
        "data:x",
        "data",
        "data: [DONE]",
        ": keep-alive",
        ":",
        "event: error",
        "event: message",
        "id: 3",
        "retry: 10",
        "bogus: 1",
        "",
        "data: a\u2028b",
        "data: 🙂",
    ]
)
_ENDS = st.sampled_from(["\n", "\r", "\r\n"])


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.tuples(_LINES, _ENDS), max_size=25),
    tail=st.sampled_from(["", "data: partial", ": partial"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_matches_the_reference(lines: list[tuple[str, str]], tail: str, cuts: list[int]) -> None:
    stream = ("".join(line + end for line, end in lines) + tail).encode()
    points = sorted({min(cut, len(stream)) for cut in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode(*chunks) == reference(stream)


def test_a_line_split_over_many_chunks_is_joined_once() -> None:
    decoder = SSEDecoder()
    pieces = [b"data: ", *[b"x" * 1000] * 50]
    items = [item for piece in pieces for item in decoder.feed(piece)]
    items += decoder.feed(b"\n\n")
    assert items == ["x" * 50_000]


def test_a_line_past_the_cap_is_refused() -> None:
    decoder = SSEDecoder(max_line=100)
    assert decoder.feed(b"data: " + b"y" * 60) == []
    with pytest.raises(LineTooLong, match="passed 100 characters"):
        decoder.feed(b"y" * 60)


def test_complete_lines_under_the_cap_pass() -> None:
    decoder = SSEDecoder(max_line=100)
    assert decoder.feed(b"data: " + b"y" * 90 + b"\n\n") == ["y" * 90]
