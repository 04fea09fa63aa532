"""Every exception dsh raises, and the failure record the session log stores.

The hierarchy::

    * HarnessError          .code: a stable string that users and code route on
      x LlmError            .status, .retry_after, .request_id; codes TRANSPORT, TIMEOUT, AUTH, ...
                            __cause__ is the httpx (or other) exception that started it
      x SessionLogError     the log on disk is damaged, from a newer format, or unwritable
    * UsageError(RuntimeError)  our own misuse of an API, never shown as a turn failure

Messages hold only this layer's words. The cause chain is kept as ``__cause__`` and rendered
by :func:`dsh_core.chain.error_chain` wherever a failure is shown or stored; baking the chain
into the message would render it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NewType

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "AUTH",
    "CONTENT_FILTER",
    "CONTEXT_WINDOW_EXCEEDED",
    "EMPTY_RESPONSE",
    "INVALID_REQUEST",
    "MALFORMED_RESPONSE",
    "MCP_SERVER",
    "MISSING_CREDENTIAL",
    "QUOTA",
    "RATE_LIMIT",
    "SANDBOX_ESCAPE",
    "SANDBOX_UNAVAILABLE",
    "SERVER",
    "SESSION_LOG",
    "STARTUP",
    "STREAM_CLOSED",
    "SUBAGENT_FAILED",
    "TIMEOUT",
    "TOOL_FAILED",
    "TOOL_NOT_RUN",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_REFUSED",
    "TRANSPORT",
    "UNKNOWN",
    "Code",
    "ErrorCode",
    "FailureRecord",
    "HarnessError",
    "HttpStatusCode",
    "LlmError",
    "SessionLogError",
    "UsageError",
    "http_status_code",
]

ErrorCode = Literal[
    "TRANSPORT",
    "TIMEOUT",
    "ABORTED",
    "AUTH",
    "QUOTA",
    "RATE_LIMIT",
    "SERVER",
    "INVALID_REQUEST",
    "CONTEXT_WINDOW_EXCEEDED",
    "STREAM_CLOSED",
    "MALFORMED_RESPONSE",
    "EMPTY_RESPONSE",
    "CONTENT_FILTER",
    "MISSING_CREDENTIAL",
    "UNKNOWN",
    "SESSION_LOG",
    "SANDBOX_UNAVAILABLE",
    "SANDBOX_ESCAPE",
    "STARTUP",
    "TOOL_FAILED",
    "TOOL_REFUSED",
    "TOOL_NOT_RUN",
    "ABORTED_BEFORE_DISPATCH",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "MCP_SERVER",
    "SUBAGENT_FAILED",
]
"""Every code but ``HTTP_<status>``; each has its constant below, which says what it means.
mypy rejects any other string where a code is expected (``LlmError("x", "ABORTD")``)."""

HttpStatusCode = NewType("HttpStatusCode", str)
"""``HTTP_<status>``, for a status no rule of SPEC section 5 names: made by
:func:`http_status_code` only."""

Code = ErrorCode | HttpStatusCode
"""What every exception here takes as its ``code``."""

# The codes users see (SPEC section 5). HTTP_<status> is built by http_status_code().
TRANSPORT: Final = "TRANSPORT"
"""No response arrived: DNS, refused connection, TLS, proxy, or a connection broken mid-stream."""
TIMEOUT: Final = "TIMEOUT"
"""Connecting, reading, or waiting between stream events took too long."""
ABORTED: Final = "ABORTED"
"""The request was cancelled by its turn (Ctrl-C, SIGTERM)."""
AUTH: Final = "AUTH"
"""HTTP 401 or 403: the key is missing, wrong or not allowed."""
QUOTA: Final = "QUOTA"
"""HTTP 402, or a body that speaks of balance or quota."""
RATE_LIMIT: Final = "RATE_LIMIT"
"""HTTP 429."""
SERVER: Final = "SERVER"
"""HTTP 5xx, an in-band server error, or `insufficient_system_resource`."""
INVALID_REQUEST: Final = "INVALID_REQUEST"
"""HTTP 400, 413 or 422 without context-length wording."""
CONTEXT_WINDOW_EXCEEDED: Final = "CONTEXT_WINDOW_EXCEEDED"
"""The conversation no longer fits the model's context window."""
STREAM_CLOSED: Final = "STREAM_CLOSED"
"""The stream ended cleanly but without `data: [DONE]`."""
MALFORMED_RESPONSE: Final = "MALFORMED_RESPONSE"
"""The server sent something that is not the protocol: bad JSON, a non-object payload."""
EMPTY_RESPONSE: Final = "EMPTY_RESPONSE"
"""The stream finished without any content at all."""
CONTENT_FILTER: Final = "CONTENT_FILTER"
"""The provider's content filter stopped the answer."""
MISSING_CREDENTIAL: Final = "MISSING_CREDENTIAL"
"""No API key was configured."""
UNKNOWN: Final = "UNKNOWN"
"""Anything that is not a HarnessError."""
SESSION_LOG: Final = "SESSION_LOG"
"""The session log could not be read or written."""
SANDBOX_UNAVAILABLE: Final = "SANDBOX_UNAVAILABLE"
"""``--sandbox on`` and bwrap cannot run: a startup failure."""
SANDBOX_ESCAPE: Final = "SANDBOX_ESCAPE"
"""A sandboxed command left something that would run or steer code outside the sandbox (a
git hook, a ``.pth``, an ``AGENTS.md``) and dsh could not set it aside: the turn fails, naming
the path, and the run stops (SPEC 10.12)."""
STARTUP: Final = "STARTUP"
"""dsh cannot start: a bad flag or setting, an unusable home or session log."""

# Tool results (SPEC sections 7 and 8): what the model reads after "Error: ", never a turn's end.
TOOL_FAILED: Final = "TOOL_FAILED"
"""The tool ran and failed: a missing file, bad arguments, a timeout; the message says which."""
TOOL_REFUSED: Final = "TOOL_REFUSED"
"""The call was not approved: the person said no, or there was no terminal to ask."""
TOOL_NOT_RUN: Final = "TOOL_NOT_RUN"
"""The call was never run: the step stopped at the output token limit."""
ABORTED_BEFORE_DISPATCH: Final = "ABORTED_BEFORE_DISPATCH"
"""The turn was cancelled before this call started."""
TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"
"""Found on load: the model asked for the call, and the process died before it started."""
TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"
"""Found on load: the call was running when the process died; what it did is unknown."""
MCP_SERVER: Final = "MCP_SERVER"
"""An MCP server could not be started or reached, or went away during a call (SPEC 13)."""
SUBAGENT_FAILED: Final = "SUBAGENT_FAILED"
"""A subagent's turn did not end with an answer (SPEC 13); the message says how it ended."""


def http_status_code(status: int) -> HttpStatusCode:
    """The code for an HTTP status that no more specific rule matched: ``HTTP_<status>``."""
    return HttpStatusCode(f"HTTP_{status}")


class HarnessError(Exception):
    """A failure dsh knows how to name; ``code`` is what callers route on."""

    def __init__(self, message: str, code: Code = UNKNOWN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class LlmError(HarnessError):
    """A model request failed; carries what the server told us about it."""

    def __init__(
        self,
        message: str,
        code: Code,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code)
        self.status = status
        self.retry_after = retry_after
        """Seconds the server asked us to wait before trying again, if it said."""
        self.request_id = request_id

    def __repr__(self) -> str:
        extra = "".join(
            f", {name}={value!r}"
            for name, value in (
                ("status", self.status),
                ("retry_after", self.retry_after),
                ("request_id", self.request_id),
            )
            if value is not None
        )
        return f"LlmError({self.message!r}, code={self.code!r}{extra})"


class SessionLogError(HarnessError):
    """The session log on disk is damaged, from a newer format, or cannot be written."""

    def __init__(self, message: str) -> None:
        super().__init__(message, SESSION_LOG)


class UsageError(RuntimeError):
    """The developer made an error in calling dsh_core; never shown as a turn failure."""


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """A failure as the session log stores it: JSON-ready, rendered once, never re-raised."""

    code: str
    """A :data:`Code`, ``UNKNOWN`` for exceptions that are not HarnessErrors; read back from a
    log, whatever code the dsh that wrote it knew."""
    message: str
    """``error_chain`` of the exception: the whole cause chain."""
    status: int | None = None
    """The HTTP status, when a response arrived."""
    retry_after: float | None = None
    """Seconds the server asked us to wait, when it said."""
    request_id: str | None = None
    """The server's ``x-request-id``, for support tickets."""

    @classmethod
    def from_exception(cls, exc: BaseException) -> FailureRecord:
        """Record any exception: LlmErrors keep their details, others become ``UNKNOWN``."""
        from .chain import error_chain

        message = error_chain(exc)
        if isinstance(exc, LlmError):
            return cls(exc.code, message, exc.status, exc.retry_after, exc.request_id)
        if isinstance(exc, HarnessError):
            return cls(exc.code, message)
        return cls(UNKNOWN, message)

    @property
    def as_tool_result(self) -> str:
        """The failure as a tool's result for the model: ``Error: <error_chain>`` (SPEC 7)."""
        return f"Error: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object; absent details are left out, not written as null."""
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.status is not None:
            data["status"] = self.status
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        if self.request_id is not None:
            data["request_id"] = self.request_id
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FailureRecord:
        """Read a record back from the session log; tolerant of missing optional fields."""
        return cls(
            code=str(data.get("code", UNKNOWN)),
            message=str(data.get("message", "")),
            status=data.get("status"),
            retry_after=data.get("retry_after"),
            request_id=data.get("request_id"),
        )
