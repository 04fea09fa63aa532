"""A tool's blocking work in a thread of its own, which Ctrl-C leaves behind at once.

    run = stoppable(work)          # work(stop: threading.Event) -> str, checks stop as it goes
    Invocation(access, summary, run)

The event loop goes on while the work runs (a prompt, a signal, the next event), and cancelling
the call returns at once: ``stop`` is set, and the work, told so at its next check, ends by
itself; its result goes nowhere. ``read``, ``glob`` and ``grep`` run this way: their work grows
with what the model asks for (an offset deep into a 50 GB file, a search over a big tree).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..session.events import ToolOutput

__all__ = ["in_daemon_thread", "stoppable"]

A = TypeVar("A")
R = TypeVar("R")


def stoppable(
    work: Callable[[threading.Event], str], *, name: str = "dsh-search"
) -> Callable[[], Awaitable[ToolOutput]]:
    """``run`` for a tool: ``work(stop)`` in a daemon thread, ``stop`` set when the call ends
    (cancelled, or done)."""

    async def run() -> ToolOutput:
        stop = threading.Event()
        try:
            return ToolOutput(await in_daemon_thread(work, stop, name=name))
        finally:
            stop.set()

    return run


async def in_daemon_thread(
    function: Callable[[A], R], argument: A, *, name: str = "dsh-search"
) -> R:
    """``function(argument)`` run in a daemon thread of its own; its result or its exception.

    Not ``asyncio.to_thread``: ``asyncio.run`` joins the default executor's threads at its end,
    so a cancelled search still busy (a regex that never gets back to checking ``stop``) would
    keep dsh from exiting. A daemon thread is left behind instead; its result goes nowhere.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[R] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():  # cancelled meanwhile: nobody waits for the answer
            outcome()

    def target() -> None:
        try:
            result = function(argument)
        except BaseException as exc:
            answer = functools.partial(future.set_exception, exc)
        else:
            answer = functools.partial(future.set_result, result)
        # RuntimeError: the loop is closed, the call was abandoned long ago.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, answer)

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future
