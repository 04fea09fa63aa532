"""Ending a running turn early: the one place that knows why, and whether the task was told.

Cancellation is asyncio's own, ``CancelledError``, all the way down: the adapter and the tools
let it through (a tool may instead stop and return its partial output). The loop makes one
:class:`Cancellation` per turn and marks with :meth:`~Cancellation.phase` each wait that Ctrl-C
must interrupt: the model's stream, an approval question, a running tool.

    cancellation = Cancellation(asyncio.current_task())
    with cancellation.phase():          # CancelledError at once if a cancel came before
        await model_or_question_or_tool()
    cancellation.check()                # a tool that stopped and returned: CancelledError now

:meth:`~Cancellation.cancel` (from a signal handler, another task, or an observer inside the
turn) records the first reason and, when the task waits in a phase, cancels the task so the wait
ends now; anywhere else the next phase or :meth:`~Cancellation.check` raises. Either way the turn
unwinds with ``CancelledError``, and :meth:`~Cancellation.foreign` then tells a cancellation of
ours (the turn ends ``aborted`` and returns) from someone else's (``asyncio.run`` shutting down,
a timeout around the turn: recorded, then propagated, because the canceller waits for the task
to stop). The task's ``cancelling()`` count is left as it was found, as ``asyncio.timeout``
leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

__all__ = ["Cancellation", "external_reason"]


def external_reason(exc: BaseException) -> str:
    """The abort reason for a BaseException that did not come through ``cancel``."""
    if isinstance(exc, KeyboardInterrupt):
        return "user"
    if isinstance(exc, SystemExit):
        return "shutdown"
    return "cancelled"


class Cancellation:
    """The cancellation of one turn, run by ``task``."""

    __slots__ = ("_baseline", "_in_phase", "_sent", "_task", "reason")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self._task = task
        self._baseline = task.cancelling()
        """Cancellations already pending when the turn began: not ours, not news."""
        self.reason: str | None = None
        """Why the turn was cancelled (``user``, ``shutdown``, ...); None until it is."""
        self._in_phase = False
        self._sent = False
        """We called ``task.cancel()`` and have not withdrawn it yet."""

    def cancel(self, reason: str) -> None:
        """Cancel the turn for ``reason``; the first reason wins, later calls change nothing.

        Call it on the event loop's thread (``loop.add_signal_handler`` does).
        """
        if self.reason is not None:
            return
        self.reason = reason
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop on this thread
            current = None
        # From outside the task, it is suspended in the phase: the cancel interrupts the wait
        # now, and lands inside the phase. From the task itself (an observer) a cancel could
        # land after the phase is over, at an await that must not be cut short (asyncio 3.11
        # keeps it pending): the next check raises instead.
        if self._in_phase and current is not self._task:
            self._sent = True
            self._task.cancel()

    def check(self) -> None:
        """Raise ``CancelledError`` when the turn was cancelled, by us or by anyone else."""
        if self.reason is not None or self.foreign():
            raise asyncio.CancelledError(self.reason)

    def foreign(self) -> bool:
        """Whether someone else cancelled the task too (and waits for it to stop)."""
        return self._task.cancelling() > self._baseline

    @contextlib.contextmanager
    def phase(self) -> Iterator[None]:
        """A wait that :meth:`cancel` interrupts: the model's stream, a question, a tool."""
        self.check()
        self._in_phase = True
        try:
            yield
        finally:
            self._in_phase = False
            if self._sent:  # withdraw our task.cancel(): it has done its work
                self._sent = False
                self._task.uncancel()
