"""Pipe mode (one turn per input line) and one-shot mode (``dsh "question"``).

No prompt_toolkit on a pipe: it would write redraws and a "not a terminal" warning into the
transcript (a one-shot run at a terminal loads it for an approval question, on stderr; a run
whose stdin is a pipe, for one on the controlling terminal, ``/dev/tty``, when a person is at
it: SPEC 15). Lines
are read one at a time by a daemon thread, so a pipe that stays open does not hold back the
first answer, and a blocked read never keeps the process alive. After a failure that every
later line would meet too (``STOPPING_CODES``) the rest of the input is not sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from dsh_core.agent.approval import Answer, Asker, Question
from dsh_core.agent.compaction import WindowAdvice
from dsh_core.errors import AUTH, MISSING_CREDENTIAL, QUOTA, SANDBOX_ESCAPE

from .run.runtime import Runtime
from .signals import Stopper
from .status import EXIT_OK
from .tty import controlling_terminal

if TYPE_CHECKING:
    from dsh_core.tools.interaction.ask import UserAnswer, UserQuestion

__all__ = ["STOPPING_CODES", "LineReader", "Overlong", "decode_input", "run_one_shot", "run_pipe"]


@dataclass(frozen=True, slots=True)
class Overlong:
    """An input line longer than the per-message limit; its bytes were read and dropped."""

    size: int
    """Bytes in the line, its newline not counted."""


def decode_input(raw: bytes) -> str:
    """Input bytes as text: invalid UTF-8 and NUL become U+FFFD instead of failing the run."""
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")


class LineReader:
    """Reads file descriptor ``fd`` one line per request, on a daemon thread.

    Lines longer than ``limit`` bytes are read to their end but not kept (an ``Overlong``).
    ``None`` means end of input. It reads the descriptor with ``os.read``, not through
    ``sys.stdin.buffer``: a daemon thread blocked inside a buffered reader holds its lock, and
    an ordinary interpreter exit then dies with "could not acquire lock ... at interpreter
    shutdown".
    """

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self._buffer = bytearray()
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
        buffer = self._buffer
        while (end := buffer.find(b"\n")) < 0:
            if len(buffer) > self._limit:
                return self._skip_rest_of_line()
            chunk = os.read(self._fd, _CHUNK)
            if not chunk:  # end of input: a last line without its newline still counts
                line = bytes(buffer)
                buffer.clear()
                return (Overlong(len(line)) if len(line) > self._limit else line) or None
            buffer += chunk
        line = bytes(buffer[: end + 1])
        del buffer[: end + 1]
        return line

    def _skip_rest_of_line(self) -> Overlong:
        size = len(self._buffer)
        self._buffer.clear()
        while chunk := os.read(self._fd, _CHUNK):
            end = chunk.find(b"\n")
            if end >= 0:
                self._buffer += chunk[end + 1 :]
                return Overlong(size + end)  # the line's own bytes, as the loop counts them
            size += len(chunk)
        return Overlong(size)


_CHUNK = 1 << 16

STOPPING_CODES = frozenset({AUTH, QUOTA, MISSING_CREDENTIAL, SANDBOX_ESCAPE})
"""Failures the next line would meet again: a pipe stops sending after one (SPEC 12); and a
command that left what the sandbox could not undo, after which the run stops (SPEC 10.12)."""

PIPE_WINDOW_ADVICE = WindowAdvice(
    None,
    "start a fresh session (send the rest to a new dsh run, without --continue or --resume), "
    "or shorten the message",
)
"""What a pipe or one-shot can do about a conversation that no longer fits: there is no
``/compact`` or ``/new`` here (automatic compaction was tried where it could help)."""


async def run_pipe(runtime: Runtime, stdin: int, out: TextIO) -> int:
    """One turn per non-empty input line until end of input; returns the exit status."""
    stopper = Stopper(runtime.cancel_turn, signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    reader = LineReader(stdin, runtime.conversation.input_limit)
    # stdin a terminal (stdout redirected): its lines are the turns, and it is not asked on.
    tty = None if os.isatty(stdin) else _ask_where_a_person_is(runtime, stopper)
    terminal = out.isatty()
    status = EXIT_OK
    try:
        while stopper.status is None and not runtime.broken:
            item = await reader.next()
            if item is None:
                break
            view = runtime.view(out, terminal=terminal)
            if isinstance(item, Overlong):
                end = runtime.reject_oversized(item.size, view)
            else:
                text = decode_input(item).rstrip("\r\n")
                if not text.strip():
                    continue
                end = await runtime.run_turn(text, view)
            status = max(status, runtime.status(end))
            if end.failure is not None and end.failure.code in STOPPING_CODES:
                # Every later line would fail the same way, and cost a request each.
                runtime.err.write(
                    f"dsh: stopped reading input after {end.failure.code}: "
                    "the remaining lines were not sent\n"
                )
                runtime.err.flush()
                break
    except asyncio.CancelledError:
        if stopper.status is None:
            raise
    finally:
        reader.close()
        stopper.remove()
        if tty is not None:
            tty.close()
    if runtime.log_failed and stopper.status is None:
        # Say why the rest of the input goes unanswered, rather than stop in silence.
        runtime.err.write("dsh: stopped reading input: the session log cannot be written\n")
        runtime.err.flush()
    return stopper.status if stopper.status is not None else status


def read_piped_stdin(stdin: int, limit: int) -> str | Overlong | None:
    """All of a piped stdin for one-shot mode, or None when stdin is a terminal.

    Read before the event loop starts, so Ctrl-C during a slow pipe ends dsh at once. More
    than ``limit`` bytes is read to its end but not kept: the turn will be rejected.
    """
    if os.isatty(stdin):
        return None
    data = bytearray()
    size = 0
    while chunk := os.read(stdin, _CHUNK):
        size += len(chunk)
        if size <= limit:
            data += chunk
    return decode_input(bytes(data)) if size <= limit else Overlong(size)


async def run_one_shot(
    runtime: Runtime, question: str, piped: str | Overlong | None, out: TextIO
) -> int:
    """One turn for ``dsh "question"``; piped input is appended after a blank line.

    With stdin on a terminal, a call that needs approval is asked about there (on stderr:
    stdout is the answer, maybe a file or ``--json``); with stdin a pipe, on the controlling
    terminal if a person is at it; otherwise it is refused.
    """
    stopper = Stopper(runtime.cancel_turn, signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    tty: TextIO | None = None
    if os.isatty(runtime.stdin):
        runtime.ask_on(_question_on(runtime, stopper, runtime.err, runtime.stdin))
    else:
        tty = _ask_where_a_person_is(runtime, stopper)
    view = runtime.view(out, terminal=out.isatty())
    try:
        if isinstance(piped, Overlong):
            size = len(question.encode("utf-8", "surrogatepass")) + 2 + piped.size
            end = runtime.reject_oversized(size, view)
        else:
            text = question if not piped or not piped.strip() else f"{question}\n\n{piped}"
            end = await runtime.run_turn(text, view)
    except asyncio.CancelledError:
        if stopper.status is None:
            raise
        return stopper.status
    finally:
        stopper.remove()
        if tty is not None:
            tty.close()
    return stopper.status if stopper.status is not None else runtime.status(end)


def _ask_where_a_person_is(runtime: Runtime, stopper: Stopper) -> TextIO | None:
    """With stdin a pipe, questions go to the controlling terminal when a person is at it
    (SPEC 15): its opened ``/dev/tty``, for the caller to close; None when there is none, and
    what needs asking is refused. Lines of stdin are never answers: they are not read here."""
    tty = controlling_terminal(runtime.err)
    if tty is not None:
        runtime.ask_on(_question_on(runtime, stopper, tty, tty.fileno()))
    return tty


def _question_on(runtime: Runtime, stopper: Stopper, screen: TextIO, keys: int) -> Asker:
    """The REPL's approval question, shown on ``screen`` and answered at the terminal ``keys``:
    stderr and stdin for a one-shot run at a terminal, ``/dev/tty`` for a piped one."""
    from .terminal.approve import TerminalQuestion

    def before() -> None:
        if runtime.current_view is not None:
            runtime.current_view.before_question()

    def after() -> None:
        stopper.arm()  # the prompt removed the SIGINT handler
        if runtime.current_view is not None:
            runtime.current_view.after_question()

    ask = TerminalQuestion(
        screen,
        before=before,
        after=after,
        cancel_turn=lambda _: stopper.stop(signal.SIGINT),
        stdin=keys,
        undo=runtime.undo_directory,
    )
    typed_at = None if keys == runtime.stdin else screen  # prompt_toolkit reads sys.stdin else

    def on_the_terminal() -> contextlib.AbstractContextManager[object]:
        from prompt_toolkit.application import create_app_session
        from prompt_toolkit.input import create_input
        from prompt_toolkit.output import create_output

        typed = create_input(typed_at) if typed_at is not None else None
        return create_app_session(input=typed, output=create_output(stdout=screen))

    async def asked(question: Question) -> Answer:
        with on_the_terminal():
            return await ask(question)

    async def user_asked(questions: Sequence[UserQuestion]) -> Sequence[UserAnswer]:
        with on_the_terminal():
            return await ask.ask_user(questions)

    runtime.ask_user_on(user_asked)  # the model's own questions, the same way (SPEC 16)
    return asked
