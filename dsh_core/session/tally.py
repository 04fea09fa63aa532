"""What a session's log adds up to: tokens and dollars, refused calls, changed files (SPEC 15).

    tally = Tally(price=lambda model: price_of(model, overrides), since=len(log.events))
    tally.update(log.events)              # folds what was appended since the last call
    tally.session.cost, tally.run.turns   # 0.0042, 1

Three sums: :attr:`Tally.session`, everything the log holds (what ``--max-cost`` and ``/usage``
count), :attr:`Tally.run`, the events from ``since`` on (what this run's ``--json`` ``result``
line reports), and :attr:`Tally.turn`, the last turn's. Money is what was spent: a turn that
``/rewind`` withdrew still counts, and so does a compaction's summary request. Each request is
priced by the model its turn started with; one whose model has no known price leaves the cost
unknown (``cost`` None from then on: a total that silently left a request out would be wrong).

It folds the log as it grows, like the history does, so it must follow it from its start: a
log lets go of what a compaction replaced (:meth:`~dsh_core.session.SessionLog.forget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..model.prices import Prices, cost_of, saved_by
from ..model.seam import Usage
from ..records import record
from .events import (
    ApprovalDecided,
    AssistantStep,
    CompactionEnd,
    CompactionSummary,
    SessionEvent,
    StepUsage,
    ToolResult,
    TurnEnd,
    TurnStart,
)
from .undo import CheckpointTaken, TurnChanges

__all__ = ["Refusal", "Spend", "Tally"]


@record
class Refusal:
    """A call dsh refused because nobody could be asked, or the policy forbids it unattended."""

    tool: str
    reason: str
    """What the model was told (``Error: tool "bash" needs approval and ...``)."""


class Spend:
    """Tokens, dollars and what happened, over some of a session's events.

    A plain class: a dataclass costs a millisecond of every start to define, and this one is
    made at every start.
    """

    __slots__ = (
        "cached_tokens",
        "changed",
        "checkpoint",
        "completion_tokens",
        "cost",
        "ends",
        "prompt_tokens",
        "refused",
        "saved",
        "steps",
        "turns",
    )

    def __init__(self) -> None:
        self.turns = 0
        self.steps = 0
        """Steps the model answered, whole or cut off (a compaction's summary is not one)."""
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.completion_tokens = 0
        self.cost: float | None = 0.0
        """US dollars; None once a request was made with a model that has no known price."""
        self.saved = 0.0
        """What the prompt cache saved, in dollars, over the requests that have a price."""
        self.refused: list[Refusal] = []
        self.changed: list[str] = []
        """Paths the turns changed, each once, in the order they were first changed."""
        self.checkpoint: str | None = None
        """The last checkpoint taken (``dsh --undo`` goes back to before it)."""
        self.ends: list[TurnEnd] = []

    def add(self, usage: Usage, prices: Prices | None) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.cached_tokens += min(usage.cached_tokens, usage.prompt_tokens)
        self.completion_tokens += usage.completion_tokens
        if prices is None:
            if usage.prompt_tokens or usage.completion_tokens:
                self.cost = None
            return
        if self.cost is not None:
            self.cost += cost_of(usage, prices)
        self.saved += saved_by(usage, prices)


class Tally:
    """Adds up a session's log as it grows (see the module's docstring)."""

    def __init__(self, price: Callable[[str], Prices | None], *, since: int = 0) -> None:
        """``price(model)``: a model's prices, or None; ``since``: where this run's events
        begin (the events a load found are the earlier runs')."""
        self._price = price
        self.since = since
        self.session = Spend()
        self.run = Spend()
        self.turn = Spend()
        """The turn last started (``/usage`` says what it cost)."""
        self.model = ""
        """The model of the turn last started."""
        self.last_prompt = 0
        """The last answered request's prompt tokens, since the last compaction: the next
        request starts with the same bytes, which the prompt cache may serve."""
        self.requests = 0
        """Answered requests in the session, summaries included."""
        self._read = 0
        self._calls: dict[str, str] = {}
        """Tool names by call id, for the refused calls' results."""
        self._unavailable: set[str] = set()
        """Calls refused as nobody could be asked, until their result says what was said."""

    def update(self, events: Sequence[SessionEvent]) -> None:
        """Fold in the events appended since the last call (the log is append-only)."""
        while self._read < len(events):
            index = self._read
            self._read += 1
            self._fold(events[index], index >= self.since)

    def _fold(self, event: SessionEvent, this_run: bool) -> None:
        record = event.record
        if isinstance(record, TurnStart):
            self.turn = Spend()
        sums = (self.session, self.turn, self.run) if this_run else (self.session, self.turn)
        match record:
            case TurnStart(model=model):
                self.model = model
                for spend in sums:
                    spend.turns += 1
            case StepUsage(usage=usage):
                self._spent(usage, sums)
                self.last_prompt = usage.prompt_tokens
            case CompactionSummary(usage=usage):
                self._spent(usage, sums)
            case CompactionEnd():
                self.last_prompt = 0  # the next request begins with the summary: a new prefix
            case AssistantStep(tool_calls=calls):
                for spend in sums:
                    spend.steps += 1
                for call in calls:
                    self._calls[call.id] = call.name
            case ApprovalDecided(outcome="unavailable", call_id=call_id):
                self._unavailable.add(call_id)
            case ToolResult(call_id=call_id) if call_id in self._unavailable:
                self._unavailable.discard(call_id)
                refusal = Refusal(self._calls.get(call_id, ""), record.output.content)
                for spend in sums:
                    spend.refused.append(refusal)
            case TurnChanges(changed=changed):
                for spend in sums:
                    spend.changed.extend(p for p in changed if p not in spend.changed)
            case CheckpointTaken(id=checkpoint):
                for spend in sums:
                    spend.checkpoint = checkpoint
            case TurnEnd():
                for spend in sums:
                    spend.ends.append(record)
            case _:
                pass

    def _spent(self, usage: Usage, sums: tuple[Spend, ...]) -> None:
        prices = self._price(self.model)
        self.requests += 1
        for spend in sums:
            spend.add(usage, prices)
