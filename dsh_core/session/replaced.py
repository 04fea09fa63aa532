"""What loading a log may let go of: the content its compactions replaced.

    replaced = Replaced(events)       # the list the load appends to
    ...                               # per line: replaced.turn_start, replaced.fold(event)
    if replaced.reached_back: ...     # load again without letting go

:class:`~dsh_core.session.store.SessionStore` uses it while it reads a log; the rule is
:data:`REPLACED_CONTENT`, the design note
``docs/notes/2026-12-03-costs-that-grow-sessions.md``.
"""

from __future__ import annotations

from .events import (
    FORGOTTEN,
    ApprovalDecided,
    AssistantStep,
    CompactionEnd,
    CompactionStart,
    CompactionSummary,
    JobEnded,
    RetryScheduled,
    SessionEvent,
    ToolResult,
    UserText,
)

__all__ = ["COMPACTION", "REPLACED_CONTENT", "Replaced"]

REPLACED_CONTENT: frozenset[type] = frozenset(
    (UserText, AssistantStep, ToolResult, ApprovalDecided, RetryScheduled, JobEnded)
)
"""The records whose content a compaction's summary stands for: loading a log lets go of
those a compaction replaced (:meth:`dsh_core.session.store.SessionStore.open`). The others
stay, small as they are: a history folded from the loaded log keeps what they carry past a
compaction (the session's usage, the todo list, a window a server stated, the turns a rewind
withdrew), and undo reads the checkpoints and the calls of the turns they cover."""

COMPACTION = frozenset((CompactionStart, CompactionSummary, CompactionEnd))
"""The record classes :meth:`Replaced.fold` follows."""


class Replaced:
    """Lets go of what each compaction of a log being loaded replaced, once its end is read.

    Without it a resume held every event of a long session, though after a compaction the
    model never sees the events it summarised again (a 42 MB log took 97 MB). It follows the
    compactions as :class:`dsh_core.agent.history.History` folds them (a start, then its
    summary, then the end puts it in force, if the summary names events before its start),
    and lets go of the same events a running session does
    (:meth:`~dsh_core.session.log.SessionLog.forget`): those through ``replaces_through``,
    never the open turn's. Only :data:`REPLACED_CONTENT` goes, since no history has folded
    the rest yet.
    """

    def __init__(self, events: list[SessionEvent]) -> None:
        self.events = events
        self.turn_start: int | None = None
        """The seq of the open turn's ``turn/start``; None between turns."""
        self._pending: tuple[int, CompactionSummary | None] | None = None
        """A compaction begun (the seq of its start) and its summary, until its end."""
        self._let_go = 0
        """Events before this index were looked at already."""
        self._request = -1
        """The index of the latest user request a compaction replaced, kept (-1: none)."""
        self.reached_back = False
        """A compaction in force keeps events an earlier one let go of."""

    def fold(self, event: SessionEvent) -> None:
        """Follow one compaction event (the last one appended to ``events``)."""
        record = event.record
        if isinstance(record, CompactionStart):
            self._pending = (event.seq, None)
        elif isinstance(record, CompactionSummary):
            if self._pending is not None:
                self._pending = (self._pending[0], record)
        else:
            pending, self._pending = self._pending, None
            if pending is None or pending[1] is None:
                return
            start, summary = pending[0], pending[1]
            if not -1 <= summary.replaces_through < start:
                return  # the history keeps itself whole: so does memory
            through = summary.replaces_through
            if through + 1 < self._let_go:
                # It keeps events an earlier compaction replaced (the loop never writes that,
                # a hand-edited log may): they are gone from memory, so load again, whole.
                self.reached_back = True
            if self.turn_start is not None:
                through = min(through, self.turn_start - 1)
            events = self.events
            # The latest user request stays: a checkpoint carries it verbatim (SPEC 11), so the
            # history folded from this load needs its text, though the summary replaced it.
            latest = _latest_request(events, self._let_go, through)
            if latest >= 0 and self._request >= 0:
                events[self._request] = FORGOTTEN  # an older request kept until now
            self._request = max(self._request, latest)
            for index in range(self._let_go, through + 1):
                if index != latest and events[index].record.__class__ in REPLACED_CONTENT:
                    events[index] = FORGOTTEN
            self._let_go = max(self._let_go, through + 1)


def _latest_request(events: list[SessionEvent], start: int, through: int) -> int:
    """The index of the last ``user/message`` in ``start..through`` (-1: none)."""
    for index in range(through, start - 1, -1):
        if events[index].record.__class__ is UserText:
            return index
    return -1
