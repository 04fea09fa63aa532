"""The chat-completions wire format: a request's JSON body, and stream chunks turned into events.

Pure, no I/O (as :mod:`dsh_core.model.sse` is): the adapter feeds it what the SSE decoder returns
for each network read, and sends what it builds::

    body = encode_request(request)          # or, step after step: encoder.encode(request)
    parser = StreamParser(request_id, reasoning_shown=False)
    events, failure = parser.take(decoder.feed(chunk))   # per read, deltas merged per kind
    ...
    ending = parser.finish()   # after [DONE]: tool calls, then Finish; or EMPTY_RESPONSE

Rules (SPEC sections 5 and 7):

- Deltas of one kind that one read completes are merged into one event.
- ``delta.tool_calls`` fragments are gathered by ``index``: ``id``, ``type`` and
  ``function.name`` once, ``function.arguments`` concatenated and never parsed (the loop parses
  them; an argument string that is not JSON is its business). When the step ends, one
  :class:`~dsh_core.model.seam.ToolCallRequest` per index, in index order, then
  ``Finish("tool-calls")`` (``Finish("max-tokens")`` after ``length``: the loop answers the calls
  "not run"). Two calls with one id are ``MALFORMED_RESPONSE``: results are matched to calls by id.
- A final answer with no text and no tool call is ``EMPTY_RESPONSE``, reasoning or not.
- Anything that is not the protocol is ``MALFORMED_RESPONSE``, with the payload quoted.
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from ..errors import CONTENT_FILTER, EMPTY_RESPONSE, MALFORMED_RESPONSE, SERVER, LlmError
from .classify import error_event, in_band_error
from .seam import (
    AssistantMessage,
    ChatRequest,
    Event,
    Finish,
    KeepAlive,
    Message,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    Usage,
    UserMessage,
)
from .sse import Comment, Item

__all__ = [
    "NO_OUTPUT",
    "SNIPPET",
    "RequestEncoder",
    "StreamParser",
    "build_payload",
    "encode_request",
]

NO_OUTPUT = "(no output)"
"""Sent as the content of a tool message whose output is empty (SPEC section 7)."""
SNIPPET = 120
"""Characters of a malformed payload quoted in the message."""

_DECODER = json.JSONDecoder()
_KEEP_ALIVE = KeepAlive()


# -- the request -----------------------------------------------------------------------------


def build_payload(request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a streaming chat-completions request."""
    payload: dict[str, Any] = {
        "model": request.model,
        "messages": [_message(message) for message in request.messages],
    }
    payload.update(_options(request))
    return payload


def _options(request: ChatRequest) -> dict[str, Any]:
    """The body's keys after ``messages``, in the order they are sent."""
    options: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
    if request.tools:
        options["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                },
            }
            for tool in request.tools
        ]
    if request.tool_choice is not None and request.tools:
        options["tool_choice"] = request.tool_choice
    if request.max_tokens is not None:
        options["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.stop:
        options["stop"] = list(request.stop)
    if request.thinking is not None:
        options["thinking"] = {"type": "enabled" if request.thinking else "disabled"}
    if request.reasoning_effort is not None:
        options["reasoning_effort"] = request.reasoning_effort
    return options


def encode_request(request: ChatRequest) -> bytes:
    """:func:`build_payload` as UTF-8 JSON bytes."""
    payload = build_payload(request)
    try:
        return json.dumps(payload, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape the model wrote) has no UTF-8 form; ASCII
        # JSON escapes it and lets the server judge, instead of failing the turn here.
        return json.dumps(payload).encode()


_UNENCODABLE = b""
"""Cached for a message with no UTF-8 form (a lone surrogate): the whole body then takes
:func:`encode_request`'s ASCII way, as it always did. No message encodes to empty bytes."""


class RequestEncoder:
    """:func:`encode_request` for the steps of conversations: each message is encoded once.

    A conversation's history only grows between compactions, and its messages are immutable
    records, so the bytes of a message sent in one step are the bytes it has in the next. Near
    a 1M-token window re-encoding all of it was most of the time between an answer and the next
    request; here a step encodes only the messages it has not sent before and joins the rest.
    The bytes are exactly :func:`encode_request`'s (a test compares them).

    Entries are keyed by the message object (held, so its ``id`` cannot be reused) and dropped
    once :data:`KEPT` requests in a row have not carried them: a compaction's replaced history
    goes, and a subagent sharing the adapter keeps its own messages between its parent's steps.
    """

    KEPT = 4
    """Requests an unused entry survives: a parent and the subagents it runs in turn."""

    __slots__ = ("_entries", "_request_number")

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Message, bytes, int]] = {}
        self._request_number = 0

    def __len__(self) -> int:
        return len(self._entries)

    def encode(self, request: ChatRequest) -> bytes:
        """The request's body, byte for byte :func:`encode_request`'s."""
        self._request_number = number = self._request_number + 1
        entries = self._entries
        parts: list[bytes] = []
        for message in request.messages:
            key = id(message)
            entry = entries.get(key)
            if entry is None or entry[0] is not message:
                try:
                    encoded = json.dumps(_message(message), ensure_ascii=False).encode()
                except UnicodeEncodeError:
                    encoded = _UNENCODABLE
            else:
                encoded = entry[1]
            entries[key] = (message, encoded, number)
            parts.append(encoded)
        if len(entries) > len(parts):
            oldest = number - self.KEPT
            self._entries = {k: e for k, e in entries.items() if e[2] > oldest}
        if _UNENCODABLE in parts:
            return encode_request(request)
        # json.dumps writes a dict as '{"key": value, ...}' and a list as '[a, b]': the same
        # separators, so the pieces join into the bytes one call would have written.
        try:
            model = json.dumps(request.model, ensure_ascii=False).encode()
            tail = json.dumps(_options(request), ensure_ascii=False).encode()
        except UnicodeEncodeError:
            return encode_request(request)
        head = b'{"model": ' + model
        return b"".join((head, b', "messages": [', b", ".join(parts), b"], ", tail[1:]))


def _message(message: Message) -> dict[str, Any]:
    match message:
        case SystemMessage() | UserMessage():
            return {"role": message.role, "content": message.content}
        case AssistantMessage():
            data: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                data["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
                # Thinking mode answers 400 without it on a tool-calling message, even empty;
                # elsewhere it is ignored, so it is sent only here.
                data["reasoning_content"] = message.reasoning or ""
            return data
        case ToolMessage():
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": message.content or NO_OUTPUT,
            }
        case _:
            assert_never(message)


# -- the stream ------------------------------------------------------------------------------


class _BadCall(Exception):
    """A tool-call fragment that is not the protocol; the message says how."""


class _PartialCall:
    """One index of ``delta.tool_calls`` while its fragments arrive."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []
        """The pieces, joined once when the step ends (a 1 MB argument string comes in
        thousands of them)."""


class StreamParser:
    """Turns decoded SSE items into events for one attempt; knows where the answer stands."""

    __slots__ = (
        "_calls",
        "_has_reasoning",
        "_has_text",
        "_reasoning_shown",
        "done",
        "finish_reason",
        "request_id",
        "shown",
    )

    def __init__(self, request_id: str | None, *, reasoning_shown: bool = True) -> None:
        self.request_id = request_id
        """The server's ``x-request-id``, put on every failure."""
        self._reasoning_shown = reasoning_shown
        self.done = False
        """``data: [DONE]`` arrived."""
        self.finish_reason: str | None = None
        """The ``finish_reason`` the server gave, once it has."""
        self.shown = False
        """Something the person has seen arrived: text, reasoning when it is shown, or a tool
        call (whose answer must not be asked for twice). From here on a failure is final."""
        self._has_text = False
        self._has_reasoning = False
        self._calls: dict[int, _PartialCall] = {}

    def take(self, items: list[Item]) -> tuple[list[Event], LlmError | None]:
        """Events for ``items`` (runs of one kind merged) and the failure that ends them, if any.

        The events before a failure are still returned: they arrived before it, and showing
        them is honest. This is the hot loop of a long answer, hence its plain style.
        """
        events: list[Event] = []
        run: list[str] = []  # consecutive pieces of one kind, merged into one event
        run_is_text = True
        failure: LlmError | None = None
        text_seen = reasoning_seen = False  # a non-empty delta of that kind among these items
        decode = _DECODER.raw_decode
        for item in items:
            if isinstance(item, str):
                data = item
            elif isinstance(item, Comment):
                if run:
                    events.append(_delta(run, run_is_text))
                    run = []
                if not events or events[-1].__class__ is not KeepAlive:
                    events.append(_KEEP_ALIVE)
                continue
            else:
                # A named event: OpenAI-compatible servers send none, except to report an error.
                if item.event == "error":
                    failure = error_event(item.data, self.request_id)
                    break
                data = item.data
            # raw_decode skips json.loads' whitespace checks; anything unusual takes the slow way.
            try:
                chunk, end = decode(data)
            except ValueError:
                end = -1
            if end != len(data):
                if data == "[DONE]":
                    self.done = True
                    break
                if not data.strip():
                    continue  # an empty event (a proxy's heartbeat) carries no chunk
                try:
                    chunk = json.loads(data)
                except ValueError as exc:
                    failure = self._malformed(f"is not valid JSON: {_quote(data)}")
                    failure.__cause__ = exc
                    break
            if chunk.__class__ is not dict:
                failure = self._malformed(f"is not a JSON object: {_quote(data)}")
                break
            error = chunk.get("error")
            if error is not None:
                failure = in_band_error(error, self.request_id)
                break
            choices = chunk.get("choices")
            if choices:
                choice: Any = choices[0] if choices.__class__ is list else None
                if choice.__class__ is not dict:
                    failure = self._malformed(f"has malformed choices: {_quote(data)}")
                    break
                delta = choice.get("delta")
                if delta:
                    if delta.__class__ is not dict:
                        failure = self._malformed(f"has a malformed delta: {_quote(data)}")
                        break
                    reasoning = delta.get("reasoning_content")
                    text = delta.get("content")
                    if reasoning:
                        if reasoning.__class__ is not str:
                            failure = self._malformed(f"has a non-text delta: {_quote(data)}")
                            break
                        if run_is_text:
                            if run:
                                events.append(_delta(run, True))
                                run = []
                            run_is_text = False
                        run.append(reasoning)
                        reasoning_seen = True
                    if text:
                        if text.__class__ is not str:
                            failure = self._malformed(f"has a non-text delta: {_quote(data)}")
                            break
                        if not run_is_text:
                            if run:
                                events.append(_delta(run, False))
                                run = []
                            run_is_text = True
                        run.append(text)
                        text_seen = True
                    calls = delta.get("tool_calls")
                    if calls is not None:
                        failure = self._take_calls(calls, data)
                        if failure is not None:
                            break
                finish = choice.get("finish_reason")
                if finish:
                    self.finish_reason = str(finish)
                    failure = self._finish_failure(self.finish_reason)
                    if failure is not None:
                        break
            usage = chunk.get("usage")
            if usage:
                if run:
                    events.append(_delta(run, run_is_text))
                    run = []
                events.append(_usage(usage))
        if run:
            events.append(_delta(run, run_is_text))
        if text_seen:
            self._has_text = self.shown = True
        if reasoning_seen:
            self._has_reasoning = True
            if self._reasoning_shown:
                self.shown = True
        return events, failure

    def finish(self) -> list[Event] | LlmError:
        """The closing events once the stream is complete: one ``ToolCallRequest`` per call in
        index order, then ``Finish``; or the failure of an answer that is not one."""
        length = self.finish_reason == "length"
        if self._calls:
            events: list[Event] = []
            indexes: dict[str, int] = {}
            for index in sorted(self._calls):
                call = self._calls[index]
                if call.id is None or call.name is None:
                    missing = "an id" if call.id is None else "a name"
                    return self._malformed_answer(f"sent tool call {index} without {missing}")
                if call.id in indexes:
                    # Results are matched to calls by id: the next request would carry two
                    # results with one tool_call_id, and crash repair would see one call.
                    return self._malformed_answer(
                        f"sent tool calls {indexes[call.id]} and {index} with the same id "
                        f"{_quote(call.id)}"
                    )
                indexes[call.id] = index
                events.append(
                    ToolCallRequest(ToolCall(call.id, call.name, "".join(call.arguments)))
                )
            events.append(Finish("max-tokens" if length else "tool-calls"))
            return events
        if self._has_text or (length and self._has_reasoning):
            # Reasoning cut by the token limit is a max-tokens stop, which has its own line.
            return [Finish("max-tokens" if length else "stop")]
        return LlmError(
            "DeepSeek API sent an empty answer", EMPTY_RESPONSE, request_id=self.request_id
        )

    def _take_calls(self, calls: object, data: str) -> LlmError | None:
        """Gather one chunk's ``delta.tool_calls`` fragments; the failure if one is malformed."""
        if not isinstance(calls, list):
            return self._malformed(f"has malformed tool_calls: {_quote(data)}")
        try:
            for fragment in calls:
                self._take_call(fragment)
        except _BadCall as bad:
            return self._malformed(f"{bad}: {_quote(data)}")
        if calls:
            self.shown = True  # a call's answer must not be asked for twice
        return None

    def _take_call(self, fragment: object) -> None:
        if not isinstance(fragment, dict):
            raise _BadCall("has a malformed tool call")
        index = fragment.get("index")
        if type(index) is not int:  # not bool either
            raise _BadCall("has a tool call without an integer index")
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _PartialCall()
        kind = fragment.get("type")
        if kind is not None and kind != "function":
            raise _BadCall("has a tool call that is not a function")
        call.id = _once(fragment.get("id"), call.id, "id")
        function = fragment.get("function")
        if function is None:
            return
        if not isinstance(function, dict):
            raise _BadCall("has a malformed tool call function")
        call.name = _once(function.get("name"), call.name, "name")
        arguments = function.get("arguments")
        if arguments is not None:
            if not isinstance(arguments, str):
                raise _BadCall("has tool call arguments that are not a string")
            if arguments:
                call.arguments.append(arguments)

    def _malformed(self, what: str) -> LlmError:
        return self._malformed_answer(f"stream event {what}")

    def _malformed_answer(self, what: str) -> LlmError:
        return LlmError(f"DeepSeek API {what}", MALFORMED_RESPONSE, request_id=self.request_id)

    def _finish_failure(self, reason: str) -> LlmError | None:
        if reason == "content_filter":
            return LlmError(
                "DeepSeek API stopped the answer: finish_reason content_filter",
                CONTENT_FILTER,
                request_id=self.request_id,
            )
        if reason == "insufficient_system_resource":
            return LlmError(
                "DeepSeek API stopped the answer: finish_reason insufficient_system_resource",
                SERVER,
                request_id=self.request_id,
            )
        return None


def _once(value: object, current: str | None, what: str) -> str | None:
    """A field that arrives once per call: absent or empty later, or repeated unchanged."""
    if value is None or value == "":
        return current
    if not isinstance(value, str):
        raise _BadCall(f"has a tool call {what} that is not a string")
    if current is not None and value != current:
        raise _BadCall(f"changes the {what} of a tool call")
    return value


def _delta(run: list[str], is_text: bool) -> Event:
    text = "".join(run)
    return TextDelta(text) if is_text else ReasoningDelta(text)


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = _int(usage.get("prompt_cache_hit_tokens"))
    if not cached and isinstance(prompt_details, dict):
        cached = _int(prompt_details.get("cached_tokens"))
    reasoning = 0
    if isinstance(completion_details, dict):
        reasoning = _int(completion_details.get("reasoning_tokens"))
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=cached,
        reasoning_tokens=reasoning,
    )


def _int(value: object) -> int:
    return value if type(value) is int else 0


def _quote(data: str) -> str:
    """The first characters of a payload, quoted with escapes so it stays on one line."""
    snippet = data[:SNIPPET]
    return repr(snippet) + ("..." if len(data) > SNIPPET else "")
