"""Stopper: a signal cancels the running turn, or the main task when idle; the status it leaves."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

from dsh_stdio.signals import Stopper
from dsh_stdio.status import EXIT_SIGINT, EXIT_SIGTERM


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(3000):  # a hang guard of 30 s; each pass lets the loop run the handler
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")


def _stop_twice(first: signal.Signals, second: signal.Signals) -> tuple[int | None, list[str]]:
    """Send ``first`` then ``second`` while a turn runs; the status and the reasons given."""
    reasons: list[str] = []

    def cancel_turn(reason: str) -> bool:
        reasons.append(reason)
        return True  # a turn is running: it is cancelled, not the main task

    async def main() -> int | None:
        stopper = Stopper(cancel_turn, signal.SIGINT, signal.SIGTERM)
        try:
            os.kill(os.getpid(), first)
            await _until(lambda: len(reasons) == 1, f"{first.name} to be handled")
            os.kill(os.getpid(), second)
            await _until(lambda: len(reasons) == 2, f"{second.name} to be handled")
            return stopper.status
        finally:
            stopper.remove()

    return asyncio.run(main()), reasons


def test_a_sigterm_after_a_ctrl_c_leaves_143() -> None:
    assert _stop_twice(signal.SIGINT, signal.SIGTERM) == (EXIT_SIGTERM, ["user", "shutdown"])


def test_a_ctrl_c_after_a_sigterm_changes_nothing() -> None:
    assert _stop_twice(signal.SIGTERM, signal.SIGINT) == (EXIT_SIGTERM, ["shutdown", "user"])


def test_idle_cancels_the_main_task() -> None:
    async def main() -> bool:
        stopper = Stopper(lambda reason: False, signal.SIGINT)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return stopper.status == EXIT_SIGINT
        finally:
            stopper.remove()
        return False

    assert asyncio.run(main())
