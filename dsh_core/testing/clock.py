"""A :class:`~dsh_core.clock.Clock` that moves only when a test says so (trio's ``MockClock``).

    clock = ManualClock()
    adapter = DeepSeekAdapter(base_url=url, api_key=key, clock=clock, idle_timeout=120)
    ...                       # once the adapter waits on the network:
    clock.advance(120)        # its idle timer fires now, not in two minutes

With ``autojump=True`` a sleep moves the clock itself, at once, and is recorded in
:attr:`ManualClock.slept`: a retry test runs its real backoff schedule without waiting for it.
A test verdict never depends on how fast the machine is: time passes when the test advances it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

__all__ = ["ManualClock"]


class _Timer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time that starts at 0 and moves by :meth:`advance` (and, with ``autojump``, by sleeps)."""

    def __init__(self, *, autojump: bool = False) -> None:
        self.now = 0.0
        self.autojump = autojump
        """A sleep advances the clock by its length and returns at once."""
        self.slept: list[float] = []
        """Every sleep asked for, in order."""
        self._timers: list[tuple[float, int, _Timer]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    @property
    def pending(self) -> int:
        """Callbacks scheduled and not yet run or cancelled."""
        return sum(not timer.cancelled for _, _, timer in self._timers)

    def call_at(self, when: float, callback: Callable[[], object]) -> _Timer:
        timer = _Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._order), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.autojump:
            self.advance(seconds)
            await asyncio.sleep(0)  # a sleep still lets others run, as a real one does
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        timer = self.call_at(self.now + seconds, wake)
        try:
            await woken
        finally:
            timer.cancel()

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``; run every callback that falls due, in time order."""
        self.now += seconds
        while self._timers and self._timers[0][0] <= self.now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback()

    def advance_soon(self, seconds: float) -> None:
        """:meth:`advance` as soon as the running task next waits (``loop.call_soon``).

        For a consumer of a stream: called on an event, it lets the producer resume and wait
        for the network again before the time moves.
        """
        asyncio.get_running_loop().call_soon(self.advance, seconds)
