"""The DeepSeek chat-completions API (or any OpenAI-compatible server) as a :class:`ChatModel`.

    adapter = DeepSeekAdapter(base_url="https://api.deepseek.com", api_key=key)
    try:
        async for event in adapter.stream(ChatRequest(model="deepseek-v4-flash", messages=msgs)):
            ...
    finally:
        await adapter.close()

This module is the HTTP side only: sending, timeouts, retries, connections. What goes on the
wire and how stream chunks become events is :mod:`dsh_core.model.wire` (pure); what a failure is
called and whether it is worth retrying is :mod:`dsh_core.model.classify`; URL redaction is
:mod:`dsh_core.model.urls`.

Every failure is an :class:`~dsh_core.errors.LlmError` whose message holds this layer's words
only (``DeepSeek API request to <base URL> failed``) and whose ``__cause__`` is what httpx raised;
:func:`~dsh_core.chain.error_chain` renders the whole chain. What httpx and asyncio raise is
translated in one place per phase (an :class:`~dsh_core.model.classify.ExceptionMap`:
:func:`sending_errors`, and :func:`dsh_core.model.response.reading_errors` for the stream, which
:mod:`dsh_core.model.response` reads). Transient failures are retried while nothing of the answer
has been shown, each retry announced by a :class:`~dsh_core.model.seam.RetryNotice`. Cancelling the
consuming task cancels the request: ``CancelledError`` passes through, the connection closed.
The timers (the wait for the response, the silence between stream events) and the backoff run
on a :class:`~dsh_core.clock.Clock`, so tests move time instead of waiting for it.

httpx is imported on the first request, not with this module: ``import dsh_core`` stays cheap.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import ssl
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, cast

from ..chain import error_chain
from ..clock import LOOP_CLOCK, Clock, Deadline, time_limit
from ..errors import (
    MALFORMED_RESPONSE,
    MISSING_CREDENTIAL,
    TIMEOUT,
    TRANSPORT,
    LlmError,
    UsageError,
)
from ..masking import hide, mask
from ..version import __version__
from .classify import (
    PROXY_AUTHENTICATION_REQUIRED,
    ExceptionMap,
    Rule,
    body_message,
    in_band_error,
    retryable,
    server_text,
    status_code,
)
from .response import ResponseReader, seconds
from .seam import ChatRequest, Event, RetryNotice
from .urls import is_local, redact_url, without_user_info
from .wire import RequestEncoder

if TYPE_CHECKING:
    import httpx

__all__ = [
    "API_KEY_VARIABLE",
    "CHAT_PATH",
    "CONNECT_TIMEOUT",
    "DEFAULT_BASE_URL",
    "IDLE_TIMEOUT",
    "READ_TIMEOUT",
    "DeepSeekAdapter",
    "RetryPolicy",
    "parse_retry_after",
    "sending_errors",
]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.deepseek.com"
CHAT_PATH = "/chat/completions"
"""What requests add to the base URL."""
CONNECT_TIMEOUT = 10.0
"""Seconds to connect (TCP, TLS, proxy)."""
READ_TIMEOUT = 60.0
"""Seconds to wait for the response status and headers."""
IDLE_TIMEOUT = 120.0
"""Seconds of silence allowed once the request is sent; a keep-alive comment ends a silence."""
API_KEY_VARIABLE = "DEEPSEEK_API_KEY"
"""Where the key comes from; named in the MISSING_CREDENTIAL message."""

_ERROR_BODY_LIMIT = 64 * 1024
"""Bytes of an error body read for its message; the rest is not worth waiting for."""
_PROXY_VARIABLES = ("https_proxy", "http_proxy", "all_proxy")


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


class _MaskRecords(logging.Filter):
    """Masks the API key in a library's log records (httpx logs every request's URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_MASK_RECORDS = _MaskRecords()


def sending_errors(
    where: str, *, connect_timeout: float, read_timeout: float, idle_timeout: float
) -> ExceptionMap:
    """What sending a request and waiting for its headers raises, as ``LlmError``.

    ``where`` begins each message (``DeepSeek API request to <base URL>``); the timeouts are
    the adapter's, named in the message of the timer that fired.
    """
    import httpx

    def timed_out(exc: BaseException) -> LlmError:
        if isinstance(exc, httpx.ConnectTimeout):
            what = f"timed out connecting after {seconds(connect_timeout)}"
        elif isinstance(exc, httpx.PoolTimeout):
            what = f"timed out waiting for a free connection after {seconds(connect_timeout)}"
        elif isinstance(exc, httpx.WriteTimeout):
            what = f"timed out sending the request for {seconds(idle_timeout)}"
        elif read_timeout <= idle_timeout and not isinstance(exc, httpx.ReadTimeout):
            what = f"timed out waiting for a response after {seconds(read_timeout)}"
        else:  # the headers wait is bounded by the silence allowed, when that is shorter
            what = f"timed out: nothing received for {seconds(idle_timeout)}"
        return LlmError(f"{where} {what}", TIMEOUT)

    def failed(exc: BaseException) -> LlmError:
        return LlmError(f"{where} failed", TRANSPORT)

    def proxy_refused(exc: BaseException) -> LlmError:
        return LlmError(f"{where} failed", TRANSPORT, status=_connect_status(exc))

    return ExceptionMap(
        # Our timer for the headers, or one of httpx's: the message says which.
        Rule((TimeoutError, httpx.TimeoutException), timed_out, chain=False),
        Rule(httpx.ProxyError, proxy_refused),
        Rule((httpx.HTTPError, httpx.InvalidURL), failed),
    )


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
        reasoning_shown: bool = True,
        client: httpx.AsyncClient | None = None,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        """Configure; nothing is opened or checked until the first :meth:`stream`.

        ``connect_timeout`` bounds connecting (TCP, TLS, proxy). ``read_timeout`` bounds the
        wait for the response status and headers. ``idle_timeout`` bounds any silence once the
        request is sent: a keep-alive comment ends a silence, so a busy server that sends them
        is waited for. ``reasoning_shown`` says whether the front door shows reasoning to the
        person: when it does not (a pipe without ``--show-reasoning``), a stream that fails
        after reasoning only is retried, since nothing was shown. ``client`` shares a caller's
        ``httpx.AsyncClient`` (:meth:`close` leaves it open); by default one is created on the
        first request and reused for every turn. User info in ``base_url`` is shown redacted
        and never sent: the key is the credential. A base URL on this machine or a private
        network may go without a key (no ``Authorization`` header): a local vLLM needs none.
        A base URL that already ends in ``/chat/completions`` is wrong for sure (requests go
        to ``.../chat/completions/chat/completions``): its failures are never retried.
        ``clock`` runs the timers and the backoff.
        """
        self._base_url = base_url.rstrip("/")
        self._shown_url = redact_url(self._base_url)
        self._where = f"DeepSeek API request to {self._shown_url}"
        """How failures before a response begin (SPEC section 5)."""
        # User info stays out of the request: httpx would turn it into Basic auth, replacing
        # the Bearer key, and print it in its request log line.
        self._endpoint = f"{without_user_info(self._base_url)}{CHAT_PATH}"
        self._misdirected = self._base_url.endswith(CHAT_PATH)
        key = api_key.strip() if api_key is not None else ""
        self._api_key = _Secret(key) if key else None
        hide(key)  # from now on, every string dsh shows, stores or sends shows it masked
        self._keyless = self._api_key is None and is_local(self._base_url)
        """No key, and none needed: the server is the user's own."""
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle_timeout = idle_timeout
        self._retry = retry if retry is not None else RetryPolicy()
        self._reasoning_shown = reasoning_shown
        self._client = client
        self._encoder = RequestEncoder()
        """Each message's bytes, encoded once for all the steps that send it."""
        self._owns_client = client is None
        self._closed = False
        self._clock = clock
        self._sending: ExceptionMap | None = None
        """What sending raises becomes; built with the first request (it needs httpx)."""

    def __repr__(self) -> str:
        key = "<set>" if self._api_key is not None else "None"
        return f"DeepSeekAdapter(base_url={self._shown_url!r}, api_key={key})"

    @property
    def base_url(self) -> str:
        """The base URL as shown to people: trailing slash removed, user info redacted."""
        return self._shown_url

    async def close(self) -> None:
        """Close the client this adapter created; a shared client is left to its owner."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    async def stream(self, request: ChatRequest) -> AsyncGenerator[Event, None]:
        """Stream one chat completion; retry transient failures until something is shown."""
        headers = self._headers()  # MISSING_CREDENTIAL before any I/O
        body = self._encoder.encode(request)
        policy = self._retry
        attempt = 0
        while True:
            reader: ResponseReader | None = None
            try:
                reader = await self._open(headers, body)
                while True:
                    for event in await reader.read():
                        yield event
                    if reader.finished:
                        return
            except LlmError as exc:
                shown = reader is not None and reader.shown
                stop = shown or self._misdirected or attempt >= policy.max_retries
                if stop or not retryable(exc):
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
            await self._clock.sleep(delay)

    # -- sending -----------------------------------------------------------------------------

    async def _open(self, headers: dict[str, str], body: bytes) -> ResponseReader:
        """Send the request; return a reader for its event stream, or raise what went wrong."""
        client = self._get_client()
        if self._sending is None:
            self._sending = sending_errors(
                self._where,
                connect_timeout=self._connect_timeout,
                read_timeout=self._read_timeout,
                idle_timeout=self._idle_timeout,
            )
        response = await self._sending.run(self._send(client, headers, body))
        request_id = response.headers.get("x-request-id")
        await self._sending.run(self._accept(response, request_id))
        return ResponseReader(
            response,
            shown_url=self._shown_url,
            idle=Deadline(self._clock, self._idle_timeout),
            idle_seconds=self._idle_timeout,
            request_id=request_id,
            reasoning_shown=self._reasoning_shown,
        )

    async def _send(
        self, client: httpx.AsyncClient, headers: dict[str, str], body: bytes
    ) -> httpx.Response:
        import httpx

        # Reads are bounded by our clock's timers (here the headers; then each silence of the
        # stream), connecting and writing by httpx's.
        timeout = httpx.Timeout(
            connect=self._connect_timeout,
            read=None,
            write=self._idle_timeout,
            pool=self._connect_timeout,
        )
        request = client.build_request(
            "POST", self._endpoint, content=body, headers=headers, timeout=timeout
        )
        # No byte can arrive before the headers, so the silence allowed bounds the wait too.
        with time_limit(self._clock, min(self._read_timeout, self._idle_timeout)):
            return await client.send(request, stream=True)

    async def _accept(self, response: httpx.Response, request_id: str | None) -> None:
        """Raise the failure a response that is not an event stream stands for."""
        import httpx

        try:
            if response.status_code == PROXY_AUTHENTICATION_REQUIRED:
                # Only a proxy says 407; on an http:// URL httpx hands it over as a response.
                # Report it as the https:// path does: a transport failure, not the API's.
                proxy = httpx.ProxyError(f"407 {_phrase(response)}".rstrip())
                raise LlmError(
                    f"{self._where} failed", TRANSPORT, status=PROXY_AUTHENTICATION_REQUIRED
                ) from proxy
            if not 200 <= response.status_code < 300:
                raise await self._status_error(response, request_id)
            content_type = response.headers.get("content-type", "")
            if content_type and not content_type.lower().startswith("text/event-stream"):
                raise await self._not_a_stream(response, content_type, request_id)
        except BaseException:
            await response.aclose()
            raise

    async def _status_error(self, response: httpx.Response, request_id: str | None) -> LlmError:
        """An HTTP error status, classified by SPEC section 5 (first match wins)."""
        status = response.status_code
        text = await self._read_text(response)
        detail = body_message(text, response.headers.get("content-type", ""))
        message = f"DeepSeek API returned HTTP {status} {_phrase(response)}".rstrip()
        if detail:
            message = f"{message}: {detail}"
        return LlmError(
            message,
            status_code(status, text),
            status=status,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            request_id=request_id,
        )

    async def _not_a_stream(
        self, response: httpx.Response, content_type: str, request_id: str | None
    ) -> LlmError:
        """A 2xx answer that is not an event stream: an error object, or not the protocol."""
        text = await self._read_text(response)
        with contextlib.suppress(ValueError):
            payload = json.loads(text)
            if isinstance(payload, dict) and payload.get("error") is not None:
                return in_band_error(payload["error"], request_id)
        return LlmError(
            f"DeepSeek API answered with content type {content_type!r}, not an event stream",
            MALFORMED_RESPONSE,
            status=response.status_code,
            request_id=request_id,
        )

    # -- plumbing ----------------------------------------------------------------------------

    def check_key(self) -> str | None:
        """The key (None for a local server without one), or ``LlmError(MISSING_CREDENTIAL)``
        if it is absent or unusable; no I/O.

        Front doors call it at startup, so a bad key is a startup failure, not a turn's.
        """
        if self._keyless:
            return None
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

    async def _read_text(self, response: httpx.Response) -> str:
        """The start of an error body as text; a body that breaks off gives what arrived."""
        import httpx

        parts: list[bytes] = []
        size = 0
        chunks = cast("AsyncGenerator[bytes, None]", response.aiter_bytes())
        # The body only adds detail to a failure already known: never fail again for it.
        with contextlib.suppress(httpx.HTTPError, TimeoutError):
            async with contextlib.aclosing(chunks):
                with time_limit(self._clock, self._read_timeout):
                    async for chunk in chunks:
                        parts.append(chunk)
                        size += len(chunk)
                        if size >= _ERROR_BODY_LIMIT:
                            break
        return b"".join(parts)[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")

    def _headers(self) -> dict[str, str]:
        key = self.check_key()
        headers = {
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",  # a compressed event stream arrives in bursts
            "Content-Type": "application/json",
            "User-Agent": f"dsh/{__version__}",
        }
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            if self._closed:
                raise UsageError("DeepSeekAdapter.stream() called after close()")
            import httpx

            # httpx logs each request's URL, which may carry the key (``?key=...``).
            logging.getLogger("httpx").addFilter(_MASK_RECORDS)
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


def _connect_status(exc: BaseException) -> int | None:
    """The status of a proxy's refused ``CONNECT`` (the https:// path).

    httpcore gives it only as its message, ``"<status> <reason>"``: it is read here, once, at
    the boundary, into ``LlmError.status``; everything after routes on that attribute.
    """
    text = str(exc)
    head = text[:3]
    if head.isascii() and head.isdigit() and text[3:4] in ("", " "):
        return int(head)
    return None


def _phrase(response: httpx.Response) -> str:
    try:
        return HTTPStatus(response.status_code).phrase
    except ValueError:
        return server_text(response.reason_phrase)


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
