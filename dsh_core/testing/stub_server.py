"""A real OpenAI-compatible ``POST /chat/completions`` server on loopback, to fail on demand.

It runs an asyncio server in a thread of its own, speaks HTTP/1.1 with keep-alive and chunked
transfer, and streams DeepSeek-shaped server-sent events. Tests queue behaviours; the demo
triggers them with words in the prompt (:data:`TRIGGERS`)::

    with StubServer() as server:
        server.enqueue(HttpError(503, "Server overloaded"), Answer("hello"))
        adapter = DeepSeekAdapter(base_url=server.url, api_key="sk-test")
        ...
        assert len(server.requests) == 2

With the queue empty, a trigger word in the last user message picks the behaviour; else the
answer is ``You said: <last user message>``, streamed in small chunks with usage. A message that
merely extends an earlier one (the agent loop joins a failed turn's message to the next with a
blank line) counts only for what it adds.
``python -m dsh_core.stub_server [--port N]`` serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import hashlib
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any

from .chain import error_chain

__all__ = [
    "ESCAPE_TEXT",
    "TRIGGERS",
    "Answer",
    "Behaviour",
    "Cut",
    "Disconnect",
    "Empty",
    "EndWithoutDone",
    "HttpError",
    "InBandError",
    "KeepAlives",
    "LongStream",
    "Malformed",
    "RawStream",
    "SlowStream",
    "Stall",
    "StubServer",
    "WrongContentType",
    "closed_port",
]


@dataclass(frozen=True, slots=True)
class Answer:
    """A normal streamed answer, optionally preceded by reasoning."""

    text: str
    reasoning: str | None = None
    """Streamed as ``reasoning_content`` before the answer (the first piece empty, as DeepSeek)."""
    chunk_size: int = 4
    """Characters per delta."""
    delay: float = 0.0
    """Seconds between deltas."""
    finish_reason: str = "stop"
    """``stop``, ``length``, ``content_filter``, ``insufficient_system_resource``, ..."""


@dataclass(frozen=True, slots=True)
class HttpError:
    """An HTTP error status with a DeepSeek-shaped body ``{"error": {"message": ...}}``."""

    status: int
    message: str = ""
    """The body's ``error.message``; empty sends the error object without a message."""
    retry_after: str | int | None = None
    """The ``Retry-After`` header: seconds, or an HTTP date as a string."""
    raw_body: str | None = None
    """Send this body (as ``text/html``) instead of the JSON error object."""


@dataclass(frozen=True, slots=True)
class KeepAlives:
    """``: keep-alive`` comments ``interval`` seconds apart, then another behaviour."""

    count: int
    interval: float = 0.0
    then: Behaviour = field(default_factory=lambda: Answer("Thanks for waiting."))


@dataclass(frozen=True, slots=True)
class Stall:
    """Stream ``after_text``, go silent for ``seconds``, then finish the answer."""

    seconds: float
    after_text: str | None = None


@dataclass(frozen=True, slots=True)
class Cut:
    """Stream ``after_text``, then close the connection in the middle of the body."""

    after_text: str = ""


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Read the request, then close the connection without any response."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """Send ``data: <raw_data>`` (not a valid chunk object), then ``[DONE]``."""

    raw_data: str = '{"choices": [{"delta": {"content": "oops"'


@dataclass(frozen=True, slots=True)
class InBandError:
    """Stream ``after_text``, then an ``{"error": {...}}`` payload inside the stream."""

    message: str
    after_text: str | None = None
    code: str = "invalid_request_error"


@dataclass(frozen=True, slots=True)
class LongStream:
    """A very long, fast answer of ``deltas`` short deltas, written in large HTTP chunks."""

    deltas: int
    events_per_chunk: int = 256
    """Server-sent events per HTTP chunk; 1 writes each event as its own chunk."""


@dataclass(frozen=True, slots=True)
class SlowStream:
    """An answer streamed word by word, ``delay`` seconds apart (to cancel with Ctrl-C)."""

    text: str
    delay: float = 0.1


@dataclass(frozen=True, slots=True)
class EndWithoutDone:
    """Stream ``text``, then end the body cleanly without ``data: [DONE]``."""

    text: str = "partial"


@dataclass(frozen=True, slots=True)
class Empty:
    """A well-formed stream with no content at all."""


@dataclass(frozen=True, slots=True)
class WrongContentType:
    """A 200 response that is not an event stream (a captive portal, a misrouted proxy)."""

    body: str = "<html><body>Please sign in</body></html>"
    content_type: str = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True)
class RawStream:
    """A 200 event stream whose body is exactly ``chunks``, one HTTP chunk each."""

    chunks: tuple[bytes, ...]
    delay: float = 0.0
    """Seconds between chunks."""
    end: bool = True
    """Finish the body cleanly; ``False`` cuts the connection after the last chunk."""


Behaviour = (
    Answer
    | HttpError
    | KeepAlives
    | Stall
    | Cut
    | Disconnect
    | Malformed
    | InBandError
    | LongStream
    | SlowStream
    | EndWithoutDone
    | Empty
    | WrongContentType
    | RawStream
)

TRIGGERS: dict[str, str] = {
    "think": "reasoning first, then the answer",
    "busy": "keep-alive comments for a few seconds, then the answer",
    "slow": "a slow answer, about 8 seconds: press Ctrl-C to cancel it",
    "limit": "the answer stops at the output token limit (finish_reason length)",
    "cut": "some text, then the connection is cut",
    "fail": "HTTP 503 Server Overloaded on every try: retried, then fails",
    "ratelimit": "HTTP 429 with Retry-After: 1 once, then the answer",
    "malformed": "a stream event that is not valid JSON",
    "empty": "a stream without any content: retried, then fails",
    "escape": "an answer full of terminal escape sequences and bidi controls",
    "auth": "HTTP 401: the key is refused",
    "quota": "HTTP 402 Insufficient Balance",
    "filter": "the content filter stops the answer in the stream",
    "long": "a very long answer (20,000 deltas unless --long-deltas says), as fast as it goes",
}
"""Words that, in the last user message, pick a behaviour when no scripted one is queued.

Case-insensitive, whole words; the first one in the message wins."""

ESCAPE_TEXT = (
    "Clear screen:\x1b[2J title:\x1b]0;pwned\x07 bell:\x07 colour:\x1b[31mred\x1b[0m "
    "bidi:\u202eevil\u202c isolate:\u2066x\u2069 backspace:abc\x08\x08\x08 "
    "newline and\ttab stay.\n"
)
"""The ``escape`` answer: everything a front door must neutralise on a terminal."""

_TRIGGER_RE = re.compile(r"\b(" + "|".join(TRIGGERS) + r")\b", re.IGNORECASE)
_WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. ")
_CREATED = 1_700_000_000
_COMPACT = (",", ":")  # DeepSeek sends compact JSON


class StubServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1, in a background thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        long_deltas: int = 20_000,
        long_chunk_events: int = 256,
    ) -> None:
        """``long_deltas`` and ``long_chunk_events`` shape the ``long`` trigger's answer."""
        self._host = host
        self._port = port
        self._long = LongStream(long_deltas, long_chunk_events)
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self._requests: list[Any] = []
        self._headers: list[dict[str, str]] = []
        self._opened = 0
        self._closed = 0
        self._rate_limited: set[str] = set()
        self._seen: deque[str] = deque(maxlen=1000)
        """Recent last user messages, to tell what a merged message adds (see _newest_text)."""
        self._long_cache: dict[tuple[int, int], list[bytes]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._request_count = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve in a background thread; returns once the port is listening."""
        if self._thread is not None:
            raise RuntimeError("StubServer already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="dsh-stub-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise self._startup_error

    def stop(self) -> None:
        """Close the listener and every open connection, then end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    def __enter__(self) -> StubServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what tests read and script ---------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:<port>``; requests go to ``<url>/chat/completions``."""
        return f"http://{self._host}:{self._port}"

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Script the next requests: one behaviour each, first in first out."""
        with self._lock:
            self._queue.extend(behaviours)

    @property
    def requests(self) -> list[Any]:
        """The JSON bodies received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of each request, names lower-cased (a copy; holds the key: never print)."""
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def connections_opened(self) -> int:
        """TCP connections accepted so far."""
        with self._lock:
            return self._opened

    @property
    def connections_closed(self) -> int:
        """TCP connections that have ended so far (closed by either side)."""
        with self._lock:
            return self._closed

    # -- the server thread -------------------------------------------------------------------

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, self._host, self._port, limit=1 << 20)
            )
        except BaseException as exc:  # e.g. the port is taken: report it to start()
            self._startup_error = exc
            self._ready.set()
            loop.close()
            return
        self._port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        with self._lock:
            self._opened += 1
        try:
            while await self._serve_one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client went away: nothing to answer
        except ValueError:
            pass  # a request this server cannot frame (a bad length): hang up
        except asyncio.CancelledError:
            writer.transport.abort()  # the server is stopping: no goodbyes
        finally:
            writer.close()  # flushes what is buffered, then FIN: a cut is a clean TCP close
            with self._lock:
                self._closed += 1
            self._handlers.discard(task)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            return False  # a clean close between requests
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, _, rest = request_line.partition(" ")
        path = rest.partition(" ")[0]
        headers: dict[str, str] = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await _read_chunked(reader)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        keep_alive = headers.get("connection", "").lower() != "close"

        if path.split("?")[0].rstrip("/") not in ("/chat/completions", "/v1/chat/completions"):
            await _send_json(writer, 404, _error_body(f"No route for {path}", "not_found"))
            return keep_alive
        if method != "POST":
            await _send_json(writer, 405, _error_body("Use POST", "method_not_allowed"))
            return keep_alive
        try:
            payload = json.loads(body)
        except ValueError:
            await _send_json(writer, 400, _error_body("Request body is not JSON", "invalid"))
            return keep_alive
        authorized = headers.get("authorization", "").startswith("Bearer ")
        with self._lock:
            self._requests.append(payload)
            self._headers.append(headers)
            self._request_count += 1
            request_id = f"stub-{self._request_count}"
            # A refused request leaves the script alone: it was meant for a real one.
            behaviour = self._queue.popleft() if self._queue and authorized else None
        if not authorized:
            await _send_json(
                writer,
                401,
                _error_body("Authentication Fails, no API key given", "authentication_error"),
                request_id=request_id,
            )
            return keep_alive
        if behaviour is None:
            behaviour = self._triggered(payload, body)
        respond = asyncio.ensure_future(_Responder(self, writer, request_id).run(behaviour))
        # HTTP/1.1 clients wait for the response before sending again, so anything readable
        # now is the client closing: stop writing at once, as a real server notices a reset.
        watch = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait((respond, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not respond.done():
                respond.cancel()
            await asyncio.gather(respond, watch, return_exceptions=True)
        if respond.cancelled() or (watch.done() and not watch.cancelled()):
            return False  # the client closed (or pipelined, which this server does not do)
        error = respond.exception()
        if isinstance(error, ConnectionError):
            return False
        if error is not None:
            raise error
        return respond.result() and keep_alive

    def _triggered(self, payload: Any, body: bytes) -> Behaviour:
        """The behaviour the last user message asks for by a trigger word, else an echo."""
        text = self._newest_text(_last_user_message(payload))
        match = _TRIGGER_RE.search(text)
        word = match.group(1).lower() if match else ""
        if word == "think":
            return Answer(
                "The answer, after some thought: 42.",
                reasoning="The user wants an answer. Let me think step by step... 6 x 7 = 42.",
            )
        if word == "busy":
            return KeepAlives(6, 0.5, Answer(f"You said: {text}"))
        if word == "slow":
            return SlowStream(" ".join(f"word{i}" for i in range(80)) + ".", 0.1)
        if word == "limit":
            return Answer(
                "This answer is cut short by the output token lim", finish_reason="length"
            )
        if word == "cut":
            return Cut("This answer will be cut off in the mid")
        if word == "fail":
            return HttpError(503, "Server overloaded, please try again later.")
        if word == "ratelimit":
            digest = hashlib.sha256(body).hexdigest()
            with self._lock:
                first = digest not in self._rate_limited
                self._rate_limited.add(digest)
            if first:
                return HttpError(429, "Rate limit reached for requests", retry_after=1)
            return Answer(f"You said: {text}")
        if word == "malformed":
            return Malformed()
        if word == "empty":
            return Empty()
        if word == "escape":
            return Answer(ESCAPE_TEXT)
        if word == "auth":
            return HttpError(401, "Authentication Fails, Your api key is invalid")
        if word == "quota":
            return HttpError(402, "Insufficient Balance")
        if word == "filter":
            return InBandError("Content Exists Risk", after_text=None, code="content_filter")
        if word == "long":
            return self._long
        return Answer(f"You said: {text}")

    def _newest_text(self, message: str) -> str:
        """What the user just typed: ``message`` less a part this server has already answered.

        The agent loop sends a failed turn's user message joined to the next one by a blank
        line. When ``message`` starts with an earlier request's last user message and a blank
        line, only the rest is new: so a trigger word from a failed turn does not fire again,
        and the echo repeats what was just typed.
        """
        with self._lock:
            earlier = [m for m in self._seen if message.startswith(m + "\n\n")]
            if message not in self._seen:
                self._seen.append(message)
        return message[len(max(earlier, key=len)) + 2 :] if earlier else message

    def _long_stream_chunks(self, deltas: int, per_chunk: int) -> list[bytes]:
        """The body of a LongStream, built once per shape (it is large)."""
        key = (deltas, per_chunk)
        with self._lock:
            cached = self._long_cache.get(key)
        if cached is not None:
            return cached
        events = [_event({"content": _WORDS[i % len(_WORDS)]}, None) for i in range(deltas)]
        events.append(_event({"content": ""}, "stop"))
        events.append(_usage_event(10, deltas))
        events.append(b"data: [DONE]\n\n")
        chunks = [b"".join(events[i : i + per_chunk]) for i in range(0, len(events), per_chunk)]
        with self._lock:
            self._long_cache[key] = chunks
        return chunks


def closed_port() -> int:
    """A loopback port that nothing listens on, for showing and testing transport failures.

    Bound on 127.0.0.1 to get a free port, then released: a connection to it is refused.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Responder:
    """Writes one response for one behaviour."""

    def __init__(self, server: StubServer, writer: asyncio.StreamWriter, request_id: str) -> None:
        self.server = server
        self.writer = writer
        self.request_id = request_id

    async def run(self, behaviour: Behaviour) -> bool:
        """Respond; False when the connection must close afterwards."""
        w = self.writer
        match behaviour:
            case HttpError(status=status, message=message, retry_after=retry_after):
                extra = {} if retry_after is None else {"Retry-After": str(retry_after)}
                if behaviour.raw_body is not None:
                    await _send(
                        w,
                        status,
                        behaviour.raw_body.encode(),
                        "text/html; charset=utf-8",
                        extra,
                        self.request_id,
                    )
                else:
                    body = _error_body(message, _error_type(status))
                    await _send_json(w, status, body, extra, self.request_id)
                return True
            case Disconnect():
                return False
            case WrongContentType(body=body, content_type=content_type):
                await _send(w, 200, body.encode(), content_type, {}, self.request_id)
                return True
            case _:
                pass
        await self._start_stream()
        ended = await self._stream(behaviour)
        if ended:
            w.write(b"0\r\n\r\n")
            await w.drain()
        return ended

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

    def _answer_events(self, answer: Answer) -> list[bytes]:
        pieces = _pieces(answer.text, answer.chunk_size)
        if answer.reasoning is None:
            events = [_event({"role": "assistant", "content": ""}, None)]
            events += [_event({"content": piece}, None) for piece in pieces]
            reasoning_pieces = 0
        else:
            # As DeepSeek's reasoning models: an empty first reasoning piece, then the rest.
            reasoning = _pieces(answer.reasoning, answer.chunk_size)
            events = [_event({"role": "assistant", "content": None, "reasoning_content": ""}, None)]
            events += [_event({"content": None, "reasoning_content": p}, None) for p in reasoning]
            events += [_event({"content": p, "reasoning_content": None}, None) for p in pieces]
            reasoning_pieces = len(reasoning)
        events.append(_event({"content": ""}, answer.finish_reason))
        events.append(_usage_event(7, len(pieces) + reasoning_pieces, reasoning_pieces))
        events.append(b"data: [DONE]\n\n")
        return events

    def _text_events(self, text: str | None) -> list[bytes]:
        events = [_event({"role": "assistant", "content": ""}, None)]
        if text:
            events += [_event({"content": piece}, None) for piece in _pieces(text, 4)]
        return events

    async def _stream(self, behaviour: Behaviour) -> bool:
        """Write the body of a 200 event stream; False when the connection was cut."""
        w = self.writer
        match behaviour:
            case Answer():
                await self._send_events(self._answer_events(behaviour), behaviour.delay)
            case KeepAlives(count=count, interval=interval, then=then):
                for i in range(count):
                    if i and interval:
                        await asyncio.sleep(interval)
                    self._chunk(b": keep-alive\n\n")
                    await w.drain()
                if interval:
                    await asyncio.sleep(interval)
                return await self._stream(then)
            case Stall(seconds=seconds, after_text=after_text):
                await self._send_events(self._text_events(after_text))
                await asyncio.sleep(seconds)
                rest = Answer("" if after_text else "Sorry for the wait.")
                await self._send_events(self._answer_events(rest)[1:])
            case Cut(after_text=after_text):
                await self._send_events(self._text_events(after_text))
                return False
            case Malformed(raw_data=raw_data):
                events = self._text_events(None)
                events.append(b"data: " + raw_data.encode() + b"\n\n")
                events.append(b"data: [DONE]\n\n")
                await self._send_events(events)
            case InBandError(message=message, after_text=after_text, code=code):
                events = self._text_events(after_text)
                error = {"error": {"message": message, "type": code, "param": None, "code": code}}
                events.append(b"data: " + json.dumps(error).encode() + b"\n\n")
                await self._send_events(events)
            case LongStream(deltas=deltas, events_per_chunk=per_chunk):
                head = self._text_events(None)
                await self._send_events(head)
                for data in self.server._long_stream_chunks(deltas, max(per_chunk, 1)):
                    self._chunk(data)
                    await w.drain()
            case SlowStream(text=text, delay=delay):
                words = [word + " " for word in text.split(" ")]
                words[-1] = words[-1][:-1]
                events = self._text_events(None)
                events += [_event({"content": word}, None) for word in words]
                await self._send_events(events, delay)
                await self._send_events(self._answer_events(Answer(""))[1:])
            case EndWithoutDone(text=text):
                await self._send_events(self._text_events(text))
            case Empty():
                events = self._text_events(None)
                events += [_event({"content": ""}, "stop"), _usage_event(7, 0)]
                events.append(b"data: [DONE]\n\n")
                await self._send_events(events)
            case RawStream(chunks=chunks, delay=delay, end=end):
                for i, data in enumerate(chunks):
                    if i and delay:
                        await asyncio.sleep(delay)
                    self._chunk(data)
                    await w.drain()
                return end
            case HttpError() | Disconnect() | WrongContentType():  # answered in run()
                raise AssertionError(behaviour)
        return True


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str,
    extra: dict[str, str],
    request_id: str | None,
) -> None:
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


async def _send_json(
    writer: asyncio.StreamWriter,
    status: int,
    body: Any,
    extra: dict[str, str] | None = None,
    request_id: str | None = None,
) -> None:
    data = json.dumps(body).encode()
    await _send(writer, status, data, "application/json", extra or {}, request_id)


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


def _error_body(message: str, kind: str) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "param": None, "code": kind}
    if message:
        error = {"message": message, **error}
    return {"error": error}


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


def _usage_event(prompt: int, completion: int, reasoning: int = 0) -> bytes:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": prompt,
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


def _last_user_message(payload: Any) -> str:
    if not isinstance(payload, dict):
        return ""
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C, printing the URL and the trigger words."""
    parser = argparse.ArgumentParser(
        prog="python -m dsh_core.stub_server",
        description="A loopback DeepSeek stand-in that fails on demand.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
    parser.add_argument(
        "--long-deltas",
        type=int,
        default=20_000,
        metavar="N",
        help="deltas in the answer to a prompt with the word 'long' (default: 20000)",
    )
    parser.add_argument(
        "--long-chunk-events",
        type=int,
        default=256,
        metavar="N",
        help="server-sent events per HTTP chunk in that answer (default: 256)",
    )
    args = parser.parse_args(argv)
    server = StubServer(
        port=args.port, long_deltas=args.long_deltas, long_chunk_events=args.long_chunk_events
    )
    try:
        server.start()
    except OSError as exc:  # a busy port, say: one line, not a traceback
        print(f"stub server: cannot listen: {error_chain(exc)}", file=sys.stderr)  # noqa: T201
        return 1
    print(f"stub server listening on {server.url}", flush=True)  # noqa: T201
    print("trigger words (in the last user message):", flush=True)  # noqa: T201
    for word, description in TRIGGERS.items():
        print(f"  {word:<10} {description}", flush=True)  # noqa: T201
    try:
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
