"""The wire format without sockets: request bodies, and chunks turned into events.

The same rules over real sockets, through the adapter, are in ``test_deepseek.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_core.errors import LlmError
from dsh_core.model.seam import (
    AssistantMessage,
    ChatRequest,
    Event,
    Finish,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from dsh_core.model.sse import Item, SSEDecoder
from dsh_core.model.wire import NO_OUTPUT, StreamParser, build_payload, encode_request

ODD_ARGUMENTS = '{"a": 1,  "b":"\\u00e9" ,"c" :[ ]}'
"""Arguments as a model may write them: odd spacing, an escape. Sent back exactly so."""


def sse(*payloads: object) -> list[Item]:
    """Decoded SSE items for ``data:`` events (a str payload is sent as it is)."""
    body = b"".join(
        b"data: "
        + (p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)).encode()
        + b"\n\n"
        for p in payloads
    )
    return SSEDecoder().feed(body)


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def call(index: Any, **fields: Any) -> dict[str, Any]:
    """One ``delta.tool_calls`` fragment: ``id``, ``type``, and ``name``/``arguments``."""
    fragment: dict[str, Any] = {"index": index}
    for key in ("id", "type"):
        if key in fields:
            fragment[key] = fields.pop(key)
    if fields:
        fragment["function"] = fields
    return fragment


def calls(*fragments: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return chunk({"tool_calls": list(fragments)}, finish_reason)


def parse(
    items: list[Item], *, reasoning_shown: bool = True
) -> tuple[list[Event], LlmError | None]:
    """Feed ``items`` (ending with ``[DONE]``); the events, with the ending or the failure."""
    parser = StreamParser("req-1", reasoning_shown=reasoning_shown)
    events, failure = parser.take(items)
    if failure is not None:
        return events, failure
    assert parser.done, "the items must end with [DONE]"
    ending = parser.finish()
    if isinstance(ending, LlmError):
        return events, ending
    return events + ending, None


def failure_of(items: list[Item]) -> tuple[list[Event], LlmError]:
    """The events before the failure that ``items`` end in, and that failure."""
    events, failure = parse(items)
    assert failure is not None, events
    return events, failure


def events_of(*payloads: object) -> list[Event]:
    events, failure = parse(sse(*payloads, "[DONE]"))
    assert failure is None, failure
    return events


# -- the request -------------------------------------------------------------------------------


def test_every_message_kind_is_serialised() -> None:
    first = ToolCall("call_0", "read", ODD_ARGUMENTS)
    second = ToolCall("call_1", "glob", "")
    request = ChatRequest(
        model="m",
        messages=(
            SystemMessage("You are dsh."),
            UserMessage("look"),
            AssistantMessage("Reading.", reasoning="I should read.", tool_calls=(first, second)),
            ToolMessage("call_0", "1\tline"),
            ToolMessage("call_1", ""),
            AssistantMessage("Done.", reasoning="ignored without tool calls"),
            AssistantMessage(tool_calls=(ToolCall("call_2", "bash", "{}"),)),
            ToolMessage("call_2", " "),
        ),
    )
    assert build_payload(request)["messages"] == [
        {"role": "system", "content": "You are dsh."},
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "read", "arguments": ODD_ARGUMENTS}},
                {"id": "call_1", "type": "function",
                 "function": {"name": "glob", "arguments": ""}},
            ],
            "reasoning_content": "I should read.",
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "1\tline"},
        {"role": "tool", "tool_call_id": "call_1", "content": NO_OUTPUT},
        {"role": "assistant", "content": "Done."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_2", "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}},
            ],
            "reasoning_content": "",  # none, but thinking mode needs the field
        },
        {"role": "tool", "tool_call_id": "call_2", "content": " "},
    ]  # fmt: skip
    assert NO_OUTPUT == "(no output)"


def test_tools_are_sent_only_when_there_are_some() -> None:
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
    spec = ToolSpec("read", "Read a file.", schema)
    with_tools = build_payload(ChatRequest("m", (UserMessage("hi"),), tools=(spec,)))
    assert with_tools["tools"] == [
        {
            "type": "function",
            "function": {"name": "read", "description": "Read a file.", "parameters": schema},
        }
    ]
    assert "tools" not in build_payload(ChatRequest("m", (UserMessage("hi"),)))


def test_the_body_keeps_argument_strings_exactly() -> None:
    request = ChatRequest(
        "m", (AssistantMessage(tool_calls=(ToolCall("c", "read", ODD_ARGUMENTS),)),)
    )
    body = json.loads(encode_request(request))
    assert body["messages"][0]["tool_calls"][0]["function"]["arguments"] == ODD_ARGUMENTS


def test_the_body_is_utf8_and_a_lone_surrogate_does_not_break_it() -> None:
    plain = ChatRequest("m", (UserMessage("é 🙂"),))
    assert "é 🙂".encode() in encode_request(plain)  # UTF-8, not \u escapes
    odd = ChatRequest("m", (UserMessage("é \ud800"),))  # a "\ud800" the model once wrote
    assert json.loads(encode_request(odd))["messages"][0]["content"] == "é \ud800"


# -- text and reasoning ------------------------------------------------------------------------


def test_runs_of_one_kind_are_merged() -> None:
    events = events_of(
        chunk({"reasoning_content": ""}),  # the first reasoning chunk may be empty
        chunk({"reasoning_content": "hm"}),
        chunk({"reasoning_content": "m"}),
        chunk({"content": "a", "reasoning_content": None}),
        chunk({"content": "b"}, "stop"),
    )
    assert events == [ReasoningDelta("hmm"), TextDelta("ab"), Finish("stop")]


def test_reasoning_without_text_is_an_empty_answer() -> None:
    events, failure = failure_of(sse(chunk({"reasoning_content": "thinking..."}, "stop"), "[DONE]"))
    assert events == [ReasoningDelta("thinking...")]
    assert failure.code == "EMPTY_RESPONSE"
    assert failure.message == "DeepSeek API sent an empty answer"
    assert failure.request_id == "req-1"


def test_reasoning_cut_by_the_token_limit_is_a_max_tokens_stop() -> None:
    events = events_of(chunk({"reasoning_content": "long thought"}, "length"))
    assert events == [ReasoningDelta("long thought"), Finish("max-tokens")]


def test_tool_calls_finish_without_calls_is_a_plain_stop() -> None:
    assert events_of(chunk({"content": "ok"}, "tool_calls"))[-1] == Finish("stop")


@pytest.mark.parametrize(("reasoning_shown", "shown"), [(True, True), (False, False)])
def test_reasoning_counts_as_shown_only_when_it_is_shown(
    reasoning_shown: bool, shown: bool
) -> None:
    parser = StreamParser(None, reasoning_shown=reasoning_shown)
    parser.take(sse(chunk({"reasoning_content": "hm"})))
    assert parser.shown is shown
    parser.take(sse(chunk({"content": "text"})))
    assert parser.shown is True


# -- tool calls --------------------------------------------------------------------------------


def test_one_call_in_pieces() -> None:
    events = events_of(
        chunk({"role": "assistant", "content": ""}),
        calls(call(0, id="call_0", type="function", name="read", arguments="")),
        calls(call(0, arguments='{"file_')),
        calls(call(0, arguments='path": "a.txt"}')),
        chunk({}, "tool_calls"),
    )
    assert events == [
        ToolCallRequest(ToolCall("call_0", "read", '{"file_path": "a.txt"}')),
        Finish("tool-calls"),
    ]


def test_parallel_calls_come_in_index_order_whatever_the_interleaving() -> None:
    events = events_of(
        calls(call(1, id="call_b", name="glob", arguments='{"pat')),
        calls(call(0, id="call_a", name="read", arguments="{")),
        calls(call(2, id="call_c", name="grep"), call(1, arguments='tern": "*"}')),
        calls(call(0, arguments="}"), call(2, arguments="{}")),
        chunk({}, "tool_calls"),
    )
    assert events == [
        ToolCallRequest(ToolCall("call_a", "read", "{}")),
        ToolCallRequest(ToolCall("call_b", "glob", '{"pattern": "*"}')),
        ToolCallRequest(ToolCall("call_c", "grep", "{}")),
        Finish("tool-calls"),
    ]


def test_text_and_calls_in_one_delta() -> None:
    events = events_of(
        chunk({"content": "Let me look.", "tool_calls": [call(0, id="c", name="read")]}),
        calls(call(0, arguments="{}"), finish_reason="tool_calls"),
    )
    assert events == [
        TextDelta("Let me look."),
        ToolCallRequest(ToolCall("c", "read", "{}")),
        Finish("tool-calls"),
    ]


def test_arguments_are_never_parsed() -> None:
    events = events_of(
        calls(call(0, id="c", name="read", arguments='{"oops": '), finish_reason="tool_calls")
    )
    assert events[0] == ToolCallRequest(ToolCall("c", "read", '{"oops": '))


def test_repeated_id_and_name_and_null_fields_are_tolerated() -> None:
    events = events_of(
        calls(call(0, id="c", name="read", arguments="{")),
        calls(call(0, id="c", name="read", arguments="}")),
        calls(
            {"index": 0, "id": None, "type": None, "function": {"name": None, "arguments": None}}
        ),
        calls({"index": 0, "id": "", "function": {"name": ""}}),
        chunk({"tool_calls": None}, "tool_calls"),
    )
    assert events[0] == ToolCallRequest(ToolCall("c", "read", "{}"))


def test_a_length_finish_with_calls_is_max_tokens() -> None:
    events = events_of(
        calls(call(0, id="c", name="write", arguments='{"content": "ab'), finish_reason="length")
    )
    assert events == [
        ToolCallRequest(ToolCall("c", "write", '{"content": "ab')),
        Finish("max-tokens"),
    ]


def test_a_call_fragment_is_shown_and_an_empty_list_is_not() -> None:
    parser = StreamParser(None)
    parser.take(sse(chunk({"tool_calls": []})))
    assert parser.shown is False
    parser.take(sse(calls(call(0, id="c"))))
    assert parser.shown is True


@pytest.mark.parametrize(
    ("fragments", "missing"),
    [
        ([call(0, name="read", arguments="{}")], "an id"),
        ([call(0, id="c", arguments="{}")], "a name"),
        ([call(0, id="a", name="read"), call(3, arguments="{}")], "an id"),
    ],
)
def test_a_call_without_id_or_name_is_malformed(fragments: list[Any], missing: str) -> None:
    _, failure = failure_of(sse(calls(*fragments, finish_reason="tool_calls"), "[DONE]"))
    index = fragments[-1]["index"]
    assert failure.code == "MALFORMED_RESPONSE"
    assert failure.message == f"DeepSeek API sent tool call {index} without {missing}"


def test_two_calls_with_one_id_are_malformed() -> None:
    # Results are matched to calls by id: two calls with one id cannot both be answered.
    fragments = [
        call(0, id="c", name="read", arguments="{}"),
        call(1, id="d", name="read", arguments="{}"),
        call(2, id="c", name="grep", arguments="{}"),
    ]
    _, failure = failure_of(sse(calls(*fragments, finish_reason="tool_calls"), "[DONE]"))
    assert failure.code == "MALFORMED_RESPONSE"
    assert failure.message == "DeepSeek API sent tool calls 0 and 2 with the same id 'c'"
    assert failure.request_id == "req-1"


@pytest.mark.parametrize(
    ("delta", "what"),
    [
        ({"tool_calls": {"index": 0}}, "has malformed tool_calls"),
        ({"tool_calls": "call"}, "has malformed tool_calls"),
        ({"tool_calls": ["call"]}, "has a malformed tool call"),
        ({"tool_calls": [{"id": "c"}]}, "has a tool call without an integer index"),
        ({"tool_calls": [{"index": "0"}]}, "has a tool call without an integer index"),
        ({"tool_calls": [{"index": True}]}, "has a tool call without an integer index"),
        ({"tool_calls": [{"index": 0.0}]}, "has a tool call without an integer index"),
        ({"tool_calls": [{"index": 0, "type": "code"}]}, "has a tool call that is not a function"),
        ({"tool_calls": [{"index": 0, "id": 7}]}, "has a tool call id that is not a string"),
        ({"tool_calls": [{"index": 0, "function": "read"}]},
         "has a malformed tool call function"),
        ({"tool_calls": [{"index": 0, "function": {"name": ["read"]}}]},
         "has a tool call name that is not a string"),
        ({"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]},
         "has tool call arguments that are not a string"),
    ],
)  # fmt: skip
def test_malformed_tool_call_shapes(delta: dict[str, Any], what: str) -> None:
    data = json.dumps({"choices": [{"delta": delta}]})
    assert len(data) <= 120  # quoted whole
    _, failure = failure_of(sse(data, "[DONE]"))
    assert failure.code == "MALFORMED_RESPONSE"
    assert failure.message == f"DeepSeek API stream event {what}: {data!r}"
    assert failure.request_id == "req-1"


@pytest.mark.parametrize("field", ["id", "name"])
def test_a_call_that_changes_its_id_or_name_is_malformed(field: str) -> None:
    first = call(0, id="a", name="read")
    second = call(0, id="b") if field == "id" else call(0, name="grep")
    _, failure = failure_of(sse(calls(first), calls(second), "[DONE]"))
    assert failure.code == "MALFORMED_RESPONSE"
    assert failure.message.startswith(
        f"DeepSeek API stream event changes the {field} of a tool call: "
    )


# -- error events ------------------------------------------------------------------------------


def test_a_named_error_event_fails_after_the_text_before_it() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Some "}}]}\n\n'
        b'event: error\ndata: {"type": "error", "code": "overloaded", "message": "Busy"}\n\n'
        b"data: [DONE]\n\n"
    )
    events, failure = StreamParser("r").take(SSEDecoder().feed(body))
    assert events == [TextDelta("Some ")]
    assert failure is not None and failure.code == "SERVER"
    assert failure.message == "DeepSeek API reported an error in the stream: Busy"


def test_another_named_event_is_read_as_a_chunk() -> None:
    body = b'event: message\ndata: {"choices":[{"delta":{"content":"x"}}]}\n\n'
    body += b'event: delta\ndata: {"choices":[{"delta":{"content":"y"}}]}\n\n'
    events, failure = StreamParser("r").take(SSEDecoder().feed(body))
    assert failure is None and events == [TextDelta("xy")]
