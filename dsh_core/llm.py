"""The seam between the agent loop and a model provider.

A provider is anything with the :class:`ChatModel` shape: ``stream(request)`` returns an async
iterator of :data:`Event` values and raises :class:`~dsh_core.errors.LlmError` on failure.
Cancelling the task that consumes the stream cancels the request.

    async for event in model.stream(ChatRequest(model="deepseek-v4-flash", messages=history)):
        match event:
            case TextDelta(text=text):
                print(text, end="")
            ...

:class:`ScriptedModel` is the fake shipped beside the seam (as httpx ships ``MockTransport``):
tests and fixtures queue the events, or the exception, each request will produce.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "ChatModel",
    "ChatRequest",
    "Event",
    "Finish",
    "FinishReason",
    "KeepAlive",
    "Message",
    "ReasoningDelta",
    "RetryNotice",
    "Role",
    "ScriptedModel",
    "TextDelta",
    "Usage",
]

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "max-tokens"]


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation as the model sees it."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A provider-neutral chat request."""

    model: str
    """The model name, e.g. ``deepseek-v4-flash``."""
    messages: tuple[Message, ...]
    """The whole history, oldest first, ending with the new user message."""
    max_tokens: int | None = None
    """Output token limit; ``None`` leaves it to the provider."""
    temperature: float | None = None
    """Sampling temperature; ``None`` leaves it to the provider."""
    stop: tuple[str, ...] = ()
    """Stop sequences."""
    thinking: bool | None = None
    """Ask for (True) or against (False) a reasoning phase; ``None`` is the model's default."""
    reasoning_effort: str | None = None
    """Provider-specific reasoning effort (``low``/``medium``/``high``), when supported."""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (DeepSeek ``reasoning_content``), in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the visible answer, in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for the request, as the provider reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from the provider's cache (DeepSeek ``prompt_cache_hit_tokens``)."""
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """The server sent a comment line (``: keep-alive``): it is busy but the request lives."""


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A transient failure before any delta; the request is retried after ``delay`` seconds."""

    attempt: int
    """1 for the first retry."""
    max_retries: int
    delay: float
    """Seconds until the retry, after jitter and any ``Retry-After``."""
    error: BaseException
    """What failed; render it with ``error_chain``."""


@dataclass(frozen=True, slots=True)
class Finish:
    """The stream ended normally."""

    reason: FinishReason


Event = ReasoningDelta | TextDelta | Usage | KeepAlive | RetryNotice | Finish


class ChatModel(Protocol):
    """What the agent loop needs from a provider."""

    def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Start the request; iterate to receive its events. Raises ``LlmError`` on failure."""
        ...

    async def close(self) -> None:
        """Release connections; the model is not used afterwards."""
        ...


Script = list[Event | BaseException] | BaseException


@dataclass
class ScriptedModel:
    """A ChatModel that plays queued scripts, one per request (tests and fixtures).

    Each script is a list of events, optionally ending with an exception to raise after them,
    or an exception alone. ``requests`` records every request received.
    """

    scripts: deque[Script] = field(default_factory=deque)
    requests: list[ChatRequest] = field(default_factory=list)
    delay: float = 0.0
    """Seconds to sleep before each event, so tests can cancel mid-stream."""

    def enqueue(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    def extend(self, scripts: Iterable[Script]) -> None:
        self.scripts.extend(scripts)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        self.requests.append(request)
        if not self.scripts:
            raise AssertionError("ScriptedModel: no script queued for this request")
        script = self.scripts.popleft()
        if isinstance(script, BaseException):
            raise script
        for item in script:
            if self.delay:
                await asyncio.sleep(self.delay)
            if isinstance(item, BaseException):
                raise item
            yield item

    async def close(self) -> None:
        return None
