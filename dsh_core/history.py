"""What the model sees, derived from the session log; and answering the calls a turn left.

:class:`History` folds the log's records, as they are appended, into the messages of the next
request. The rules (SPEC sections 6 and 8):

- A turn counts once it ended with an answer (``completed``, ``max-tokens``, ``max-steps``),
  or once the model said anything in it: text cut off by a failure is kept, and a turn that ran
  any tool stays whatever its end, because its effects are real.
- A turn that failed, was cancelled or rejected before any answer is left out: its question
  would otherwise ride along with the next one. It stays in the log.
- Every assistant message with tool calls is followed by one tool message per call, in order,
  nothing between them. The log guarantees the pairs: :func:`answer_unanswered` answers every
  call left without a result, at a turn's end by the loop and, for a dead process's turn, at
  load (:func:`closing_records`).
- Two plain messages of one role in a row (possible in logs from before ``EMPTY_RESPONSE``
  covered reasoning-only answers) are sent as one, joined by a blank line; tool-calling
  assistant messages and tool messages are never merged.

Folding is incremental: a turn costs the same at turn 1,000 as at turn 10.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import assert_never

from .errors import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, FailureRecord
from .events import (
    ApprovalDecided,
    AssistantStep,
    Record,
    RetryScheduled,
    SessionEvent,
    StepUsage,
    SystemPrompt,
    ToolCallStarted,
    ToolResult,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    UserText,
)
from .llm import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "History",
    "answer_unanswered",
    "closing_records",
    "estimate_tokens",
    "message_tokens",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens each message costs beyond its text (role and separators), for the estimate."""


def estimate_tokens(text: str) -> int:
    """A rough token count: DeepSeek's rule of thumb, 0.3 per ASCII and 0.6 per other character.

    It only has to tell a conversation that clearly does not fit; the server has the last word.
    """
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars * 0.3 + (len(text) - ascii_chars) * 0.6)


def message_tokens(message: Message) -> int:
    """The estimated cost of one message in a request."""
    tokens = estimate_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            tokens += estimate_tokens(call.name) + estimate_tokens(call.arguments)
            tokens += MESSAGE_OVERHEAD_TOKENS
    return tokens


def _mergeable(before: Message, after: Message) -> bool:
    if isinstance(before, UserMessage) and isinstance(after, UserMessage):
        return True
    return (
        isinstance(before, AssistantMessage)
        and isinstance(after, AssistantMessage)
        and not before.tool_calls
        and not after.tool_calls
    )


def _join(messages: list[Message], message: Message) -> Message | None:
    """Append ``message``, or merge it into the last one when allowed; the merged message."""
    if messages and _mergeable(messages[-1], message):
        last = messages[-1]
        joined = f"{last.content}\n\n{message.content}"
        merged: Message = (
            UserMessage(joined)
            if isinstance(last, UserMessage)
            else AssistantMessage(joined, getattr(last, "reasoning", None))
        )
        messages[-1] = merged
        return last
    messages.append(message)
    return None


def _append(messages: list[Message], message: Message) -> int:
    """Append or merge ``message``; the change in estimated tokens."""
    replaced = _join(messages, message)
    if replaced is None:
        return message_tokens(message)
    return message_tokens(messages[-1]) - message_tokens(replaced)


class History:
    """The messages the next request carries, kept up to date from the log's events."""

    def __init__(self) -> None:
        self._system: SystemMessage | None = None
        self._committed: list[Message] = []
        """The messages of the turns that count."""
        self._committed_tokens = 0
        self._open: list[Message] = []
        """The messages of the turn that has started and not ended."""
        self._open_tokens = 0
        self._read = 0
        """Log events already folded in."""

    def update(self, events: Sequence[SessionEvent]) -> None:
        """Fold in the events appended since the last call (the log is append-only)."""
        for event in events[self._read :]:
            self._fold(event.record)
        self._read = len(events)

    def messages(self) -> list[Message]:
        """The system prompt, the turns that count, then the open turn (a fresh list)."""
        messages: list[Message] = [] if self._system is None else [self._system]
        messages.extend(self._committed)
        if self._open:  # already merged among themselves: only the first may join the past
            _join(messages, self._open[0])
            messages.extend(self._open[1:])
        return messages

    @property
    def tokens(self) -> int:
        """Estimated tokens of the system prompt and the turns that ended."""
        system = message_tokens(self._system) if self._system is not None else 0
        return system + self._committed_tokens

    @property
    def open_tokens(self) -> int:
        """Estimated tokens of the turn being run."""
        return self._open_tokens

    def _open_with(self, message: Message) -> None:
        self._open_tokens += _append(self._open, message)

    def _fold(self, record: Record) -> None:
        match record:
            case SystemPrompt(text=text):
                self._system = SystemMessage(text)
            case TurnStart():
                self._open, self._open_tokens = [], 0
            case UserText(text=text):
                self._open, self._open_tokens = [], 0
                self._open_with(UserMessage(text))
            case AssistantStep():
                if record.text or record.tool_calls:
                    reasoning = record.reasoning if record.tool_calls else None
                    self._open_with(AssistantMessage(record.text, reasoning, record.tool_calls))
            case ToolResult(call_id=call_id, content=content):
                self._open_with(ToolMessage(call_id, content))
            case TurnEnd(kind=kind):
                said = any(not isinstance(m, UserMessage) for m in self._open)
                if said or kind in ("completed", "max-tokens", "max-steps"):
                    for message in self._open:
                        self._committed_tokens += _append(self._committed, message)
                self._open, self._open_tokens = [], 0
            case ToolCallStarted() | ApprovalDecided() | StepUsage() | RetryScheduled():
                pass  # bookkeeping: the model does not see it
            case UnknownEvent():
                pass  # from a newer dsh: what it means for the history is unknown here
            case _:
                assert_never(record)


def answer_unanswered(
    records: Sequence[Record], turn: int, failure: Callable[[ToolCall, bool], FailureRecord]
) -> list[ToolResult]:
    """A result for each call the model asked for in ``records`` that has none, in its order.

    ``records`` are one turn's, from its ``turn/start``. ``failure(call, started)`` says how a
    call is answered; ``started`` is whether its ``tool/call`` is in the log (it may have done
    something). The loop answers what a cancelled or failed turn left with it, and a load what
    a dead process left (:func:`closing_records`): every call in the log has its result, so
    the next request is valid.
    """
    started: set[str] = set()
    answered: set[str] = set()
    for record in records:
        if isinstance(record, ToolCallStarted):
            started.add(record.call_id)
        elif isinstance(record, ToolResult):
            answered.add(record.call_id)
    return [
        ToolResult.failed(turn, record.step, call.id, failure(call, call.id in started))
        for record in records
        if isinstance(record, AssistantStep)
        for call in record.tool_calls
        if call.id not in answered
    ]


def closing_records(records: Sequence[Record], end: TurnEnd) -> list[Record]:
    """What closes a turn left open, so that the next request is valid: results, then ``end``.

    ``records`` are the open turn's, from its ``turn/start``. Each call without a result is
    answered ``TOOL_OUTCOME_UNKNOWN`` when it had started, ``TOOL_NOT_STARTED`` when not.
    """
    return [*answer_unanswered(records, end.turn, _left_by_a_dead_process), end]


def _left_by_a_dead_process(call: ToolCall, started: bool) -> FailureRecord:
    if started:
        return FailureRecord(
            TOOL_OUTCOME_UNKNOWN,
            f'tool "{call.name}" was running when the process running dsh exited: '
            "its outcome is unknown; do not retry blindly",
        )
    return FailureRecord(
        TOOL_NOT_STARTED,
        f'tool "{call.name}" was never started: the process running dsh exited '
        "first; retry it if it is still needed",
    )
