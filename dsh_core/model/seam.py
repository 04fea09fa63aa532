"""The seam between the agent loop and a model provider.

A provider is anything with the :class:`ChatModel` shape: ``stream(request)`` returns an async
iterator of :data:`Event` values and raises :class:`~dsh_core.errors.LlmError` on failure.
Cancelling the task that consumes the stream cancels the request, and ``CancelledError`` passes
through as it is (the loop, :mod:`dsh_core.agent.cancel`, decides what a cancellation means).
:mod:`dsh_core.testing.conformance` checks a provider keeps these promises.

    request = ChatRequest(model="deepseek-v4-flash", messages=(UserMessage("hi"),))
    async for event in model.stream(request):
        match event:
            case TextDelta(text=text):
                print(text, end="")
            case ToolCallRequest(call=call):
                ...  # the model asks for a tool; its result goes into the next request
            ...

One request is one *step* of a turn. A step that asks for tools ends with
``Finish("tool-calls")`` after one :class:`ToolCallRequest` per call, in the model's order; the
loop runs them and sends their results as :class:`ToolMessage` values in the next request.

:class:`dsh_core.testing.ScriptedModel` is the fake shipped beside the seam (as httpx ships
``MockTransport``): tests and fixtures queue the events, or the exception, each request will
produce.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import field
from typing import Any, ClassVar, Literal, Protocol

from ..records import record

__all__ = [
    "AssistantMessage",
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
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolCallRequest",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
]

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "max-tokens", "tool-calls"]
"""How a step ended normally: an answer, the output token limit, or a request for tools."""


@record
class ToolCall:
    """One call the model asked for."""

    id: str
    """The provider's call id; the result is sent back under it."""
    name: str
    """The tool's name, as the model wrote it (it may name no tool we have)."""
    arguments: str
    """The arguments exactly as the model wrote them: a JSON object when the model got it
    right. Sent back unchanged in later requests; parsed only by the loop."""


@record
class SystemMessage:
    """What the model is told before the conversation: who it is, where, with which tools."""

    content: str
    role: ClassVar[Role] = "system"


@record
class UserMessage:
    """What the person typed."""

    content: str
    role: ClassVar[Role] = "user"


@record
class AssistantMessage:
    """One step's answer: text, the reasoning behind it, and the tools it asked for."""

    content: str = ""
    reasoning: str | None = None
    """DeepSeek ``reasoning_content``. Sent back only with ``tool_calls`` (thinking mode needs
    it there, and ignores it elsewhere)."""
    tool_calls: tuple[ToolCall, ...] = ()
    role: ClassVar[Role] = "assistant"


@record
class ToolMessage:
    """The result of one tool call, answered under its call id."""

    tool_call_id: str
    content: str
    role: ClassVar[Role] = "tool"


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""One message of the conversation as the model sees it."""


@record
class ToolSpec:
    """A tool as the model is told about it."""

    name: str
    """``[a-zA-Z0-9_-]{1,64}``, as providers require."""
    description: str
    parameters: Mapping[str, Any] = field(hash=False)
    """A JSON schema object for the arguments."""


@record
class ChatRequest:
    """A provider-neutral chat request: one step."""

    model: str
    """The model name, e.g. ``deepseek-v4-flash``."""
    messages: tuple[Message, ...]
    """The whole history, oldest first."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call; empty sends none."""
    tool_choice: Literal["auto", "none"] | None = None
    """``none``: the tools are offered (the request's prefix stays the same, for the prompt
    cache) but the answer must not call them; None leaves it to the provider (``auto``)."""
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


@record
class ReasoningDelta:
    """A piece of the model's reasoning (DeepSeek ``reasoning_content``), in arrival order."""

    text: str


@record
class TextDelta:
    """A piece of the visible answer, in arrival order."""

    text: str


@record
class ToolCallRequest:
    """A complete tool call, delivered when the step's stream has ended."""

    call: ToolCall


@record
class Usage:
    """Token counts for the request, as the provider reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from the provider's cache (DeepSeek ``prompt_cache_hit_tokens``)."""
    reasoning_tokens: int = 0


@record
class KeepAlive:
    """The server sent a comment line (``: keep-alive``): it is busy but the request lives."""


@record
class RetryNotice:
    """A transient failure before anything was shown; the request is retried after ``delay``."""

    attempt: int
    """1 for the first retry."""
    max_retries: int
    delay: float
    """Seconds until the retry, after jitter and any ``Retry-After``."""
    error: BaseException
    """What failed; render it with ``error_chain``."""


@record
class Finish:
    """The step's stream ended normally."""

    reason: FinishReason


Event = ReasoningDelta | TextDelta | ToolCallRequest | Usage | KeepAlive | RetryNotice | Finish
"""What a model stream yields, in order; a ``Finish`` is last."""


class ChatModel(Protocol):
    """What the agent loop needs from a provider."""

    def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Start the request; iterate to receive its events. Raises ``LlmError`` on failure."""
        ...

    async def close(self) -> None:
        """Release connections; the model is not used afterwards."""
        ...
