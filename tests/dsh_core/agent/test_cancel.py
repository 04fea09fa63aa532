"""The cancellation of one turn: who may cancel, where it lands, and whose it was."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from dsh_core.agent.cancel import Cancellation


async def in_phase(cancellation: Cancellation, waiting: asyncio.Event) -> None:
    with cancellation.phase():
        waiting.set()
        await asyncio.Event().wait()


def test_a_cancel_from_outside_ends_the_wait_and_is_withdrawn_after() -> None:
    async def main() -> tuple[str | None, bool, int]:
        waiting = asyncio.Event()
        holder: list[Cancellation] = []

        async def turn() -> None:
            task = asyncio.current_task()
            assert task is not None
            holder.append(Cancellation(task))
            with contextlib.suppress(asyncio.CancelledError):  # the loop ends the turn here
                await in_phase(holder[0], waiting)
            assert task.cancelling() == 0  # our cancel was withdrawn with the phase

        task = asyncio.create_task(turn())
        await waiting.wait()
        holder[0].cancel("user")
        holder[0].cancel("shutdown")  # the first reason wins
        await task
        return holder[0].reason, holder[0].foreign(), task.cancelling()

    assert asyncio.run(main()) == ("user", False, 0)


def test_a_cancel_from_the_task_itself_waits_for_the_next_check() -> None:
    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        cancellation = Cancellation(task)
        with cancellation.phase():
            cancellation.cancel("user")  # an observer, inside the turn
            assert task.cancelling() == 0  # nothing left pending to land at a later await
            with pytest.raises(asyncio.CancelledError):
                cancellation.check()
        with pytest.raises(asyncio.CancelledError), cancellation.phase():
            raise AssertionError("a phase does not start after a cancel")

    asyncio.run(main())


def test_someone_elses_cancel_is_foreign_even_when_absorbed() -> None:
    async def main() -> bool:
        waiting = asyncio.Event()
        result: list[bool] = []

        async def turn() -> None:
            task = asyncio.current_task()
            assert task is not None
            cancellation = Cancellation(task)
            with cancellation.phase():
                waiting.set()
                # A tool that stops on the cancel and returns its partial output.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.Event().wait()
            result.append(cancellation.foreign())
            with pytest.raises(asyncio.CancelledError):
                cancellation.check()  # the turn still ends

        task = asyncio.create_task(turn())
        await waiting.wait()
        task.cancel()
        await task
        return result[0]

    assert asyncio.run(main())


def test_a_cancel_when_no_phase_waits_sends_nothing() -> None:
    async def main() -> int:
        task = asyncio.current_task()
        assert task is not None
        cancellation = Cancellation(task)
        cancellation.cancel("user")  # e.g. between two tool calls
        return task.cancelling()

    assert asyncio.run(main()) == 0
