"""Every exception httpx or httpcore can raise at the adapter has its LlmError, as httpx's own
``test_httpcore_all_exceptions_mapped`` guards its map: an upgrade that adds a failure cannot
let it fall through to ``UNKNOWN`` unnoticed."""

from __future__ import annotations

import types

import httpcore
import httpx
import pytest
from httpx._transports.default import map_httpcore_exceptions

from dsh_core.model.classify import ExceptionMap
from dsh_core.model.deepseek import sending_errors
from dsh_core.model.response import reading_errors

SENDING = sending_errors(
    "DeepSeek API request to http://x", connect_timeout=10, read_timeout=60, idle_timeout=120
)
READING = reading_errors("DeepSeek API stream from http://x", 120, "req-1")

NOT_RAISED_AT_THE_ADAPTER = {
    # Misuse of a request or response object: a bug of ours, left to surface as itself.
    httpx.StreamError: "dsh's own mistake",
    httpx.StreamConsumed: "dsh's own mistake",
    httpx.StreamClosed: "dsh's own mistake",
    httpx.ResponseNotRead: "dsh's own mistake",
    httpx.RequestNotRead: "dsh's own mistake",
    httpx.HTTPStatusError: "raise_for_status() only: the adapter reads the status itself",
    httpx.CookieConflict: "cookie jar lookups only",
    # Raised and caught inside httpcore's pool, as httpx's own test notes.
    httpcore.ConnectionNotAvailable: "the pool retries it itself",
}


def exception_classes(module: types.ModuleType) -> list[type[Exception]]:
    found = {
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Exception)
    }
    return sorted(found, key=lambda cls: cls.__name__)


def as_httpx(cls: type[Exception]) -> Exception:
    """An instance of ``cls`` as it reaches the adapter: httpcore's go through httpx's map."""
    if cls.__module__.startswith("httpcore"):
        try:
            with map_httpcore_exceptions():
                raise cls("boom")
        except Exception as exc:
            return exc
    return cls("boom")


def expected_code(exc: Exception, phase: ExceptionMap) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "TIMEOUT"
    if phase is READING and isinstance(exc, httpx.DecodingError):
        return "MALFORMED_RESPONSE"
    return "TRANSPORT"


@pytest.mark.parametrize("phase", [SENDING, READING], ids=["sending", "reading"])
@pytest.mark.parametrize(
    "cls",
    exception_classes(httpx) + exception_classes(httpcore),
    ids=lambda cls: f"{cls.__module__.split('.')[0]}.{cls.__name__}",
)
def test_every_exception_has_its_llm_error(cls: type[Exception], phase: ExceptionMap) -> None:
    if cls in NOT_RAISED_AT_THE_ADAPTER:
        return
    exc = as_httpx(cls)
    assert not isinstance(exc, httpcore.ConnectionNotAvailable)
    failure = phase.translate(exc)
    assert failure is not None, f"{type(exc).__module__}.{type(exc).__name__} is not mapped"
    assert failure.code == expected_code(exc, phase)


def test_cancellation_is_never_translated() -> None:
    # The loop owns cancellation (dsh_core.agent.cancel): no map may turn it into an error.
    import asyncio

    for phase in (SENDING, READING):
        assert phase.translate(asyncio.CancelledError()) is None


def test_the_list_of_exceptions_left_alone_is_current() -> None:
    # An entry for a class that no longer exists would hide nothing: keep the list honest.
    known = set(exception_classes(httpx)) | set(exception_classes(httpcore))
    assert set(NOT_RAISED_AT_THE_ADAPTER) <= known
