"""Classifying failures: statuses, bodies, in-band errors, retries, and the exception map.

Pure functions, tested directly; the same rules over real sockets are in ``test_deepseek.py``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

import httpx
import pytest

from dsh_core.errors import LlmError, http_status_code
from dsh_core.model.classify import (
    SERVER_TEXT_LIMIT,
    ExceptionMap,
    Rule,
    body_message,
    error_event,
    in_band_error,
    looks_like_html,
    permanent,
    retryable,
    server_text,
    status_code,
)

NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


# -- statuses and bodies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (401, "", "AUTH"),
        (403, "quota", "AUTH"),  # first match wins
        (402, "", "QUOTA"),
        (429, '{"error": {"message": "insufficient_quota"}}', "QUOTA"),
        (500, "Account balance is negative", "QUOTA"),
        (429, "slow down", "RATE_LIMIT"),
        (400, "maximum context length is 65536 tokens", "CONTEXT_WINDOW_EXCEEDED"),
        (413, "context length exceeded", "INVALID_REQUEST"),  # only a 400 speaks of context
        (400, "bad", "INVALID_REQUEST"),
        (422, "", "INVALID_REQUEST"),
        (503, "no healthy upstream behind the load balancer", "SERVER"),
        (599, "", "SERVER"),
        (404, "", "HTTP_404"),
        # A gateway's page is not the API speaking: its words do not count.
        (502, "<html><body>Check your balance at the load balancer</body></html>", "SERVER"),
        (400, "<!DOCTYPE html><p>context length</p>", "INVALID_REQUEST"),
    ],
)
def test_status_code(status: int, body: str, code: str) -> None:
    assert status_code(status, body) == code


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        ('{"error": {"message": "No money"}}', "application/json", "No money"),
        ('{"error": "plain error"}', "application/json", "plain error"),
        ('{"message": "vLLM says no"}', "application/json", "vLLM says no"),
        ('{"detail": "FastAPI says no"}', "application/json", "FastAPI says no"),
        ('{"detail": [{"loc": ["body"]}]}', "application/json", ""),
        ('{"error": {"code": 500}}', "application/json", ""),
        ("first line\nsecond line", "text/plain; charset=utf-8", "first line"),
        ("   ", "text/plain", ""),
        ("not json", "application/octet-stream", ""),
        ("  spaced \t out  ", "TEXT/PLAIN", "spaced out"),
    ],
)
def test_body_message(body: str, content_type: str, message: str) -> None:
    assert body_message(body, content_type) == message


@pytest.mark.parametrize("content_type", ["text/html", "application/json", "text/plain", ""])
@pytest.mark.parametrize(
    "page",
    [
        NGINX_502,
        "<!DOCTYPE html>\n<html lang='en'><title>Just a moment...</title></html>",
        '\ufeff  <?xml version="1.0"?><!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0//EN">',
        "<h1>502 Bad Gateway</h1>",
        '{"error": {"message": "<html><body>Bad gateway</body></html>"}}',
        '{"error": "upstream said: <!doctype html><html>...</html>"}',
    ],
)
def test_an_html_page_is_never_a_message(page: str, content_type: str) -> None:
    assert body_message(page, content_type) == ""


@pytest.mark.parametrize(
    ("text", "html"),
    [
        (NGINX_502, True),
        ("  <HTML>", True),
        ("<!doctype html>", True),
        ("text then <html>", True),
        ("</div>", True),
        ("a < b and c > d", False),
        ("<= 5 tokens left", False),
        ("Invalid value <none> for tools", False),
        ("", False),
    ],
)
def test_looks_like_html(text: str, html: bool) -> None:
    assert looks_like_html(text) is html


def test_server_text_is_one_bounded_line() -> None:
    assert server_text("a\n b\r\n\tc") == "a b c"
    long = server_text("x" * (SERVER_TEXT_LIMIT + 1))
    assert long == "x" * SERVER_TEXT_LIMIT + "..."
    assert server_text(NGINX_502) == ""


# -- errors inside a stream --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "message", "code"),
    [
        ({"message": "Content Exists Risk"}, "Content Exists Risk", "CONTENT_FILTER"),
        ({"message": "blocked", "code": "content_filter"}, "blocked", "CONTENT_FILTER"),
        ({"message": "Insufficient Balance"}, "Insufficient Balance", "QUOTA"),
        ({"message": "no", "type": "insufficient_quota"}, "no", "QUOTA"),
        ({"message": "maximum context length exceeded"}, "maximum context length exceeded",
         "CONTEXT_WINDOW_EXCEEDED"),
        ({"message": "Internal inference error"}, "Internal inference error", "SERVER"),
        ({"code": 500}, '{"code": 500}', "SERVER"),  # no message: the object itself
        ("a plain string", "a plain string", "SERVER"),
        ("", "no message given", "SERVER"),
        ({"message": "<html><body>oops</body></html>"}, "no message given", "SERVER"),
    ],
)  # fmt: skip
def test_in_band_error(error: object, message: str, code: str) -> None:
    failure = in_band_error(error, "req-1")
    assert failure.code == code
    assert failure.message == f"DeepSeek API reported an error in the stream: {message}"
    assert failure.request_id == "req-1"


@pytest.mark.parametrize(
    ("data", "message", "code"),
    [
        ('{"error": {"message": "Content Exists Risk", "type": "x"}}', "Content Exists Risk",
         "CONTENT_FILTER"),
        ('{"type": "error", "code": "insufficient_quota", "message": "Pay up"}', "Pay up", "QUOTA"),
        ('{"type": "error", "message": "prompt is too long"}', "prompt is too long",
         "CONTEXT_WINDOW_EXCEEDED"),
        ('{"error": "Overloaded"}', "Overloaded", "SERVER"),
        ("upstream went away", "upstream went away", "SERVER"),
        ('"just a JSON string"', "just a JSON string", "SERVER"),
    ],
)  # fmt: skip
def test_error_event_whatever_its_shape(data: str, message: str, code: str) -> None:
    failure = error_event(data, None)
    assert (failure.code, failure.message) == (
        code,
        f"DeepSeek API reported an error in the stream: {message}",
    )


# -- retrying ----------------------------------------------------------------------------------


def transport(cause: BaseException | None = None, status: int | None = None) -> LlmError:
    failure = LlmError("DeepSeek API request to http://x failed", "TRANSPORT", status=status)
    failure.__cause__ = cause
    return failure


def wrong_version() -> ssl.SSLError:
    error = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    error.reason = "WRONG_VERSION_NUMBER"
    return error


def hidden(outer: BaseException, inner: BaseException) -> BaseException:
    """``inner`` as a suppressed context, as httpcore's ``raise ... from None`` leaves it."""
    outer.__context__ = inner
    outer.__suppress_context__ = True
    return outer


@pytest.mark.parametrize(
    ("failure", "is_permanent"),
    [
        (transport(ssl.SSLCertVerificationError(1, "certificate verify failed")), True),
        (transport(httpx.ConnectError("x")), False),
        (transport(hidden(httpx.ConnectError("tls"), wrong_version())), True),
        (transport(hidden(httpx.ConnectError("dns"), socket.gaierror(socket.EAI_NONAME, "no"))),
         True),
        (transport(socket.gaierror(socket.EAI_AGAIN, "Temporary failure")), False),
        (transport(httpx.UnsupportedProtocol("ftp")), True),
        (transport(httpx.InvalidURL("bad")), True),
        (transport(status=407), True),
        (transport(httpx.ProxyError("503 Service Unavailable"), status=503), False),
        # Routing never reads message text: a 407 in words alone is not a 407.
        (transport(httpx.ProxyError("407 Proxy Authentication Required")), False),
        (LlmError("DeepSeek API returned HTTP 407", http_status_code(407), status=407), False),
    ],
)  # fmt: skip
def test_permanent(failure: LlmError, is_permanent: bool) -> None:
    assert permanent(failure) is is_permanent


def test_permanent_survives_a_cycle() -> None:
    a, b = httpx.ConnectError("a"), OSError("b")
    a.__cause__, b.__cause__ = b, a
    assert permanent(transport(a)) is False


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (LlmError("x", "SERVER"), True),
        (LlmError("x", "SERVER", status=503), True),
        (LlmError("x", "SERVER", status=501), False),  # a web server, not the API
        (LlmError("x", http_status_code(404), status=404), False),
        (LlmError("x", http_status_code(405), status=405), False),
        (LlmError("x", "RATE_LIMIT"), True),
        (LlmError("x", "EMPTY_RESPONSE"), True),
        (LlmError("x", "STREAM_CLOSED"), True),
        (LlmError("x", "TIMEOUT"), True),
        (transport(httpx.ConnectError("refused")), True),
        (transport(status=407), False),
        (LlmError("x", "AUTH"), False),
        (LlmError("x", "MALFORMED_RESPONSE"), False),
        (LlmError("x", "CONTENT_FILTER"), False),
    ],
)
def test_retryable(failure: LlmError, expected: bool) -> None:
    assert retryable(failure) is expected


# -- the exception map -------------------------------------------------------------------------


def test_the_first_matching_rule_wins_and_keeps_the_cause() -> None:
    errors = ExceptionMap(
        Rule(httpx.ConnectError, lambda exc: LlmError("connect", "TRANSPORT")),
        Rule(httpx.HTTPError, lambda exc: LlmError("http", "TRANSPORT")),
    )
    cause = httpx.ConnectError("refused")
    failure = errors.translate(cause)
    assert failure is not None and failure.message == "connect"
    assert failure.__cause__ is cause and failure.__suppress_context__
    other = errors.translate(httpx.ReadError("cut"))
    assert other is not None and other.message == "http"
    assert errors.translate(ValueError("not ours")) is None


def test_run_returns_the_value_and_translates_failures() -> None:
    async def value() -> int:
        return 7

    async def fails() -> int:
        raise httpx.ReadError("cut")

    errors = ExceptionMap(Rule(httpx.HTTPError, lambda exc: LlmError("read failed", "TRANSPORT")))

    async def main() -> tuple[int, LlmError]:
        got = await errors.run(value())
        with pytest.raises(LlmError) as caught:
            await errors.run(fails())
        return got, caught.value

    got, failure = asyncio.run(main())
    assert got == 7
    assert isinstance(failure.__cause__, httpx.ReadError)


def test_a_rule_without_chain_leaves_no_context_either() -> None:
    async def fires() -> None:
        try:
            raise asyncio.CancelledError("Cancelled via cancel scope 7f00deadbeef")
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc

    errors = ExceptionMap(Rule(TimeoutError, lambda exc: LlmError("timed out", "TIMEOUT"), False))
    with pytest.raises(LlmError) as caught:
        asyncio.run(errors.run(fires()))
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_an_exception_no_rule_matches_passes_unchanged() -> None:
    mine = LlmError("already ours", "STREAM_CLOSED")

    async def fails() -> None:
        raise mine

    errors = ExceptionMap(Rule(httpx.HTTPError, lambda exc: LlmError("x", "TRANSPORT")))
    with pytest.raises(LlmError) as caught:
        asyncio.run(errors.run(fails()))
    assert caught.value is mine


def test_a_cancelled_await_becomes_aborted() -> None:
    errors = ExceptionMap(
        Rule(asyncio.CancelledError, lambda exc: LlmError("request cancelled", "ABORTED"))
    )

    async def main() -> LlmError:
        started = asyncio.Event()

        async def wait() -> None:
            started.set()
            await asyncio.sleep(3600)

        task = asyncio.create_task(errors.run(wait()))
        await started.wait()
        task.cancel()
        with pytest.raises(LlmError) as caught:
            await task
        return caught.value

    failure = asyncio.run(main())
    assert failure.code == "ABORTED"
    assert isinstance(failure.__cause__, asyncio.CancelledError)
