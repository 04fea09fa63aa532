"""What every mode shares: opening the session, showing a turn, and the exit status.

The modes (``pipe.py``, ``repl.py``) differ only in where input comes from and how much
decoration a turn gets; this module keeps the rest in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TextIO

from dsh_core.chain import error_chain
from dsh_core.deepseek import CONNECT_TIMEOUT, IDLE_TIMEOUT, READ_TIMEOUT, DeepSeekAdapter
from dsh_core.errors import FailureRecord, SessionLogError
from dsh_core.llm import (
    Event,
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    Usage,
)
from dsh_core.loop import Conversation, TurnEnd, TurnFailed
from dsh_core.session import SessionLog, SessionStore

from .config import Config
from .render import INTERRUPTED_LINE, neutralise, outcome_line, retry_notice, usage_line

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SIGHUP",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "STDIN",
    "Session",
    "Stopper",
    "TurnView",
    "turn_status",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""A turn of this run ended ``error`` or ``rejected``."""
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
EXIT_SIGHUP = 129

STDIN = 0
"""Standard input's descriptor: read with os.read, never through sys.stdin's buffer."""


def turn_status(end: TurnEnd) -> int:
    """The exit status one turn of this run asks for (SPEC section 3)."""
    return EXIT_FAILED if end.kind in ("error", "rejected") else EXIT_OK


@dataclass
class Session:
    """The open session log, the model and the conversation that ties them together."""

    config: Config
    store: SessionStore
    model: DeepSeekAdapter
    conversation: Conversation
    err: TextIO
    log_failed: bool = False
    """A turn could not be written to the session log."""
    output_failed: bool = False
    """Standard output refused a write (a full disk, a closed descriptor)."""

    @classmethod
    def open(cls, config: Config, *, out: TextIO, err: TextIO) -> Session:
        """Create or resume the session the flags ask for; say what loading repaired."""
        model = _adapter(config)
        model.check_key()  # a key that cannot be sent fails here, before a session exists
        store = SessionStore(config.home)
        cwd = Path.cwd()
        if config.resume is not None:
            log, report = store.open(config.resume)
        elif config.continue_session:
            found = store.newest(cwd)
            if found is None:
                log, report = store.create(cwd), None
                err.write(f"dsh: no session yet for {cwd}; started {log.id}\n")
            else:
                log, report = found
        else:
            log, report = store.create(cwd), None
        if report is not None:
            for notice in report.notices:
                err.write(f"dsh: {notice}\n")
        if report is not None and report.interrupted_turn is not None:
            # This load found the last turn left open by a process that died, and closed it.
            out.write(INTERRUPTED_LINE + "\n")
            out.flush()
        conversation = Conversation(
            model, log, model_name=config.model, max_tokens=config.max_tokens
        )
        return cls(config, store, model, conversation, err)

    def new(self) -> SessionLog:
        """Start a fresh session (``/new``), keeping the model and its settings."""
        old = self.conversation
        log = self.store.create(Path.cwd())
        self.conversation = Conversation(
            self.model, log, model_name=old.model_name, max_tokens=self.config.max_tokens
        )
        self._close_log(old.log)
        return log

    def _close_log(self, log: SessionLog) -> None:
        # An unused session is not kept: --continue should find the conversation before it.
        if not log.discard_if_empty():
            log.close()

    def view(self, out: TextIO, *, terminal: bool) -> TurnView:
        """A TurnView for the next turn, wired so that a stdout that fails cancels the turn."""

        def output_failed(exc: OSError) -> None:
            self.conversation.cancel(f"standard output failed: {error_chain(exc)}")

        return TurnView(
            out,
            self.err,
            terminal=terminal,
            show_reasoning=terminal or self.config.show_reasoning,
            colour=terminal and colour_wanted(out),
            on_output_error=output_failed,
        )

    @property
    def broken(self) -> bool:
        """The session cannot usefully go on: its log or stdout refused a write."""
        return self.log_failed or self.output_failed

    def status(self, end: TurnEnd) -> int:
        """The exit status this turn asks for, counting a log or stdout that failed."""
        return EXIT_FAILED if self.broken else turn_status(end)

    async def run_turn(self, text: str, view: TurnView) -> TurnEnd:
        """Run one turn and show it; a log that cannot be written fails the turn, not dsh.

        The failure is shown as ``[turn failed SESSION_LOG] ...`` and ``log_failed`` is set: a
        pipe stops there, since nothing more can be stored; the REPL goes on, and the loop
        ends the turn the failure left open before it starts the next. On a terminal, the
        waiting indicator shows until the first token and typing is not echoed meanwhile.
        """
        view.show_waiting()
        try:
            with quiet_terminal(STDIN):
                end = await self.conversation.run_turn(text, on_event=view.on_event)
        except SessionLogError as exc:
            end = self._unrecorded(exc)
        return self._shown(end, view)

    def reject_oversized(self, size: int, view: TurnView) -> TurnEnd:
        """Record and show a turn whose input line was too long to read whole."""
        try:
            end = self.conversation.reject_oversized(size)
        except SessionLogError as exc:
            end = self._unrecorded(exc)
        return self._shown(end, view)

    def _unrecorded(self, exc: SessionLogError) -> TurnEnd:
        self.log_failed = True
        return TurnEnd(-1, "error", FailureRecord.from_exception(exc))  # -1: not in the log

    def _shown(self, end: TurnEnd, view: TurnView) -> TurnEnd:
        view.finish(end)
        if view.output_error is not None:
            # stdout is what failed, so the one place left to say it is stderr.
            self.output_failed = True
            with contextlib.suppress(OSError, ValueError):
                self.err.write(
                    f"dsh: cannot write to standard output: {error_chain(view.output_error)}\n"
                )
                self.err.flush()
        return end

    async def close(self) -> None:
        self._close_log(self.conversation.log)
        await self.model.close()


class Stopper:
    """SIGINT and/or SIGTERM: end the running turn as aborted, then the program.

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

    def __init__(self, session: Session, *signals: signal.Signals) -> None:
        main = asyncio.current_task()
        assert main is not None, "Stopper must be created inside the main task"
        self.status: int | None = None
        self._session = session
        self._main = main
        self._signals = signals
        loop = asyncio.get_running_loop()
        for sig in signals:
            reason, status = self.REASONS[sig]
            loop.add_signal_handler(sig, self._stop, status, reason)

    def _stop(self, status: int, reason: str) -> None:
        if self.status is None:
            self.status = status
        conversation = self._session.conversation
        if conversation.running:
            conversation.cancel(reason)
        else:
            self._main.cancel()

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)


def _adapter(config: Config) -> DeepSeekAdapter:
    wait = config.timeout  # one knob for every wait; connecting keeps its own cap
    return DeepSeekAdapter(
        base_url=config.base_url,
        api_key=config.api_key,
        connect_timeout=CONNECT_TIMEOUT if wait is None else min(CONNECT_TIMEOUT, wait),
        read_timeout=READ_TIMEOUT if wait is None else wait,
        idle_timeout=IDLE_TIMEOUT if wait is None else wait,
    )


class TurnView:
    """Shows one turn's live events, batching writes once per event-loop iteration.

    ``terminal`` decides the decoration: neutralised model text, reasoning shown dim, a
    waiting indicator and notices on stdout; on a pipe, text passes through as data and notices
    go to stderr. Everything bound for stdout goes through one buffer, so the waiting
    indicator, its erasure, notices and text keep their order.
    """

    WAITING = "… waiting for the model"
    BUSY = "… server busy, waiting"

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        terminal: bool,
        show_reasoning: bool,
        colour: bool = False,
        on_output_error: Callable[[OSError], None] | None = None,
    ) -> None:
        self._out = out
        self._err = err
        self._terminal = terminal
        self._show_reasoning = show_reasoning
        self._colour = colour
        self._pending: list[str] = []
        self._flush_scheduled = False
        self._in_reasoning = False
        self._at_line_start = True
        self._waiting = ""
        """The indicator on screen now, to be erased before anything else is written."""
        self._on_output_error = on_output_error
        self.output_error: OSError | None = None
        """Why stdout refused a write; from then on, output is dropped."""
        self.usage: Usage | None = None
        self.started = time.monotonic()

    # Output plumbing.

    def _write(self, text: str) -> None:
        if not text:
            return
        self._clear_waiting()
        self._pending.append(text)
        self._at_line_start = text.endswith("\n")
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        text = "".join(self._pending)
        self._pending.clear()
        if self.output_error is not None:
            return
        try:
            if text:
                self._out.write(text)
            self._out.flush()
        except OSError as exc:  # a full disk, a closed descriptor: nothing more can be shown
            self.output_error = exc
            if self._on_output_error is not None:
                self._on_output_error(exc)

    def notice(self, text: str) -> None:
        """A side remark (retry, usage): dim on a terminal, on stderr for a pipe.

        Notices carry server words (error messages), so they are neutralised like model text.
        """
        text = neutralise(text)
        if self._terminal:
            self._end_line()
            self._write(self._dim(text) + "\n")
        else:
            self.flush()
            self._to_stderr(f"dsh: {text}\n")

    def _to_stderr(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # stderr is only a side channel
            self._err.write(text)
            self._err.flush()

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self._colour else text

    def _end_line(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def show_waiting(self, text: str = WAITING) -> None:
        """The terminal's 'model is working' indicator, erased by whatever is written next."""
        if not self._terminal or not self._at_line_start:
            return
        self._clear_waiting()
        self._pending.append(text)
        self._waiting = text
        self.flush()  # now: the point is to be seen while nothing else arrives

    def _clear_waiting(self) -> None:
        if self._waiting:
            self._pending.append("\r" + " " * len(self._waiting) + "\r")
            self._waiting = ""

    # Events.

    def on_event(self, event: Event | TurnFailed) -> None:
        match event:
            case TextDelta(text=text):
                if self._in_reasoning:
                    self._in_reasoning = False
                    if self._terminal or self._show_reasoning:
                        self._end_reasoning()
                self._write(neutralise(text) if self._terminal else text)
            case ReasoningDelta(text=text):
                self._reasoning(text)
            case KeepAlive():
                if self._waiting != self.BUSY:
                    self.show_waiting(self.BUSY)
            case RetryNotice():
                self.notice(retry_notice(event))
                self.show_waiting()
            case Usage():
                self.usage = event
            case Finish() | TurnFailed():
                pass

    def _reasoning(self, text: str) -> None:
        if self._terminal:
            if not self._in_reasoning:
                self._end_line()
                self._write(self._dim("thinking: "))
            self._in_reasoning = True
            if text:
                self._write(self._dim(neutralise(text)))
        elif self._show_reasoning:
            self._in_reasoning = True
            self._to_stderr(text)
        else:
            self._in_reasoning = True

    def _end_reasoning(self) -> None:
        if self._terminal:
            self._end_line()
            self._write(self._dim("---") + "\n")
        else:
            self._to_stderr("\n")

    def finish(self, end: TurnEnd) -> None:
        """End the answer's line, then the outcome line and the usage notice."""
        self._clear_waiting()
        if self._in_reasoning and (self._terminal or self._show_reasoning):
            self._end_reasoning()  # the turn ended while the model was still thinking
        self._end_line()
        line = outcome_line(end)
        if line is not None:
            self._write(neutralise(line) + "\n")  # it may quote the server's words
        self.flush()
        if end.kind in ("completed", "max-tokens"):
            self.notice(usage_line(self.usage, time.monotonic() - self.started))
            self.flush()


@contextlib.contextmanager
def quiet_terminal(fd: int) -> Iterator[None]:
    """While a turn runs, the terminal does not echo what is typed.

    Otherwise Ctrl-C shows as ``^C`` in front of the outcome line and text typed ahead lands
    in the middle of the answer. Keys still count: Ctrl-C still sends SIGINT, and what was
    typed ahead waits for the next prompt. A no-op when ``fd`` is not a terminal.
    """
    if not os.isatty(fd):
        yield
        return
    import termios

    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)  # lflags
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def colour_wanted(stream: TextIO) -> bool:
    """Dim text only on a real terminal that can show it, and never against NO_COLOR."""
    return (
        stream.isatty()
        and os.environ.get("TERM", "dumb") != "dumb"
        and "NO_COLOR" not in os.environ
    )
