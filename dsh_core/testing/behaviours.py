"""What the stub server can answer: one frozen dataclass per behaviour, and their union.

Tests queue them (``server.enqueue(HttpError(503), Answer("hello"))``); trigger words pick them
(:mod:`.triggers`); :mod:`.responder` writes them on the wire.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

__all__ = [
    "Answer",
    "Behaviour",
    "Cut",
    "Disconnect",
    "Empty",
    "EndWithoutDone",
    "Held",
    "HttpError",
    "InBandError",
    "KeepAlives",
    "LongStream",
    "Malformed",
    "RawStream",
    "SlowStream",
    "Stall",
    "ToolCalls",
    "WrongContentType",
    "in_thinking_mode",
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
class ToolCalls:
    """A streamed answer that asks for tool calls, as DeepSeek streams ``delta.tool_calls``.

    Per call: a first fragment with ``index``, ``id``, ``type`` and ``function.name`` (arguments
    ``""``), then the arguments in pieces of ``fragment_size`` characters. The server names the
    calls ``call_<request number>_<index>``; with ``reasoning``, it then requires every later
    request to pass that reasoning back on this message (thinking mode).
    """

    calls: tuple[tuple[str, str], ...]
    """``(name, arguments)`` per call, in index order; arguments are sent exactly as given."""
    text: str | None = None
    """Content streamed before the calls."""
    reasoning: str | None = None
    """``reasoning_content`` streamed first (the first piece empty, as DeepSeek)."""
    fragment_size: int = 8
    """Characters of arguments per fragment."""
    finish_reason: str = "tool_calls"
    """``tool_calls``; ``length`` shows calls cut by the output token limit."""
    interleaved: bool = False
    """Send the calls' fragments round-robin (index 0, 1, 2, 0, 1, ...) rather than in turn."""
    delay: float = 0.0
    """Seconds between deltas."""


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
class Held:
    """Send nothing until the test sets ``gate``, then play ``then``.

    For acting while dsh waits for the model (typing ahead, say) without guessing how long the
    wait is: the test holds the response for exactly as long as it needs.
    """

    gate: threading.Event
    then: Behaviour


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
    words_per_delta: int = 1
    """Words (about five characters each) in one delta: a 50 MB answer in fewer events."""


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
    | ToolCalls
    | HttpError
    | KeepAlives
    | Held
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
"""One response of the stub server."""

THOUGHT = "Thinking it over before answering."
"""The reasoning an answer without its own gets when the request asks for thinking mode."""


def in_thinking_mode(behaviour: Behaviour, mode: str | None) -> Behaviour:
    """``behaviour`` as a model in the request's thinking mode answers it: with ``enabled``
    an answer or a tool call always reasons first; with ``disabled`` it never does; without
    the field (the model's default), as scripted."""
    if not isinstance(behaviour, Answer | ToolCalls) or mode not in ("enabled", "disabled"):
        return behaviour
    if mode == "disabled":
        return dataclasses.replace(behaviour, reasoning=None)
    return dataclasses.replace(behaviour, reasoning=behaviour.reasoning or THOUGHT)
