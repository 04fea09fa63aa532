"""The DeepSeek chat-completions API (or any OpenAI-compatible server) as a :class:`ChatModel`.

    adapter = DeepSeekAdapter(base_url="https://api.deepseek.com", api_key=key)
    try:
        async for event in adapter.stream(ChatRequest(model="deepseek-v4-flash", messages=msgs)):
            ...
    finally:
        await adapter.close()

Every failure is an :class:`~dsh_core.errors.LlmError` whose message holds this layer's words
only (``DeepSeek API request to <base URL> failed``) and whose ``__cause__`` is what httpx raised;
:func:`~dsh_core.chain.error_chain` renders the whole chain. Transient failures are retried
while nothing of the answer has reached the caller, each retry announced by a
:class:`~dsh_core.llm.RetryNotice`. Cancelling the consuming task ends the request as
``LlmError(code="ABORTED")``, raised from the ``CancelledError``.

Deltas that one network read completes are merged into one event per run of the same kind:
they arrived together, and a 100,000-delta answer then costs the caller a few hundred events.

httpx is imported on the first request, not with this module: ``import dsh_core`` stays cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
import re
import socket
import ssl
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from .chain import error_chain
from .errors import (
    ABORTED,
    AUTH,
    CONTENT_FILTER,
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    INVALID_REQUEST,
    MALFORMED_RESPONSE,
    MISSING_CREDENTIAL,
    QUOTA,
    RATE_LIMIT,
    SERVER,
    STREAM_CLOSED,
    TIMEOUT,
    TRANSPORT,
    LlmError,
    UsageError,
    http_status_code,
)
from .llm import (
    ChatRequest,
    Event,
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    Usage,
)
from .sse import Comment, Item, LineTooLong, SSEDecoder

if TYPE_CHECKING:
    import httpx

__all__ = [
    "API_KEY_VARIABLE",
    "CONNECT_TIMEOUT",
    "DEFAULT_BASE_URL",
    "IDLE_TIMEOUT",
    "READ_TIMEOUT",
    "RETRYABLE_CODES",
    "DeepSeekAdapter",
    "RetryPolicy",
    "parse_retry_after",
    "redact_url",
]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.deepseek.com"
CONNECT_TIMEOUT = 10.0
"""Seconds to connect (TCP, TLS, proxy)."""
READ_TIMEOUT = 60.0
"""Seconds to wait for the response status and headers."""
IDLE_TIMEOUT = 120.0
"""Seconds of silence allowed once the request is sent; a keep-alive comment ends a silence."""
API_KEY_VARIABLE = "DEEPSEEK_API_KEY"
"""Where the key comes from; named in the MISSING_CREDENTIAL message."""

RETRYABLE_CODES = frozenset({RATE_LIMIT, SERVER, TRANSPORT, TIMEOUT, STREAM_CLOSED, EMPTY_RESPONSE})
"""Codes retried while nothing of the answer has been shown (SPEC section 5)."""

_ERROR_BODY_LIMIT = 64 * 1024
"""Bytes of an error body read for its message; the rest is not worth waiting for."""
_DRAIN_LIMIT = 64 * 1024
"""Bytes read after ``[DONE]`` so the connection returns to the pool; past it, close instead."""
_SNIPPET = 120
"""Characters of a malformed payload quoted in the message."""
_SERVER_TEXT_LIMIT = 500
"""Characters of a server-provided error message kept."""

# Whole words only ("load balancer", "quotation" are not about money); "_" may join them, as
# in "insufficient_quota".
_QUOTA_WORDS = re.compile(r"(?<![a-z])(?:balance|quota)s?(?![a-z])", re.IGNORECASE)
_CONTEXT_WORDS = re.compile(
    r"context[ _-]?(?:length|window)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)
_CONTENT_RISK_WORDS = re.compile(
    r"content[ _-]?(?:exists[ _-]?)?risk|content[ _-]?(?:filter|policy|management)|moderation",
    re.IGNORECASE,
)
_PROXY_VARIABLES = ("https_proxy", "http_proxy", "all_proxy")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter; ``Retry-After`` honoured up to a cap."""

    max_retries: int = 4
    """Retries after the first try; 0 disables retrying."""
    base_delay: float = 0.5
    """Ceiling of the first backoff, in seconds; it doubles with each retry."""
    max_delay: float = 8.0
    """The backoff ceiling never grows past this."""
    retry_after_cap: float = 30.0
    """A server's ``Retry-After`` is honoured up to this many seconds."""
    jitter: bool = True
    """Full jitter (uniform between 0 and the ceiling); ``False`` waits the ceiling itself."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1 for the first retry)."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** min(attempt - 1, 62))
        delay = random.uniform(0.0, ceiling) if self.jitter else ceiling
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.retry_after_cap))
        return delay


class _Secret:
    """Holds the API key so that no repr, traceback local or log line can show it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<secret>"


class DeepSeekAdapter:
    """A ChatModel that streams chat completions from DeepSeek over one shared httpx client."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        """Configure; nothing is opened or checked until the first :meth:`stream`.

        ``connect_timeout`` bounds connecting (TCP, TLS, proxy). ``read_timeout`` bounds the
        wait for the response status and headers. ``idle_timeout`` bounds any silence once the
        request is sent: a keep-alive comment ends a silence, so a busy server that sends them
        is waited for. ``client`` shares a caller's ``httpx.AsyncClient`` (:meth:`close` leaves
        it open); by default one is created on the first request and reused for every turn.
        User info in ``base_url`` is shown redacted and never sent: the key is the credential.
        """
        self._base_url = base_url.rstrip("/")
        self._shown_url = redact_url(self._base_url)
        self._where = f"DeepSeek API request to {self._shown_url}"
        """How failures before a response begin (SPEC section 5)."""
        # User info stays out of the request: httpx would turn it into Basic auth, replacing
        # the Bearer key, and print it in its request log line.
        self._endpoint = f"{_without_user_info(self._base_url)}/chat/completions"
        key = api_key.strip() if api_key is not None else ""
        self._api_key = _Secret(key) if key else None
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle_timeout = idle_timeout
        self._retry = retry if retry is not None else RetryPolicy()
        self._client = client
        self._owns_client = client is None
        self._closed = False

    def __repr__(self) -> str:
        key = "<set>" if self._api_key is not None else "None"
        return f"DeepSeekAdapter(base_url={self._shown_url!r}, api_key={key})"

    @property
    def base_url(self) -> str:
        """The base URL as shown to people: trailing slash removed, user info redacted."""
        return self._shown_url

    @property
    def retry_policy(self) -> RetryPolicy:
        """How transient failures are retried."""
        return self._retry

    async def close(self) -> None:
        """Close the client this adapter created; a shared client is left to its owner."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    async def stream(self, request: ChatRequest) -> AsyncGenerator[Event, None]:
        """Stream one chat completion; retry transient failures until a delta is shown."""
        headers = self._headers()  # MISSING_CREDENTIAL before any I/O
        body = json.dumps(_payload(request), ensure_ascii=False).encode()
        policy = self._retry
        attempt = 0
        while True:
            reader: _Reader | None = None
            try:
                reader = await self._open(headers, body)
                while True:
                    for event in await reader.read():
                        yield event
                    if reader.finished:
                        return
            except LlmError as exc:
                shown = reader is not None and reader.shown
                if shown or attempt >= policy.max_retries or not _retryable(exc):
                    raise
                failure = exc
            finally:
                if reader is not None:
                    await reader.close()
            attempt += 1
            delay = policy.delay(attempt, failure.retry_after)
            logger.info(
                "DeepSeek API retry %d of %d in %.2f s: %s",
                attempt,
                policy.max_retries,
                delay,
                error_chain(failure),
            )
            yield RetryNotice(attempt, policy.max_retries, delay, failure)
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError as exc:
                raise _cancelled() from exc

    async def _open(self, headers: dict[str, str], body: bytes) -> _Reader:
        """Send the request; return a reader for its event stream, or raise what went wrong."""
        import httpx

        client = self._get_client()
        # httpx's read timeout bounds every silence on the connection; ours bounds the headers.
        timeout = httpx.Timeout(
            connect=self._connect_timeout,
            read=self._idle_timeout,
            write=self._idle_timeout,
            pool=self._connect_timeout,
        )
        where = self._where
        try:
            request = client.build_request(
                "POST", self._endpoint, content=body, headers=headers, timeout=timeout
            )
        except httpx.InvalidURL as exc:
            raise LlmError(f"{where} failed", TRANSPORT) from exc

        timed_out: LlmError | None = None
        try:
            async with asyncio.timeout(self._read_timeout):
                response = await client.send(request, stream=True)
        except asyncio.CancelledError as exc:
            raise _cancelled() from exc
        except TimeoutError:
            timed_out = LlmError(
                f"{where} timed out waiting for a response after {_seconds(self._read_timeout)}",
                TIMEOUT,
            )
        except httpx.TimeoutException as exc:
            timed_out = self._timeout_error(exc)
        except httpx.HTTPError as exc:
            raise LlmError(f"{where} failed", TRANSPORT) from exc
        if timed_out is not None:
            # Raised out here: a timer's chain is only anyio's cancel-scope text (with a memory
            # address); the message says which timeout and how long.
            raise timed_out

        request_id = response.headers.get("x-request-id")
        try:
            if response.status_code == 407:
                # Only a proxy says 407; on an http:// URL httpx hands it over as a response.
                # Report it as the https:// path does: a transport failure, not the API's.
                proxy = httpx.ProxyError(f"407 {_phrase(response)}".rstrip())
                raise LlmError(f"{where} failed", TRANSPORT, status=407) from proxy
            if not 200 <= response.status_code < 300:
                raise await self._status_error(response, request_id)
            content_type = response.headers.get("content-type", "")
            if content_type and not content_type.lower().startswith("text/event-stream"):
                raise await self._not_a_stream(response, content_type, request_id)
        except BaseException as exc:
            await response.aclose()
            if isinstance(exc, asyncio.CancelledError):
                raise _cancelled() from exc
            raise
        return _Reader(response, self._shown_url, self._idle_timeout, request_id)

    # -- failures ----------------------------------------------------------------------------

    def _timeout_error(self, exc: httpx.TimeoutException) -> LlmError:
        """Which of httpx's timers fired before any response, and after how long."""
        import httpx

        where = self._where
        if isinstance(exc, httpx.ConnectTimeout):
            what = f"timed out connecting after {_seconds(self._connect_timeout)}"
        elif isinstance(exc, httpx.PoolTimeout):
            what = (
                f"timed out waiting for a free connection after {_seconds(self._connect_timeout)}"
            )
        elif isinstance(exc, httpx.WriteTimeout):
            what = f"timed out sending the request for {_seconds(self._idle_timeout)}"
        else:
            what = f"timed out: nothing received for {_seconds(self._idle_timeout)}"
        return LlmError(f"{where} {what}", TIMEOUT)

    async def _status_error(self, response: httpx.Response, request_id: str | None) -> LlmError:
        """An HTTP error status, classified by SPEC section 5 (first match wins)."""
        status = response.status_code
        text = await _read_text(response, _ERROR_BODY_LIMIT, self._read_timeout)
        detail = _body_message(text, response.headers.get("content-type", ""))
        code = _status_code(status, text)
        message = f"DeepSeek API returned HTTP {status} {_phrase(response)}".rstrip()
        if detail:
            message = f"{message}: {detail}"
        return LlmError(
            message,
            code,
            status=status,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            request_id=request_id,
        )

    async def _not_a_stream(
        self, response: httpx.Response, content_type: str, request_id: str | None
    ) -> LlmError:
        """A 2xx answer that is not an event stream: an error object, or not the protocol."""
        text = await _read_text(response, _ERROR_BODY_LIMIT, self._read_timeout)
        with contextlib.suppress(ValueError):
            payload = json.loads(text)
            if isinstance(payload, dict) and payload.get("error") is not None:
                return _in_band_error(payload["error"], request_id)
        return LlmError(
            f"DeepSeek API answered with content type {content_type!r}, not an event stream",
            MALFORMED_RESPONSE,
            status=response.status_code,
            request_id=request_id,
        )

    # -- plumbing ----------------------------------------------------------------------------

    def check_key(self) -> str:
        """The key, or ``LlmError(MISSING_CREDENTIAL)`` if it is absent or unusable; no I/O.

        Front doors call it at startup, so a bad key is a startup failure, not a turn's.
        """
        if self._api_key is None:
            raise LlmError(
                f"No DeepSeek API key: set {API_KEY_VARIABLE} to your API key", MISSING_CREDENTIAL
            )
        key = self._api_key.value
        # A key that cannot be an HTTP header value would be echoed by the header check.
        if not (key.isascii() and key.isprintable()) or " " in key:
            raise LlmError(
                f"The DeepSeek API key contains spaces or characters not allowed in an HTTP "
                f"header: check {API_KEY_VARIABLE}",
                MISSING_CREDENTIAL,
            )
        return key

    def _headers(self) -> dict[str, str]:
        key = self.check_key()
        from . import __version__

        return {
            "Authorization": f"Bearer {key}",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",  # a compressed event stream arrives in bursts
            "Content-Type": "application/json",
            "User-Agent": f"dsh/{__version__}",
        }

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            if self._closed:
                raise UsageError("DeepSeekAdapter.stream() called after close()")
            import httpx

            self._client = httpx.AsyncClient(trust_env=True, verify=self._verify())
        return self._client

    def _verify(self) -> ssl.SSLContext | bool:
        """Certificate verification for the client this adapter creates.

        The default (certifi's bundle) costs about 25-50 ms to build. A plain ``http://`` base
        URL without an ``https://`` proxy never speaks TLS, so it gets an empty context that
        trusts nothing: it is cheap, and any TLS it did meet would fail closed.
        """
        if not self._base_url.lower().startswith("http://"):
            return True
        for name in _PROXY_VARIABLES:
            for variable in (name, name.upper()):
                if os.environ.get(variable, "").strip().lower().startswith("https://"):
                    return True
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class _Reader:
    """The event stream of one response: one network read in, that read's events out."""

    __slots__ = (
        "_chunks",
        "_decoder",
        "_idle",
        "_pending",
        "_response",
        "_state",
        "finished",
        "where",
    )

    def __init__(
        self, response: httpx.Response, shown_url: str, idle: float, request_id: str | None
    ) -> None:
        self._response = response
        self._idle = idle
        # Raw bytes skip a layer of generators; we asked for no compression, but honour it.
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        chunks = response.aiter_bytes() if encoded else response.aiter_raw()
        self._chunks = cast("AsyncGenerator[bytes, None]", chunks)
        self._decoder = SSEDecoder()
        self._state = _StreamState(request_id)
        self._pending: LlmError | None = None
        """A failure to raise on the next read, once the events that came before it are out."""
        self.finished = False
        """The answer is complete: the last events returned end with :class:`Finish`."""
        self.where = f"DeepSeek API stream from {shown_url}"

    async def read(self) -> list[Event]:
        """The events of the next network read that completes any; raises ``LlmError``."""
        if self._pending is not None:
            raise self._pending
        items: list[Item] = []
        ended = timed_out = False
        while not items:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                ended = True
                break
            except asyncio.CancelledError as exc:
                raise _cancelled() from exc
            except Exception as exc:
                import httpx  # here, not per read: this is the hot path

                if isinstance(exc, httpx.TimeoutException):
                    timed_out = True
                    break
                if isinstance(exc, httpx.HTTPError):
                    raise self._error(exc) from exc
                raise
            try:
                items = self._decoder.feed(chunk)
            except LineTooLong as exc:
                raise LlmError(
                    f"{self.where} sent a line that never ends",
                    MALFORMED_RESPONSE,
                    request_id=self._state.request_id,
                ) from exc
        # Raised out here: a timer's chain is anyio's cancel-scope text, and the end of a
        # stream has none; the message says it all.
        if timed_out:
            raise LlmError(
                f"{self.where} timed out: nothing received for {_seconds(self._idle)}",
                TIMEOUT,
                request_id=self._state.request_id,
            )
        if ended:
            raise LlmError(
                f"{self.where} ended before [DONE]",
                STREAM_CLOSED,
                request_id=self._state.request_id,
            )
        state = self._state
        events, failure = state.take(items)
        if failure is None and state.done:
            await self._drain()
            ending = state.finish()
            if isinstance(ending, Finish):
                events.append(ending)
                self.finished = True
            else:
                failure = ending
        if failure is not None:
            if not events:
                raise failure
            self._pending = failure
        return events

    @property
    def shown(self) -> bool:
        """Whether any delta has been returned: from then on a failure is not retried."""
        return self._state.has_content

    async def close(self) -> None:
        """Close the response: back to the pool when read to its end, else the socket closes."""
        try:
            await self._chunks.aclose()
            await self._response.aclose()
        except asyncio.CancelledError as exc:
            raise _cancelled() from exc

    async def _drain(self) -> None:
        """Read what follows ``[DONE]`` (normally nothing) so the connection can be reused."""
        import httpx

        size = 0
        try:
            async for chunk in self._chunks:
                size += len(chunk)
                if size > _DRAIN_LIMIT:
                    return  # a server still talking after [DONE]: close rather than wait
        except asyncio.CancelledError as exc:
            raise _cancelled() from exc
        except httpx.HTTPError:
            pass  # the answer is complete; only the connection is lost

    def _error(self, exc: httpx.HTTPError) -> LlmError:
        import httpx

        request_id = self._state.request_id
        if isinstance(exc, httpx.DecodingError):
            return LlmError(
                f"{self.where} could not be decoded", MALFORMED_RESPONSE, request_id=request_id
            )
        return LlmError(f"{self.where} failed", TRANSPORT, request_id=request_id)


class _StreamState:
    """Turns decoded SSE items into events for one attempt; knows where the answer stands."""

    __slots__ = ("done", "finish_reason", "has_content", "request_id")

    def __init__(self, request_id: str | None) -> None:
        self.request_id = request_id
        self.done = False
        """``data: [DONE]`` arrived."""
        self.finish_reason: str | None = None
        self.has_content = False
        """Any non-empty text or reasoning arrived."""

    def take(self, items: list[Item]) -> tuple[list[Event], LlmError | None]:
        """Events for ``items`` (runs of one kind merged) and the failure that ends them, if any.

        The events before a failure are still returned: they arrived before it, and showing
        them is honest. This is the hot loop of a long answer, hence its plain style.
        """
        events: list[Event] = []
        run: list[str] = []  # consecutive pieces of one kind, merged into one event
        run_is_text = True
        failure: LlmError | None = None
        content = False  # a non-empty delta among these items
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
                # A named event: OpenAI-compatible servers send none. Read it all the same.
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
                failure = _in_band_error(error, self.request_id)
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
                        content = True
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
                        content = True
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
        if content:
            self.has_content = True
        return events, failure

    def finish(self) -> Finish | LlmError:
        """The closing event after ``[DONE]``, or the failure of an answer without content."""
        if not self.has_content:
            return LlmError(
                "DeepSeek API sent an empty answer", EMPTY_RESPONSE, request_id=self.request_id
            )
        return Finish("max-tokens" if self.finish_reason == "length" else "stop")

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"DeepSeek API stream event {what}", MALFORMED_RESPONSE, request_id=self.request_id
        )

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


_KEEP_ALIVE = KeepAlive()


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


def _in_band_error(error: object, request_id: str | None) -> LlmError:
    """An ``{"error": ...}`` payload: raised with its message, coded by its wording."""
    message = ""
    words = ""
    if isinstance(error, dict):
        raw = error.get("message")
        message = _clean(raw) if isinstance(raw, str) else ""
        words = " ".join(str(error.get(key) or "") for key in ("type", "code"))
    elif isinstance(error, str):
        message = _clean(error)
    if not message:
        message = _clean(json.dumps(error, ensure_ascii=False))
    words = f"{message} {words}"
    if _CONTENT_RISK_WORDS.search(words):
        code = CONTENT_FILTER
    elif _QUOTA_WORDS.search(words):
        code = QUOTA
    elif _CONTEXT_WORDS.search(words):
        code = CONTEXT_WINDOW_EXCEEDED
    else:
        code = SERVER
    return LlmError(
        f"DeepSeek API reported an error in the stream: {message}", code, request_id=request_id
    )


def _status_code(status: int, body: str) -> str:
    """SPEC section 5's HTTP table; the first match wins."""
    if status in (401, 403):
        return AUTH
    if status == 402 or _QUOTA_WORDS.search(body):
        return QUOTA
    if status == 429:
        return RATE_LIMIT
    if status == 400 and _CONTEXT_WORDS.search(body):
        return CONTEXT_WINDOW_EXCEEDED
    if status in (400, 413, 422):
        return INVALID_REQUEST
    if 500 <= status <= 599:
        return SERVER
    return http_status_code(status)


def _body_message(text: str, content_type: str) -> str:
    """The error body's message: ``error.message``, else a string ``error``, ``message`` or
    ``detail`` (vLLM and FastAPI servers), else the first line of a plain-text body."""
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            error = error.get("message")
        for key in ("message", "detail"):
            if not isinstance(error, str):
                error = payload.get(key)
        return _clean(error) if isinstance(error, str) else ""
    if content_type.lower().startswith("text/plain"):
        lines = text.strip().splitlines()
        return _clean(lines[0]) if lines else ""
    return ""  # HTML error pages and the like say nothing a person can use on one line


def _phrase(response: httpx.Response) -> str:
    try:
        return HTTPStatus(response.status_code).phrase
    except ValueError:
        return _clean(response.reason_phrase)


def _retryable(exc: LlmError) -> bool:
    return exc.code in RETRYABLE_CODES and not _permanent(exc)


def _permanent(exc: BaseException) -> bool:
    """A transport failure that a retry cannot fix: a refused certificate, an unknown host,
    TLS against a plain-HTTP port, a proxy that wants credentials, a URL we cannot use."""
    import httpx

    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, ssl.SSLCertVerificationError):
            return True
        if isinstance(link, ssl.SSLError) and link.reason == "WRONG_VERSION_NUMBER":
            return True  # TLS spoken to a plain-HTTP port: an https:// URL that should be http://
        if isinstance(link, socket.gaierror) and link.errno in _UNKNOWN_HOST_ERRNOS:
            return True
        if isinstance(
            link, httpx.UnsupportedProtocol | httpx.LocalProtocolError | httpx.InvalidURL
        ):
            return True  # our configuration or our request is wrong: the next try is the same
        if isinstance(link, httpx.ProxyError) and str(link).startswith("407"):
            return True  # the proxy wants credentials we do not have
        link = link.__cause__ if link.__cause__ is not None else link.__context__
    return False


_UNKNOWN_HOST_ERRNOS = frozenset(
    errno
    for errno in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if errno is not None
)
"""getaddrinfo's "no such name"; "temporary failure in name resolution" stays retryable."""


def _cancelled() -> LlmError:
    return LlmError("DeepSeek API request cancelled", ABORTED)


async def _read_text(response: httpx.Response, limit: int, within: float) -> str:
    """Up to ``limit`` bytes of the body as text; a body that breaks off gives what arrived."""
    import httpx

    parts: list[bytes] = []
    size = 0
    chunks = cast("AsyncGenerator[bytes, None]", response.aiter_bytes())
    # The body only adds detail to a failure already known: never fail again for it.
    with contextlib.suppress(httpx.HTTPError, TimeoutError):
        async with asyncio.timeout(within), contextlib.aclosing(chunks):
            async for chunk in chunks:
                parts.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
    return b"".join(parts)[:limit].decode("utf-8", errors="replace")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    import email.utils  # only HTTP-date values need it; about 4 ms at startup otherwise

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None  # HTTP dates are GMT; a date without a zone is not one
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def redact_url(url: str) -> str:
    """``url`` with any user info (``user:password@``) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def _without_user_info(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url  # httpx will refuse it, and say why
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _payload(request: ChatRequest) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "model": request.model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.max_tokens is not None:
        payload["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    if request.stop:
        payload["stop"] = list(request.stop)
    if request.thinking is not None:
        payload["thinking"] = {"type": "enabled" if request.thinking else "disabled"}
    if request.reasoning_effort is not None:
        payload["reasoning_effort"] = request.reasoning_effort
    return payload


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _quote(data: str) -> str:
    """The first characters of a payload, quoted with escapes so it stays on one line."""
    snippet = data[:_SNIPPET]
    return repr(snippet) + ("..." if len(data) > _SNIPPET else "")


def _clean(text: str) -> str:
    """A server's message on one line, of bounded length."""
    text = " ".join(text.split())
    if len(text) > _SERVER_TEXT_LIMIT:
        text = text[:_SERVER_TEXT_LIMIT] + "..."
    return text
