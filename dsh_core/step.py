"""One step of a turn as its stream arrives: the text, reasoning, calls and usage so far.

    step = Step(1)
    async for event in model.stream(request):
        step.add(event)
    log.append(step.record(turn, interrupted=False))

A retry (:class:`~dsh_core.llm.RetryNotice`) starts the step over; :attr:`Step.shown` says
whether the person has seen anything of it, which decides whether a step cut short is kept.
"""

from __future__ import annotations

from typing import assert_never

from .events import AssistantStep
from .llm import (
    Event,
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    Usage,
)

__all__ = ["Step"]


class Step:
    """What the model's stream delivered so far in one step."""

    __slots__ = ("calls", "finish", "number", "reasoning", "recorded", "text", "usage")

    def __init__(self, number: int) -> None:
        self.number = number
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.usage: Usage | None = None
        self.finish: Finish | None = None
        self.recorded = False
        """Its ``assistant/message`` is in the log."""

    def add(self, event: Event) -> None:
        match event:
            case TextDelta(text=text):
                self.text.append(text)
            case ReasoningDelta(text=text):
                self.reasoning.append(text)
            case ToolCallRequest(call=call):
                self.calls.append(call)
            case Usage():
                self.usage = event  # providers send one; if more, the last is the total
            case Finish():
                self.finish = event
            case RetryNotice():
                # The failed attempt's reasoning was not shown (a pipe hides it) and is not
                # the answer: the retry starts the step over.
                self.text.clear()
                self.reasoning.clear()
            case KeepAlive():
                pass
            case _:
                assert_never(event)

    @property
    def shown(self) -> bool:
        """Text or reasoning arrived: a step cut short after it is kept (``interrupted``)."""
        return any(self.text) or any(self.reasoning)

    def record(self, turn: int, *, interrupted: bool) -> AssistantStep:
        """The step's ``assistant/message``."""
        return AssistantStep(
            turn=turn,
            step=self.number,
            text="".join(self.text),
            reasoning="".join(self.reasoning) or None,
            tool_calls=tuple(self.calls),
            interrupted=interrupted,
        )
