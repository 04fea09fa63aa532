"""The event stream of one response: one network read in, that read's events out.

    reader = ResponseReader(response, shown_url=url, idle=Deadline(clock, 120), ...)
    try:
        while not reader.finished:
            for event in await reader.read():
                ...
    finally:
        await reader.close()

Bytes become events through :class:`~dsh_core.model.sse.SSEDecoder` and
:class:`~dsh_core.model.wire.StreamParser` (both pure); this module adds the network: the idle timer
(a :class:`~dsh_core.clock.Deadline` pushed at every chunk, keep-alive comments included), what
reading raises as :class:`~dsh_core.errors.LlmError` (:func:`reading_errors`), and returning the
connection to the pool. Cancellation passes through untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable
from typing import TYPE_CHECKING, cast

from ..clock import Deadline
from ..errors import MALFORMED_RESPONSE, STREAM_CLOSED, TIMEOUT, TRANSPORT, Code, LlmError
from .classify import Build, ExceptionMap, Rule
from .seam import Event
from .sse import Item, LineTooLong, SSEDecoder
from .wire import StreamParser

if TYPE_CHECKING:
    import httpx

__all__ = ["DRAIN_LIMIT", "ResponseReader", "reading_errors", "seconds"]

DRAIN_LIMIT = 64 * 1024
"""Bytes read after ``[DONE]`` so the connection returns to the pool; past it, close instead."""


def seconds(value: float) -> str:
    """A duration as messages show it: ``120 s``, ``0.2 s``."""
    return f"{value:g} s"


def reading_errors(where: str, idle: float, request_id: str | None) -> ExceptionMap:
    """What reading a response's body raises, as ``LlmError``; ``where`` begins each message."""
    import httpx

    def failed(what: str, code: Code) -> Build:
        def build(exc: BaseException) -> LlmError:
            return LlmError(f"{where} {what}", code, request_id=request_id)

        return build

    return ExceptionMap(
        # Our idle timer, or httpx's write or pool timers: the message says which silence.
        Rule((TimeoutError, httpx.TimeoutException), failed(_idle(idle), TIMEOUT), chain=False),
        Rule(httpx.DecodingError, failed("could not be decoded", MALFORMED_RESPONSE)),
        Rule((httpx.HTTPError, httpx.InvalidURL), failed("failed", TRANSPORT)),
        Rule(LineTooLong, failed("sent a line that never ends", MALFORMED_RESPONSE)),
    )


def _idle(idle: float) -> str:
    return f"timed out: nothing received for {seconds(idle)}"


class ResponseReader:
    """The event stream of one response."""

    __slots__ = (
        "_chunks",
        "_decoder",
        "_errors",
        "_idle",
        "_parser",
        "_pending",
        "_response",
        "finished",
        "where",
    )

    def __init__(
        self,
        response: httpx.Response,
        *,
        shown_url: str,
        idle: Deadline,
        idle_seconds: float,
        request_id: str | None,
        reasoning_shown: bool,
    ) -> None:
        """``idle`` is the silence allowed between two network reads, this reader's own."""
        self._response = response
        self._idle = idle
        # Raw bytes skip a layer of generators; we asked for no compression, but honour it.
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        chunks = response.aiter_bytes() if encoded else response.aiter_raw()
        self._chunks = cast("AsyncGenerator[bytes, None]", chunks)
        self._decoder = SSEDecoder()
        self._parser = StreamParser(request_id, reasoning_shown=reasoning_shown)
        self._pending: LlmError | None = None
        """A failure to raise on the next read, once the events that came before it are out."""
        self.finished = False
        """The answer is complete: the last events returned end with :class:`Finish`."""
        self.where = f"DeepSeek API stream from {shown_url}"
        self._errors = reading_errors(self.where, idle_seconds, request_id)

    @property
    def shown(self) -> bool:
        """Whether something the person saw has been returned: from then on a failure is not
        retried (text, a tool call, reasoning when the front door shows it)."""
        return self._parser.shown

    def read(self) -> Awaitable[list[Event]]:
        """The events of the next network read that completes any; raises ``LlmError``."""
        return self._errors.run(self._read())  # not async itself: one coroutine fewer per read

    async def close(self) -> None:
        """Close the response: back to the pool when read to its end, else the socket closes."""
        self._idle.close()
        await self._chunks.aclose()
        await self._response.aclose()

    async def _read(self) -> list[Event]:
        if self._pending is not None:
            raise self._pending
        items: list[Item] = []
        with self._idle:
            while not items:
                try:
                    chunk = await self._chunks.__anext__()
                except StopAsyncIteration:
                    break
                self._idle.push()  # any bytes are news, a keep-alive comment too
                items = self._decoder.feed(chunk)
        if not items:
            return self._ended()  # out here: the failure must not chain StopAsyncIteration
        parser = self._parser
        events, failure = parser.take(items)
        if failure is None and parser.done:
            await self._drain()
            failure = self._finish(events)
        if failure is not None:
            if not events:
                raise failure
            self._pending = failure
        return events

    def _ended(self) -> list[Event]:
        """The body ended without ``[DONE]``: complete once a ``finish_reason`` came (some
        OpenAI-compatible servers never send ``[DONE]``), else cut short."""
        if self._parser.finish_reason is None:
            raise LlmError(
                f"{self.where} ended before [DONE]",
                STREAM_CLOSED,
                request_id=self._parser.request_id,
            )
        events: list[Event] = []
        failure = self._finish(events)
        if failure is not None:
            raise failure
        return events

    def _finish(self, events: list[Event]) -> LlmError | None:
        """Append the closing events of a complete stream, or return why it is no answer."""
        ending = self._parser.finish()
        if isinstance(ending, LlmError):
            return ending
        events.extend(ending)
        self.finished = True
        return None

    async def _drain(self) -> None:
        """Read what follows ``[DONE]`` (normally nothing) so the connection can be reused."""
        import httpx

        size = 0
        # The answer is complete; only the connection is at stake.
        with contextlib.suppress(httpx.HTTPError, TimeoutError), self._idle:
            async for chunk in self._chunks:
                size += len(chunk)
                if size > DRAIN_LIMIT:
                    return  # a server still talking after [DONE]: close rather than wait
