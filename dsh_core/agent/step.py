"""One step of a turn as its stream arrives: the text, reasoning, calls and usage so far.

    step = Step(1)
    async for event in model.stream(request):
        step.add(event)
    log.append(step.record(turn, interrupted=False))

The text and reasoning are held in blocks of joined pieces (:class:`Pieces`): a long answer of
short deltas costs about its size, not a str object per delta. A retry
(:class:`~dsh_core.model.seam.RetryNotice`) starts the step over; :attr:`Step.shown` says
whether the person has seen anything of it, which decides whether a step cut short is kept.
:class:`MaskedStream` masks the key in the events before the step (and anyone) sees them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import assert_never

from ..masking import SECRETS, StreamMasker, mask
from ..model.seam import (
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
from ..session.events import AssistantStep

__all__ = ["MaskedStream", "Pieces", "Step", "close_stream"]


async def close_stream(stream: AsyncIterator[Event]) -> None:
    """Close an async-generator stream now, so the adapter releases its connection."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class Pieces:
    """Text that arrives in pieces, held as a few long strings.

    A str object costs about 50 bytes besides its text, and a delta is a word or two: a list of
    the pieces costs ten times the answer. Every :data:`JOINED` pieces are joined into one
    block; :meth:`text` joins the blocks once, then keeps only the result, so the step holds
    the same str as the record it writes.
    """

    JOINED = 256

    __slots__ = ("_blocks", "_pieces")

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._pieces: list[str] = []

    def append(self, piece: str) -> None:
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= self.JOINED:
            self._blocks.append("".join(pieces))
            pieces.clear()

    def clear(self) -> None:
        self._blocks.clear()
        self._pieces.clear()

    def __bool__(self) -> bool:
        """Whether any of it is not empty."""
        return any(self._blocks) or any(self._pieces)

    def text(self) -> str:
        """All of it, in order."""
        if self._pieces:
            self._blocks.append("".join(self._pieces))
            self._pieces.clear()
        if len(self._blocks) > 1:
            self._blocks[:] = ["".join(self._blocks)]  # the blocks go as the whole arrives
        return self._blocks[0] if self._blocks else ""


class Step:
    """What the model's stream delivered so far in one step."""

    __slots__ = ("calls", "finish", "number", "reasoning", "recorded", "text", "usage")

    def __init__(self, number: int) -> None:
        self.number = number
        self.text = Pieces()
        self.reasoning = Pieces()
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
        return bool(self.text) or bool(self.reasoning)

    def record(self, turn: int, *, interrupted: bool) -> AssistantStep:
        """The step's ``assistant/message``."""
        return AssistantStep(
            turn=turn,
            step=self.number,
            text=self.text.text(),
            reasoning=self.reasoning.text() or None,
            tool_calls=tuple(self.calls),
            interrupted=interrupted,
        )


class MaskedStream:
    """A step's events with the secrets masked (SPEC 10.5).

    Text and reasoning arrive in pieces, and a secret may be split between two: the end of a
    piece that could begin one is held back until the next event shows whether it does. What
    is held is never lost or reordered: any other event lets it out first.
    """

    __slots__ = ("reasoning", "text")

    def __init__(self) -> None:
        self.text = StreamMasker()
        self.reasoning = StreamMasker()

    def __call__(self, event: Event) -> list[Event]:
        if not SECRETS:
            return [event]
        match event:
            case TextDelta(text=text):
                shown = self.text.feed(text)
                out: Event = event if shown == text else TextDelta(shown)
                return [*self._reasoning_held(), out] if self.reasoning.holding else [out]
            case ReasoningDelta(text=text):
                shown = self.reasoning.feed(text)
                out = event if shown == text else ReasoningDelta(shown)
                return [*self._text_held(), out] if self.text.holding else [out]
            case RetryNotice():
                self.text.reset()  # the step starts over, as Step.add does
                self.reasoning.reset()
                return [event]
            case ToolCallRequest(call=call):
                asked = ToolCall(call.id, mask(call.name), mask(call.arguments))
                return [*self.held(), ToolCallRequest(asked)]
            case _:
                return [*self.held(), event]

    def held(self) -> list[Event]:
        """What is held back, let out: the events before it ended the text."""
        return [*self._reasoning_held(), *self._text_held()]

    def _text_held(self) -> list[Event]:
        held = self.text.flush()
        return [TextDelta(held)] if held else []

    def _reasoning_held(self) -> list[Event]:
        held = self.reasoning.flush()
        return [ReasoningDelta(held)] if held else []
