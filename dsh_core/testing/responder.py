"""How the stub server writes a response: HTTP/1.1 framing and DeepSeek-shaped stream events.

:class:`Responder` writes one :data:`~.behaviours.Behaviour` to an asyncio stream; the helpers
below build the bytes (error bodies, ``data:`` events with DeepSeek's compact JSON, usage).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, assert_never

from .behaviours import (
    Answer,
    Behaviour,
    Cut,
    Disconnect,
    Empty,
    EndWithoutDone,
    Held,
    HttpError,
    InBandError,
    KeepAlives,
    LongStream,
    Malformed,
    RawStream,
    SlowStream,
    Stall,
    ToolCalls,
    WrongContentType,
)
from .prompts import PromptCount

__all__ = ["Responder", "error_body", "send_json"]

_WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. ")
_CREATED = 1_700_000_000
_COMPACT = (",", ":")  # DeepSeek sends compact JSON
_DONE = b"data: [DONE]\n\n"
_GATE_POLL = 0.01
"""Seconds between two looks at a :class:`Held` gate: how soon it notices, not a verdict."""


class Responder:
    """Writes one response for one behaviour."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        number: int,
        reasoned_calls: Callable[[list[str]], None],
        prompt: PromptCount | None = None,
    ) -> None:
        """Answer request ``number`` (``x-request-id: stub-<number>``).

        Its calls are named ``call_<number>_<index>``; ``reasoned_calls`` is told the ids of
        calls streamed after reasoning, before any of them is sent. ``prompt``: what the usage
        reports as ``prompt_tokens`` and its cache hit (without: 7 tokens, no hit).
        """
        self.writer = writer
        self.number = number
        self.request_id = f"stub-{number}"
        self.reasoned_calls = reasoned_calls
        self.prompt = (prompt.tokens, prompt.cache_hit) if prompt is not None else (7, 0)

    async def run(self, behaviour: Behaviour) -> bool:
        """Respond; False when the connection must close afterwards."""
        match behaviour:
            case Held(gate=gate, then=then):
                await _wait_gate(gate)
                return await self.run(then)  # ``then`` may be a status, not a stream
            case HttpError():
                await self._http_error(behaviour)
                return True
            case Disconnect():
                return False
            case WrongContentType(body=body, content_type=content_type):
                await _send(self.writer, 200, body.encode(), content_type, {}, self.request_id)
                return True
            case _:
                await self._start_stream()
                ended = await self._stream(behaviour)
                if ended:
                    self.writer.write(b"0\r\n\r\n")
                    await self.writer.drain()
                return ended

    async def _http_error(self, error: HttpError) -> None:
        extra = {} if error.retry_after is None else {"Retry-After": str(error.retry_after)}
        if error.raw_body is not None:
            html = error.raw_body.encode()
            content_type = "text/html; charset=utf-8"
            await _send(self.writer, error.status, html, content_type, extra, self.request_id)
        else:
            body = error_body(error.message, _error_type(error.status))
            await send_json(self.writer, error.status, body, extra, self.request_id)

    async def _start_stream(self) -> None:
        self.writer.write(
            b"HTTP/1.1 200 OK\r\n"
            b"Content-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n"
            b"x-request-id: " + self.request_id.encode() + b"\r\n\r\n"
        )
        await self.writer.drain()

    def _chunk(self, data: bytes) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    async def _send_events(self, events: list[bytes], delay: float = 0.0) -> None:
        """Each event its own HTTP chunk; with a delay, flushed one at a time."""
        for event in events:
            self._chunk(event)
            if delay:
                await self.writer.drain()
                await asyncio.sleep(delay)
        await self.writer.drain()

    async def _stream(self, behaviour: Behaviour) -> bool:
        """Write the body of a 200 event stream; False when the connection was cut."""
        w = self.writer
        match behaviour:
            case Answer():
                await self._send_events(_answer_events(behaviour, self.prompt), behaviour.delay)
            case ToolCalls():
                ids = [f"call_{self.number}_{k}" for k in range(len(behaviour.calls))]
                if behaviour.reasoning is not None:
                    self.reasoned_calls(ids)
                events = _tool_call_events(behaviour, ids, self.prompt)
                await self._send_events(events, behaviour.delay)
            case KeepAlives(count=count, interval=interval, then=then):
                for i in range(count):
                    if i and interval:
                        await asyncio.sleep(interval)
                    self._chunk(b": keep-alive\n\n")
                    await w.drain()
                if interval:
                    await asyncio.sleep(interval)
                return await self._stream(then)
            case Held(gate=gate, then=then):  # after keep-alives: the rest of this stream
                await _wait_gate(gate)
                return await self._stream(then)
            case Stall(seconds=seconds, after_text=after_text):
                await self._send_events(_text_events(after_text))
                await asyncio.sleep(seconds)
                rest = Answer("" if after_text else "Sorry for the wait.")
                await self._send_events(_answer_events(rest, self.prompt)[1:])
            case Cut(after_text=after_text):
                await self._send_events(_text_events(after_text))
                return False
            case Malformed(raw_data=raw_data):
                events = _text_events(None)
                events.append(b"data: " + raw_data.encode() + b"\n\n")
                events.append(_DONE)
                await self._send_events(events)
            case InBandError(message=message, after_text=after_text, code=code):
                events = _text_events(after_text)
                error = {"error": {"message": message, "type": code, "param": None, "code": code}}
                events.append(b"data: " + json.dumps(error).encode() + b"\n\n")
                await self._send_events(events)
            case LongStream(deltas=deltas, events_per_chunk=per_chunk, words_per_delta=per_delta):
                await self._send_events(_text_events(None))
                for data in _long_stream_chunks(deltas, max(per_chunk, 1), max(per_delta, 1)):
                    self._chunk(data)
                    await w.drain()
                self._chunk(_usage_event(self.prompt, deltas) + _DONE)
                await w.drain()
            case SlowStream(text=text, delay=delay):
                words = [word + " " for word in text.split(" ")]
                words[-1] = words[-1][:-1]
                events = _text_events(None)
                events += [_event({"content": word}, None) for word in words]
                await self._send_events(events, delay)
                await self._send_events(_answer_events(Answer(""), self.prompt)[1:])
            case EndWithoutDone(text=text):
                await self._send_events(_text_events(text))
            case Empty():
                events = _text_events(None)
                events += [_event({"content": ""}, "stop"), _usage_event(self.prompt, 0)]
                events.append(_DONE)
                await self._send_events(events)
            case RawStream(chunks=chunks, delay=delay, end=end):
                for i, data in enumerate(chunks):
                    if i and delay:
                        await asyncio.sleep(delay)
                    self._chunk(data)
                    await w.drain()
                return end
            case HttpError() | Disconnect() | WrongContentType():
                # Not a stream: run() answers these, and one cannot follow keep-alives.
                raise AssertionError(f"{behaviour!r} cannot be part of an event stream")
            case _:
                assert_never(behaviour)
        return True


async def _wait_gate(gate: threading.Event) -> None:
    """Wait for ``gate`` without blocking the server's loop.

    Polled rather than ``gate.wait()`` in an executor: a blocked thread could not be cancelled,
    so a client that goes away, or a server that stops, would leave it waiting for a gate that
    may never be set (and interpreter exit joins executor threads).
    """
    while not gate.is_set():  # noqa: ASYNC110 (a thread's Event: nothing to await)
        await asyncio.sleep(_GATE_POLL)


# -- stream events -----------------------------------------------------------------------------


def _opening_events(
    text: str | None, reasoning: str | None, size: int
) -> tuple[list[bytes], int, int]:
    """The role event, then reasoning and text deltas; with the counts of text and reasoning."""
    pieces = _pieces(text or "", size)
    if reasoning is None:
        events = [_event({"role": "assistant", "content": ""}, None)]
        events += [_event({"content": piece}, None) for piece in pieces]
        return events, len(pieces), 0
    # As DeepSeek's reasoning models: an empty first reasoning piece, then the rest.
    thoughts = _pieces(reasoning, size)
    events = [_event({"role": "assistant", "content": None, "reasoning_content": ""}, None)]
    events += [_event({"content": None, "reasoning_content": p}, None) for p in thoughts]
    events += [_event({"content": p, "reasoning_content": None}, None) for p in pieces]
    return events, len(pieces), len(thoughts)


def _answer_events(answer: Answer, prompt: tuple[int, int]) -> list[bytes]:
    events, text_pieces, thoughts = _opening_events(
        answer.text, answer.reasoning, answer.chunk_size
    )
    events.append(_event({"content": ""}, answer.finish_reason))
    events.append(_usage_event(prompt, text_pieces + thoughts, thoughts))
    events.append(_DONE)
    return events


def _tool_call_events(calls: ToolCalls, ids: list[str], prompt: tuple[int, int]) -> list[bytes]:
    """Text and reasoning as an answer's, then each call's fragments, then the finish."""
    events, text_pieces, thoughts = _opening_events(calls.text, calls.reasoning, 4)
    per_call: list[list[dict[str, Any]]] = []
    for index, ((name, arguments), call_id) in enumerate(zip(calls.calls, ids, strict=True)):
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        rest = [
            {"index": index, "function": {"arguments": piece}}
            for piece in _pieces(arguments, calls.fragment_size)
        ]
        per_call.append([first, *rest])
    if calls.interleaved:
        rounds = max((len(fragments) for fragments in per_call), default=0)
        ordered = [f[r] for r in range(rounds) for f in per_call if r < len(f)]
    else:
        ordered = [fragment for fragments in per_call for fragment in fragments]
    events += [_event({"tool_calls": [fragment]}, None) for fragment in ordered]
    events.append(_event({"content": ""}, calls.finish_reason))
    events.append(_usage_event(prompt, text_pieces + thoughts + len(ordered), thoughts))
    events.append(_DONE)
    return events


def _text_events(text: str | None) -> list[bytes]:
    events = [_event({"role": "assistant", "content": ""}, None)]
    if text:
        events += [_event({"content": piece}, None) for piece in _pieces(text, 4)]
    return events


@functools.lru_cache(maxsize=4)
def _long_stream_chunks(deltas: int, per_chunk: int, words: int) -> tuple[bytes, ...]:
    """The body of a LongStream after its first event up to its usage, built once per shape
    (it is large)."""
    cycle = len(_WORDS)
    # Delta i starts where delta i - 1 ended: the answer reads "the quick brown fox ..." on.
    contents = [
        "".join(_WORDS[(i * words + j) % cycle] for j in range(words)) for i in range(cycle)
    ]
    events = [_event({"content": contents[i % cycle]}, None) for i in range(deltas)]
    events.append(_event({"content": ""}, "stop"))
    return tuple(b"".join(events[i : i + per_chunk]) for i in range(0, len(events), per_chunk))


def _event(delta: dict[str, Any], finish_reason: str | None) -> bytes:
    chunk = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": "deepseek-stub",
        "system_fingerprint": "fp_stub",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    return b"data: " + json.dumps(chunk, ensure_ascii=False, separators=_COMPACT).encode() + b"\n\n"


def _usage_event(prompt: tuple[int, int], completion: int, reasoning: int = 0) -> bytes:
    """DeepSeek's usage chunk; ``prompt`` is (prompt tokens, of which cache hits)."""
    tokens, hit = prompt
    usage = {
        "prompt_tokens": tokens,
        "completion_tokens": completion,
        "total_tokens": tokens + completion,
        "prompt_tokens_details": {"cached_tokens": hit},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": tokens - hit,
    }
    chunk = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": "deepseek-stub",
        "system_fingerprint": "fp_stub",
        "choices": [],
        "usage": usage,
    }
    return b"data: " + json.dumps(chunk, separators=_COMPACT).encode() + b"\n\n"


def _pieces(text: str, size: int) -> list[str]:
    size = max(size, 1)
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- plain HTTP responses ----------------------------------------------------------------------


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str,
    extra: dict[str, str],
    request_id: str | None,
) -> None:
    """Write a whole response with a ``Content-Length`` body."""
    lines = [
        f"HTTP/1.1 {status} {_reason(status)}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        f"Date: {email.utils.formatdate(usegmt=True)}",
    ]
    if request_id is not None:
        lines.append(f"x-request-id: {request_id}")
    lines += [f"{name}: {value}" for name, value in extra.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


async def send_json(
    writer: asyncio.StreamWriter,
    status: int,
    body: Any,
    extra: dict[str, str] | None = None,
    request_id: str | None = None,
) -> None:
    """Write a whole JSON response."""
    data = json.dumps(body).encode()
    await _send(writer, status, data, "application/json", extra or {}, request_id)


def error_body(message: str, kind: str) -> dict[str, Any]:
    """DeepSeek's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    error: dict[str, Any] = {"type": kind, "param": None, "code": kind}
    if message:
        error = {"message": message, **error}
    return {"error": error}


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "insufficient_balance",
        422: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "error")
