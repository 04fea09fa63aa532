"""The stub server itself: a real OpenAI-compatible ``POST /chat/completions`` on loopback.

It runs an asyncio server in a thread of its own and speaks HTTP/1.1 with keep-alive and chunked
transfer. Each request is checked in this order: the route and method, the JSON body, a bearer
key (else 401), DeepSeek's tool-call rules (else 400, :mod:`.validation`), the context window
when one is set (else DeepSeek's 400, :func:`context_length_message`); then the next queued
behaviour answers it (a summary request, from the summaries' own queue), else the behaviour a
trigger word picks (:mod:`.triggers`). A refused request leaves the queues alone. The prompt
is counted (:mod:`.prompts`) for the usage it reports and for :attr:`StubServer.served`.
:mod:`.responder` writes the answer.

It also answers web searches as DeepSeek's Anthropic-compatible Messages API does
(``POST /anthropic/v1/messages``, :mod:`.search`), with the same key rule.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .behaviours import Behaviour, LongStream, in_thinking_mode
from .chat_request import thinking_mode
from .prompts import PromptCount, PromptCounter
from .responder import Responder, error_body, send_json
from .search import SEARCH_PATHS, search_answer
from .triggers import TriggerPicker, is_summary_request
from .validation import validate_request

__all__ = ["Served", "StubServer", "closed_port", "context_length_message"]


def context_length_message(window: int, prompt: int, completion: int) -> str:
    """DeepSeek's words when a request does not fit the model's context window."""
    return (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
        "completion). Please reduce the length of the messages or completion."
    )


@dataclass(frozen=True, slots=True)
class Served:
    """What the stub made of one request that passed the route and JSON checks."""

    number: int
    """``stub-<number>`` is its request id."""
    prompt: PromptCount
    summary: bool
    """It asked for a compaction's summary (its last message is dsh's summary request)."""
    refused: str | None
    """Why it was refused (401, a broken history, too long for the window), else None."""


class StubServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1, in a background thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        long_deltas: int = 20_000,
        long_chunk_events: int = 256,
        long_delta_words: int = 1,
        key_required: bool = True,
        context_window: int | None = None,
        record: bool = True,
    ) -> None:
        """``long_deltas``, ``long_chunk_events`` and ``long_delta_words`` shape the ``long``
        trigger's answer.
        ``key_required=False`` answers requests without an ``Authorization`` header, as a
        local vLLM started without ``--api-key`` does. ``context_window``: refuse a request
        whose prompt and ``max_tokens`` exceed it, in DeepSeek's words (also settable later).
        ``record=False`` keeps no request bodies (a long benchmark), only :attr:`served`."""
        self._host = host
        self._key_required = key_required
        self._port = port
        self._triggers = TriggerPicker(LongStream(long_deltas, long_chunk_events, long_delta_words))
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self._summaries: deque[Behaviour] = deque()
        self.context_window = context_window
        """Tokens a request may hold (prompt and ``max_tokens``); None: no limit."""
        self._record = record
        self._counter = PromptCounter()
        self._served: list[Served] = []
        self._requests: list[Any] = []
        self._bodies: list[bytes] = []
        self._headers: list[dict[str, str]] = []
        self._searches: list[Any] = []
        self._opened = 0
        self._closed = 0
        self._reasoned: set[str] = set()
        """Ids of the calls streamed after reasoning: their message must carry it back."""
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
        """Script the next requests: one behaviour each, first in first out.

        Summary requests (a compaction's) do not take from this queue: see
        :meth:`enqueue_summaries`."""
        with self._lock:
            self._queue.extend(behaviours)

    def forget_script(self) -> list[Behaviour]:
        """Drop what :meth:`enqueue` and :meth:`enqueue_summaries` scripted and no request took
        (a test that ended early); what was dropped. A server shared by several tests starts
        each with an empty script, so one test's leftovers never answer the next one."""
        with self._lock:
            left = [*self._queue, *self._summaries]
            self._queue.clear()
            self._summaries.clear()
        return left

    def enqueue_summaries(self, *behaviours: Behaviour) -> None:
        """Script the answers to the next summary requests; with none queued, a summary
        request gets the stub's own summary (:mod:`.triggers`)."""
        with self._lock:
            self._summaries.extend(behaviours)

    @property
    def bodies(self) -> list[bytes]:
        """The raw bodies received so far, as :attr:`requests` (a copy)."""
        with self._lock:
            return list(self._bodies)

    @property
    def served(self) -> list[Served]:
        """Each request that passed the route and JSON checks, counted (a copy)."""
        with self._lock:
            return list(self._served)

    @property
    def requests(self) -> list[Any]:
        """The JSON bodies received so far, oldest first, refused ones included (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of each request, names lower-cased (a copy; holds the key: never print)."""
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def searches(self) -> list[Any]:
        """The JSON bodies of the web searches received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._searches)

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

        if path.split("?")[0].rstrip("/") in SEARCH_PATHS:
            await self._search(writer, method, headers, body)
            return keep_alive
        if path.split("?")[0].rstrip("/") not in ("/chat/completions", "/v1/chat/completions"):
            await send_json(writer, 404, error_body(f"No route for {path}", "not_found"))
            return keep_alive
        if method != "POST":
            await send_json(writer, 405, error_body("Use POST", "method_not_allowed"))
            return keep_alive
        try:
            payload = json.loads(body)
        except ValueError:
            await send_json(writer, 400, error_body("Request body is not JSON", "invalid"))
            return keep_alive
        authorized = not self._key_required or headers.get("authorization", "").startswith(
            "Bearer "
        )
        prompt = self._counter.count(body)
        summary = is_summary_request(payload)
        with self._lock:
            if self._record:
                self._requests.append(payload)
                self._bodies.append(body)
                self._headers.append(headers)
            self._request_count += 1
            number = self._request_count
            problem = validate_request(payload, self._reasoned) if authorized else None
            if authorized and problem is None:
                problem = self._too_long(payload, prompt.tokens)
            # A refused request leaves the script alone: it was meant for a valid one.
            ok = authorized and problem is None
            queue = self._summaries if summary else self._queue
            behaviour = queue.popleft() if queue and ok else None
            refused = problem if authorized else "no API key"
            self._served.append(Served(number, prompt, summary, refused))
        request_id = f"stub-{number}"
        if not authorized:
            refusal = error_body("Authentication Fails, no API key given", "authentication_error")
            await send_json(writer, 401, refusal, request_id=request_id)
            return keep_alive
        if problem is not None:
            invalid = error_body(problem, "invalid_request_error")
            await send_json(writer, 400, invalid, request_id=request_id)
            return keep_alive
        self._counter.remember(prompt)
        if behaviour is None:
            behaviour = self._triggered(payload, body)
        behaviour = in_thinking_mode(behaviour, thinking_mode(payload))
        responder = Responder(writer, number, self._remember_reasoned, prompt)
        respond = asyncio.ensure_future(responder.run(behaviour))
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

    async def _search(
        self, writer: asyncio.StreamWriter, method: str, headers: dict[str, str], body: bytes
    ) -> None:
        """A web search, as DeepSeek's Messages API answers one (:mod:`.search`)."""
        if method != "POST":
            await send_json(writer, 405, error_body("Use POST", "method_not_allowed"))
            return
        keyed = headers.get("x-api-key") or headers.get("authorization", "").startswith("Bearer ")
        if self._key_required and not keyed:
            refusal = {
                "type": "error",
                "error": {"type": "authentication_error", "message": "no API key"},
            }
            await send_json(writer, 401, refusal)
            return
        try:
            payload = json.loads(body)
        except ValueError:
            await send_json(writer, 400, error_body("Request body is not JSON", "invalid"))
            return
        with self._lock:
            self._searches.append(payload)
        status, answer = search_answer(payload)
        await send_json(writer, status, answer)

    def _triggered(self, payload: Any, body: bytes) -> Behaviour:
        """The behaviour the last user message asks for by a trigger word, else an echo."""
        return self._triggers.pick(payload, body)

    def _too_long(self, payload: Any, prompt: int) -> str | None:
        """DeepSeek's refusal when the prompt and the answer's room exceed the window."""
        window = self.context_window
        asked = payload.get("max_tokens") if isinstance(payload, dict) else None
        completion = asked if isinstance(asked, int) and not isinstance(asked, bool) else 0
        if window is None or prompt + completion <= window:
            return None
        return context_length_message(window, prompt, completion)

    def _remember_reasoned(self, call_ids: list[str]) -> None:
        with self._lock:
            self._reasoned.update(call_ids)


def closed_port() -> int:
    """A loopback port that nothing listens on, for showing and testing transport failures.

    Bound on 127.0.0.1 to get a free port, then released: a connection to it is refused.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
