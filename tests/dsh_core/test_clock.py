"""Deadlines on a clock, and the test clock itself: time moves only when a test moves it."""

from __future__ import annotations

import asyncio

import pytest

from dsh_core.clock import LOOP_CLOCK, Deadline, time_limit
from dsh_core.testing import ManualClock


async def settle() -> None:
    """Let the tasks that can run, run (a count of loop turns, not a time)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_deadline_ends_the_wait_in_its_block_with_timeout_error() -> None:
    clock = ManualClock()
    deadline = Deadline(clock, 10)

    async def wait() -> None:
        with deadline:
            await asyncio.Event().wait()

    async def main() -> str:
        task = asyncio.create_task(wait())
        await settle()
        clock.advance(9.5)
        await settle()
        early = "waiting" if not task.done() else "ended early"
        clock.advance(0.5)
        with pytest.raises(TimeoutError):
            await task
        deadline.close()
        return early

    assert asyncio.run(main()) == "waiting"


def test_push_moves_the_deadline_without_a_new_timer() -> None:
    clock = ManualClock()
    deadline = Deadline(clock, 10)
    news = asyncio.Event()

    async def wait() -> None:
        with deadline:
            await news.wait()
            news.clear()
            deadline.push()  # bytes arrived: the silence starts again
            await news.wait()

    async def main() -> bool:
        task = asyncio.create_task(wait())
        await settle()
        clock.advance(8)
        news.set()
        await settle()
        clock.advance(8)  # 16 s since the block began, 8 since the news
        await settle()
        alive = not task.done()
        timers = clock.pending  # one timer, moved on when it fired early
        clock.advance(2)
        with pytest.raises(TimeoutError):
            await task
        assert timers == 1
        return alive

    assert asyncio.run(main())


def test_time_outside_a_block_does_not_count() -> None:
    clock = ManualClock()
    deadline = Deadline(clock, 10)

    async def main() -> None:
        with deadline:
            await asyncio.sleep(0)
        clock.advance(60)  # the consumer held the stream for a minute: no one was waiting
        with deadline:
            await asyncio.sleep(0)  # a fresh silence: no timeout
        deadline.close()

    asyncio.run(main())


def test_a_cancel_from_outside_is_not_mistaken_for_the_deadline() -> None:
    clock = ManualClock()

    async def wait() -> None:
        with time_limit(clock, 5):
            await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.create_task(wait())
        await settle()
        clock.advance(5)  # the deadline cancels the task ...
        task.cancel()  # ... and so does someone else, before it runs
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_the_loop_clock_is_the_loop_time() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        before = loop.time()
        assert before <= LOOP_CLOCK.time() <= loop.time()  # the same clock
        with time_limit(LOOP_CLOCK, 3600):
            await LOOP_CLOCK.sleep(0)

    asyncio.run(main())


def test_a_manual_sleep_wakes_when_the_clock_passes_it() -> None:
    clock = ManualClock()

    async def main() -> list[float]:
        task = asyncio.create_task(clock.sleep(2))
        await settle()
        clock.advance(1)
        await settle()
        assert not task.done()
        clock.advance(1)
        await task
        return clock.slept

    assert asyncio.run(main()) == [2]


def test_autojump_sleeps_move_the_clock_at_once() -> None:
    clock = ManualClock(autojump=True)

    async def main() -> None:
        await clock.sleep(8)
        await clock.sleep(0.5)

    asyncio.run(main())
    assert (clock.now, clock.slept) == (8.5, [8, 0.5])
