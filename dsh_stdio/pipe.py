"""Pipe mode (one turn per input line) and one-shot mode (``dsh "question"``).

No prompt_toolkit here: on a pipe it would write redraws and a "not a terminal" warning into
the transcript. Lines are read one at a time by a daemon thread, so a pipe that stays open
does not hold back the first answer, and a blocked read never keeps the process alive.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from .app import (
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    Session,
    TurnView,
    turn_status,
)

__all__ = ["LineReader", "Overlong", "decode_input", "run_one_shot", "run_pipe"]


@dataclass(frozen=True, slots=True)
class Overlong:
    """An input line longer than the per-message limit; its bytes were read and dropped."""

    size: int


def decode_input(raw: bytes) -> str:
    """Input bytes as text: invalid UTF-8 and NUL become U+FFFD instead of failing the run."""
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")


class LineReader:
    """Reads ``stream`` one line per request on a daemon thread.

    Lines longer than ``limit`` bytes are read to their end but not kept (an ``Overlong``).
    ``None`` means end of input.
    """

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._wanted = threading.Semaphore(0)
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[bytes | Overlong | None] | None = None
        self._closed = False
        self._closing = threading.Lock()
        """Held while handing a line to the loop, so ``close`` cannot slip in between."""
        threading.Thread(target=self._run, name="dsh-stdin", daemon=True).start()

    async def next(self) -> bytes | Overlong | None:
        self._future = self._loop.create_future()
        self._wanted.release()
        return await self._future

    def close(self) -> None:
        """Stop handing lines to the loop; call it before the loop closes.

        The thread may stay blocked in ``read``; it is a daemon and exits with the process.
        Without this, a line arriving after the loop closed would write to the loop's closed
        wake-up socket (SIGPIPE) or raise in the thread.
        """
        with self._closing:
            self._closed = True
        self._wanted.release()

    def _run(self) -> None:
        while True:
            self._wanted.acquire()
            if self._closed:
                return
            try:
                item = self._read_line()
            except OSError:
                item = None  # stdin went away: treat as end of input
            with self._closing:
                if self._closed:
                    return
                self._loop.call_soon_threadsafe(self._deliver, item)
            if item is None:
                return

    def _deliver(self, item: bytes | Overlong | None) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_result(item)

    def _read_line(self) -> bytes | Overlong | None:
        line = self._stream.readline(self._limit + 1)
        if not line:
            return None
        if len(line) <= self._limit or line.endswith(b"\n"):
            return line
        size = len(line)
        while not line.endswith(b"\n"):
            line = self._stream.readline(1 << 20)
            if not line:
                break
            size += len(line)
        return Overlong(size)


class _Stopper:
    """SIGINT and SIGTERM on a pipe: end the running turn as aborted, then the program."""

    def __init__(self, session: Session, main: asyncio.Task[int]) -> None:
        self.status: int | None = None
        self._session = session
        self._main = main
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._stop, EXIT_SIGINT, "user")
        loop.add_signal_handler(signal.SIGTERM, self._stop, EXIT_SIGTERM, "shutdown")

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
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)


def _view(session: Session, out: TextIO, err: TextIO) -> TurnView:
    return TurnView(out, err, terminal=out.isatty(), show_reasoning=session.config.show_reasoning)


async def run_pipe(session: Session, stdin: BinaryIO, out: TextIO, err: TextIO) -> int:
    """One turn per non-empty input line until end of input; returns the exit status."""
    main = asyncio.current_task()
    assert main is not None
    stopper = _Stopper(session, main)
    reader = LineReader(stdin, session.conversation.input_limit)
    status = EXIT_OK
    try:
        while stopper.status is None and not session.log_failed:
            item = await reader.next()
            if item is None:
                break
            view = _view(session, out, err)
            if isinstance(item, Overlong):
                end = session.reject_oversized(item.size, view)
            else:
                text = decode_input(item).rstrip("\r\n")
                if not text.strip():
                    continue
                end = await session.run_turn(text, view)
            status = max(status, turn_status(end))
    except asyncio.CancelledError:
        if stopper.status is None:
            raise
    finally:
        reader.close()
        stopper.remove()
    return stopper.status if stopper.status is not None else status


def read_piped_stdin(stdin: BinaryIO) -> str | None:
    """All of a piped stdin for one-shot mode, or None when stdin is a terminal."""
    if stdin.isatty():
        return None
    return decode_input(stdin.read())


async def run_one_shot(
    session: Session, question: str, piped: str | None, out: TextIO, err: TextIO
) -> int:
    """One turn for ``dsh "question"``; piped input is appended after a blank line."""
    main = asyncio.current_task()
    assert main is not None
    stopper = _Stopper(session, main)
    text = question if not piped or not piped.strip() else f"{question}\n\n{piped}"
    view = _view(session, out, err)
    try:
        end = await session.run_turn(text, view)
    except asyncio.CancelledError:
        if stopper.status is None:
            raise
        return stopper.status
    finally:
        stopper.remove()
    return stopper.status if stopper.status is not None else turn_status(end)


def binary_stdin() -> BinaryIO:
    return sys.stdin.buffer
