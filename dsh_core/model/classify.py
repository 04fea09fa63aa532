"""What a failed model request is: its code (SPEC section 5), its message, whether to retry it.

Pure functions over what the server sent (a status, a body, an in-band error object) and over
exception chains; no I/O. The adapter (:mod:`dsh_core.model.deepseek`) calls them at its boundary:

    code = status_code(503, body)                 # "SERVER"
    detail = body_message(body, content_type)     # the server's message, or "" for an HTML page
    failure = in_band_error({"message": "Content Exists Risk"}, request_id)  # CONTENT_FILTER
    if retryable(failure): ...

:class:`ExceptionMap` is the one translator from what a library raises to ``LlmError``, after
httpcore's ``map_exceptions``: the adapter lists its rules once per phase (sending, streaming)
and runs each await through them, instead of repeating ``except ...: raise LlmError(...)``.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ..chain import iter_chain
from ..errors import (
    AUTH,
    CONTENT_FILTER,
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    INVALID_REQUEST,
    QUOTA,
    RATE_LIMIT,
    SERVER,
    STREAM_CLOSED,
    TIMEOUT,
    TRANSPORT,
    Code,
    LlmError,
    http_status_code,
)
from ..masking import mask

__all__ = [
    "MISDIRECTED_STATUSES",
    "PROXY_AUTHENTICATION_REQUIRED",
    "RETRYABLE_CODES",
    "SERVER_TEXT_LIMIT",
    "Build",
    "ExceptionMap",
    "Rule",
    "body_message",
    "error_event",
    "in_band_error",
    "looks_like_html",
    "permanent",
    "retryable",
    "server_text",
    "status_code",
]

T = TypeVar("T")

RETRYABLE_CODES = frozenset({RATE_LIMIT, SERVER, TRANSPORT, TIMEOUT, STREAM_CLOSED, EMPTY_RESPONSE})
"""Codes retried while nothing of the answer has been shown (SPEC section 5)."""

SERVER_TEXT_LIMIT = 500
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
# A page, not a message: markup from its first character (a tag, a doctype, an XML prolog), or
# an HTML document anywhere in it (a JSON message that wraps a gateway's page).
_MARKUP_START = re.compile(r"[\s\ufeff]*<[a-zA-Z!?/]")
_HTML_DOCUMENT = re.compile(r"<(?:!doctype\s+html|html)[\s>]", re.IGNORECASE)

_UNKNOWN_HOST_ERRNOS = frozenset(
    errno
    for errno in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if errno is not None
)
"""getaddrinfo's "no such name"; "temporary failure in name resolution" stays retryable."""

PROXY_AUTHENTICATION_REQUIRED = 407
"""The status a proxy refuses with when it wants credentials: no retry brings them."""

MISDIRECTED_STATUSES = frozenset({404, 405, 501})
"""What a server that is not a chat-completions API answers (a web server, a wrong path): the
base URL is wrong, and asking again gets the same answer."""


# -- statuses and bodies ---------------------------------------------------------------------


def status_code(status: int, body: str) -> Code:
    """SPEC section 5's HTTP table; the first match wins. ``body`` is the error body's text
    (an HTML page's words are a gateway's, not the API's: they are not read)."""
    words = "" if looks_like_html(body) else body
    if status in (401, 403):
        return AUTH
    if status == 402 or _QUOTA_WORDS.search(words):
        return QUOTA
    if status == 429:
        return RATE_LIMIT
    if status == 400 and _CONTEXT_WORDS.search(words):
        return CONTEXT_WINDOW_EXCEEDED
    if status in (400, 413, 422):
        return INVALID_REQUEST
    if 500 <= status <= 599:
        return SERVER
    return http_status_code(status)


def body_message(text: str, content_type: str) -> str:
    """The error body's message: ``error.message``, else a string ``error``, ``message`` or
    ``detail`` (vLLM and FastAPI servers), else the first line of a plain-text body.

    An HTML page says nothing a person can use on one line, whatever its content type (a
    gateway's 502 page may come as ``application/json`` or ``text/plain``): ``""``, so the
    status and its reason phrase stand alone.
    """
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
        return server_text(error) if isinstance(error, str) else ""
    if content_type.lower().startswith("text/plain"):
        lines = text.strip().splitlines()
        return server_text(lines[0]) if lines and not looks_like_html(text) else ""
    return ""


def looks_like_html(text: str) -> bool:
    """Whether ``text`` is markup (an error page) rather than a message."""
    return _MARKUP_START.match(text) is not None or _HTML_DOCUMENT.search(text) is not None


def server_text(text: str) -> str:
    """A server's message on one line, of bounded length, masked; ``""`` for an HTML page.

    Masked before it is cut: a server that echoes the request's ``Authorization`` header
    (some 401s do) must not have half a key shown."""
    if looks_like_html(text):
        return ""
    text = mask(" ".join(text.split()))
    if len(text) > SERVER_TEXT_LIMIT:
        text = text[:SERVER_TEXT_LIMIT] + "..."
    return text


# -- errors inside a stream ------------------------------------------------------------------


def in_band_error(error: object, request_id: str | None) -> LlmError:
    """An ``{"error": ...}`` payload: raised with its message, coded by its wording.

    ``error`` is the payload's ``error`` value (an object with ``message``, ``type``, ``code``;
    or a string), or a whole ``{"type": "error", "code": ..., "message": ...}`` object.
    """
    message = ""
    words = ""
    if isinstance(error, dict):
        raw = error.get("message")
        message = server_text(raw) if isinstance(raw, str) else ""
        words = " ".join(str(error.get(key) or "") for key in ("type", "code"))
    elif isinstance(error, str):
        message = server_text(error)
    if not message and error not in ("", None):
        message = server_text(json.dumps(error, ensure_ascii=False))
    words = f"{message} {words}"
    code: Code
    if _CONTENT_RISK_WORDS.search(words):
        code = CONTENT_FILTER
    elif _QUOTA_WORDS.search(words):
        code = QUOTA
    elif _CONTEXT_WORDS.search(words):
        code = CONTEXT_WINDOW_EXCEEDED
    else:
        code = SERVER
    return LlmError(
        f"DeepSeek API reported an error in the stream: {message or 'no message given'}",
        code,
        request_id=request_id,
    )


def error_event(data: str, request_id: str | None) -> LlmError:
    """A named SSE ``error`` event, whatever the shape of its data: ``{"error": {...}}``,
    ``{"error": "text"}``, ``{"type": "error", "code": ..., "message": ...}``, or plain text."""
    try:
        payload: object = json.loads(data)
    except ValueError:
        payload = data
    if isinstance(payload, dict) and payload.get("error") is not None:
        payload = payload["error"]
    return in_band_error(payload, request_id)


# -- retrying --------------------------------------------------------------------------------


def retryable(exc: LlmError) -> bool:
    """Whether a retry could help: a transient code, not a misdirected request (a 501 is a
    5xx, but a plain web server's), and no permanent cause below it."""
    return (
        exc.code in RETRYABLE_CODES
        and exc.status not in MISDIRECTED_STATUSES
        and not permanent(exc)
    )


def permanent(exc: LlmError) -> bool:
    """A transport failure that a retry cannot fix: a refused certificate, an unknown host,
    TLS against a plain-HTTP port, a proxy that wants credentials, a URL we cannot use.

    Routed on types and attributes only: a proxy's 407 is the ``status`` the adapter gave the
    ``LlmError`` it built, not words in a message.
    """
    if exc.code == TRANSPORT and exc.status == PROXY_AUTHENTICATION_REQUIRED:
        return True  # the proxy wants credentials we do not have
    import httpx

    for link in iter_chain(exc):
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
    return False


# -- translating exceptions ------------------------------------------------------------------


Build = Callable[[BaseException], LlmError]
"""Makes the ``LlmError`` that an exception caught stands for."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One line of an :class:`ExceptionMap`: what an exception of ``types`` becomes."""

    types: type[BaseException] | tuple[type[BaseException], ...]
    build: Build
    """Makes the ``LlmError`` from the exception caught."""
    chain: bool = True
    """Keep the exception as the ``LlmError``'s ``__cause__``. ``False`` for a timer that
    fired: its chain is only a cancel scope's text with a memory address, and the message
    already says which timer and how long."""


class ExceptionMap:
    """Translate what an await raises into ``LlmError``: the first matching rule wins.

        sending = ExceptionMap(Rule(asyncio.CancelledError, aborted), Rule(httpx.HTTPError, failed))
        response = await sending.run(client.send(request))

    An exception no rule matches propagates unchanged (an ``LlmError`` raised inside, say).
    The translation is raised outside the ``except`` block, so a rule with ``chain=False``
    leaves no ``__context__`` behind either.
    """

    __slots__ = ("_rules",)

    def __init__(self, *rules: Rule) -> None:
        self._rules = rules

    def translate(self, exc: BaseException) -> LlmError | None:
        """The ``LlmError`` that ``exc`` becomes, or ``None`` when no rule matches it."""
        for rule in self._rules:
            if isinstance(exc, rule.types):
                failure = rule.build(exc)
                if rule.chain:
                    failure.__cause__ = exc
                return failure
        return None

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``; raise its failure translated."""
        try:
            return await awaitable
        except BaseException as exc:
            failure = self.translate(exc)
            if failure is None:
                raise
        raise failure
