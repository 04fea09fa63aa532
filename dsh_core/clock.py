"""Time as a dependency: the adapter's timers and backoff read a :class:`Clock`, not the loop.

    adapter = DeepSeekAdapter(base_url=url, api_key=key)                    # the event loop's time
    adapter = DeepSeekAdapter(base_url=url, api_key=key, clock=ManualClock())  # a test's time

:data:`LOOP_CLOCK` is the event loop's own; :class:`dsh_core.testing.ManualClock` moves only when
a test says so, so a 120 s idle timeout or an 8 s backoff costs a test no time at all (as trio's
``MockClock`` does). :class:`Deadline` is the one timer built on a clock: it ends the awaits in
its block with ``TimeoutError``, and moving it later (:meth:`Deadline.push`, at every chunk of
a stream) costs one float, not a new timer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Protocol

__all__ = ["LOOP_CLOCK", "Clock", "Deadline", "LoopClock", "Timer", "time_limit"]


class Timer(Protocol):
    """A callback scheduled on a clock (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic time in seconds, callbacks at a time, and sleeping."""

    def time(self) -> float:
        """Now."""
        ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        """Run ``callback`` on the event loop once :meth:`time` reaches ``when``."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed."""
        ...


class LoopClock:
    """The running event loop's clock: what dsh uses outside tests."""

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


LOOP_CLOCK = LoopClock()


class Deadline:
    """A limit of ``seconds`` on the awaits inside ``with deadline:``, counted from the start
    of the block or the last :meth:`push`, whichever is later; ``TimeoutError`` when it passes.

    Reusable, block after block: one timer serves them all. It is scheduled when none is
    pending and, when it fires early (the deadline was pushed), scheduled again for the new
    time. Entering, leaving and pushing cost a few attribute stores, no timer: a stream pays
    them at every network read. Close it when done.
    """

    __slots__ = ("_baseline", "_clock", "_due", "_expired", "_seconds", "_task", "_timer")

    def __init__(self, clock: Clock, seconds: float) -> None:
        self._clock = clock
        self._seconds = seconds
        self._due = 0.0
        self._timer: Timer | None = None
        self._task: asyncio.Task[object] | None = None
        """The task waiting inside a block, while it does."""
        self._expired = False
        self._baseline = 0

    def push(self) -> None:
        """Start the count again from now (news arrived)."""
        self._due = self._clock.time() + self._seconds

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline needs a running task")
        self._task, self._expired, self._baseline = task, False, task.cancelling()
        self.push()
        if self._timer is None:
            self._timer = self._clock.call_at(self._due, self._fire)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if exc_type is not asyncio.CancelledError or not self._expired or task is None:
            return
        # Ours, unless someone else cancelled the task too (as asyncio.timeout decides).
        if task.uncancel() <= self._baseline:
            raise TimeoutError from None

    def close(self) -> None:
        """Cancel the pending timer, if any."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        if self._task is None:
            return  # nobody waits: the next block schedules a timer again
        if self._clock.time() < self._due:
            self._timer = self._clock.call_at(self._due, self._fire)
            return
        # The task is suspended inside the block (callbacks run only then): the cancel lands
        # there, at the await that waited too long.
        self._expired = True
        self._task.cancel()


@contextlib.contextmanager
def time_limit(clock: Clock, seconds: float) -> Iterator[None]:
    """A one-off :class:`Deadline`: ``TimeoutError`` once ``seconds`` pass inside."""
    deadline = Deadline(clock, seconds)
    try:
        with deadline:
            yield
    finally:
        deadline.close()
