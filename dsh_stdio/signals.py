"""SIGINT, SIGTERM and SIGHUP: end the running turn as aborted, then the program."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import ClassVar

from .status import EXIT_SIGHUP, EXIT_SIGINT, EXIT_SIGTERM

__all__ = ["Stopper"]


class Stopper:
    """Turns signals into a cancelled turn and an exit status.

    While a turn runs, the signal cancels it (``user`` or ``shutdown``) and the mode returns
    ``status`` after the turn is recorded; while idle (reading input, at a prompt), it cancels
    the main task at once.
    """

    REASONS: ClassVar[dict[signal.Signals, tuple[str, int]]] = {
        signal.SIGINT: ("user", EXIT_SIGINT),
        signal.SIGTERM: ("shutdown", EXIT_SIGTERM),
        signal.SIGHUP: ("shutdown", EXIT_SIGHUP),  # the terminal went away
    }
    """The abort reason a signal records, and the exit status it leaves with."""

    def __init__(self, cancel_turn: Callable[[str], bool], *signals: signal.Signals) -> None:
        """``cancel_turn(reason)`` cancels the running turn; False when none is running."""
        main = asyncio.current_task()
        assert main is not None, "Stopper must be created inside the main task"
        self.status: int | None = None
        self._cancel_turn = cancel_turn
        self._main = main
        self._signals = signals
        self.arm()

    def arm(self) -> None:
        """Install the handlers; again after a prompt_toolkit prompt, which removes the loop's
        SIGINT handler when it ends."""
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            reason, status = self.REASONS[sig]
            loop.add_signal_handler(sig, self._stop, status, reason)

    def stop(self, sig: signal.Signals) -> None:
        """Act as if ``sig`` had come: Ctrl-C read as a key at an approval question."""
        reason, status = self.REASONS[sig]
        self._stop(status, reason)

    def _stop(self, status: int, reason: str) -> None:
        # The first signal decides, but a SIGTERM (or SIGHUP) after a Ctrl-C still means the
        # program was terminated: 143 says so (SPEC section 3).
        if self.status is None or (self.status == EXIT_SIGINT and status != EXIT_SIGINT):
            self.status = status
        if not self._cancel_turn(reason):
            self._main.cancel()

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
