"""What closes a turn: a result for every call the model asked for, so the next request is valid.

DeepSeek answers 400 to a history where a call has no result (SPEC 7). The loop answers what a
cancelled or failed turn left (:func:`answer_unanswered`); a load answers what a dead process
left and closes its turn ``interrupted`` (:func:`closing_records`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, FailureRecord
from ..model.seam import ToolCall
from .events import AssistantStep, Record, ToolCallStarted, ToolResult, TurnEnd

__all__ = ["answer_unanswered", "closing_records"]


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
