"""What every mode shares: opening the session, showing a turn, and the exit status.

The modes (``pipe.py``, ``repl.py``) differ only in where input comes from and how much
decoration a turn gets; this module keeps the rest in one place.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

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

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_SIGINT", "EXIT_SIGTERM", "EXIT_USAGE", "Session"]

EXIT_OK = 0
EXIT_FAILED = 1
"""A turn of this run ended ``error`` or ``rejected``."""
EXIT_USAGE = 2
"""A usage error or a startup failure."""
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


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

    @classmethod
    def open(cls, config: Config, *, out: TextIO, err: TextIO) -> Session:
        """Create or resume the session the flags ask for; say what loading repaired."""
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
        model = _adapter(config)
        conversation = Conversation(
            model, log, model_name=config.model, max_tokens=config.max_tokens
        )
        last = conversation.last_turn_end()
        if last is not None and last.kind == "interrupted":
            out.write(INTERRUPTED_LINE + "\n")
            out.flush()
        return cls(config, store, model, conversation, err)

    def new(self) -> SessionLog:
        """Start a fresh session (``/new``), keeping the model and its settings."""
        old = self.conversation
        log = self.store.create(Path.cwd())
        self.conversation = Conversation(
            self.model, log, model_name=old.model_name, max_tokens=self.config.max_tokens
        )
        old.log.close()
        return log

    async def run_turn(self, text: str, view: TurnView) -> TurnEnd:
        """Run one turn and show it; a log that cannot be written fails the turn, not dsh.

        The failure is shown as ``[turn failed SESSION_LOG] ...`` (it cannot be stored) and
        ``log_failed`` is set, so a pipe stops instead of running turns nobody can resume.
        """
        try:
            end = await self.conversation.run_turn(text, on_event=view.on_event)
        except SessionLogError as exc:
            end = self._unrecorded(exc)
        view.finish(end)
        return end

    def reject_oversized(self, size: int, view: TurnView) -> TurnEnd:
        """Record and show a turn whose input line was too long to read whole."""
        try:
            end = self.conversation.reject_oversized(size)
        except SessionLogError as exc:
            end = self._unrecorded(exc)
        view.finish(end)
        return end

    def _unrecorded(self, exc: SessionLogError) -> TurnEnd:
        self.log_failed = True
        return TurnEnd(-1, "error", FailureRecord.from_exception(exc))  # -1: not in the log

    async def close(self) -> None:
        self.conversation.log.close()
        await self.model.close()


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
    """Shows one turn's live events; on a pipe, writes are batched once per loop iteration.

    ``terminal`` decides the decoration: neutralised model text, reasoning shown dim, a
    waiting indicator and notices on stdout; on a pipe, text passes through as data and notices
    go to stderr.
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        terminal: bool,
        show_reasoning: bool,
        colour: bool = False,
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
        if self._pending:
            self._out.write("".join(self._pending))
            self._pending.clear()
        self._out.flush()

    def notice(self, text: str) -> None:
        """A side remark (retry, usage): dim on a terminal, on stderr for a pipe."""
        if self._terminal:
            self._end_line()
            self._write(self._dim(text) + "\n")
        else:
            self.flush()
            self._err.write(f"dsh: {text}\n")
            self._err.flush()

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self._colour else text

    def _end_line(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def show_waiting(self, text: str) -> None:
        """The terminal's 'model is working' indicator, replaced by the first token."""
        if not self._terminal:
            return
        self._clear_waiting()
        self._waiting = text
        self._out.write(text)
        self._out.flush()

    def _clear_waiting(self) -> None:
        if self._waiting:
            width = len(self._waiting)
            self._out.write("\r" + " " * width + "\r")
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
                if self._at_line_start and not self._pending:
                    self.show_waiting("… server busy, waiting")
            case RetryNotice():
                self.notice(retry_notice(event))
                self.show_waiting("… waiting for the model")
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
            self._err.write(text)
            self._err.flush()
        else:
            self._in_reasoning = True

    def _end_reasoning(self) -> None:
        if self._terminal:
            self._end_line()
            self._write(self._dim("---") + "\n")
        else:
            self._err.write("\n")
            self._err.flush()

    def finish(self, end: TurnEnd) -> None:
        """End the answer's line, then the outcome line and the usage notice."""
        self._clear_waiting()
        self._end_line()
        line = outcome_line(end)
        if line is not None:
            self._write(line + "\n")
        self.flush()
        if end.kind in ("completed", "max-tokens"):
            self.notice(usage_line(self.usage, time.monotonic() - self.started))
            self.flush()


def colour_wanted(stream: TextIO) -> bool:
    """Dim text only on a real terminal that can show it, and never against NO_COLOR."""
    return (
        stream.isatty()
        and os.environ.get("TERM", "dumb") != "dumb"
        and "NO_COLOR" not in os.environ
    )


def stdio_is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()
