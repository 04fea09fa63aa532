"""The front door in-process: the real ``dsh_stdio`` code, no child process, in milliseconds.

The place for a new front-door test. Keep a child process (``tests.support.DSH``, pexpect, and
``@pytest.mark.slow``) for what only a process shows: a signal, a real terminal (its modes,
text typed ahead, colour), a crash, a pipe's own behaviour (a reader that goes away, a full
pipe), the process boundary (its memory, its umask, the environment it was started with).

Pipes and one-shot runs go through ``dsh_stdio.__main__.main`` itself, on a :class:`Streams`
of this module's making (input from a file, output in memory), with the environment and the
working directory the test gives, for the span of the run. The same ``Run`` comes back as from
a child (``tests.support.Run``)::

    run = run_in_process(env, "--allow", "shell", stdin="toolbash\\n", cwd=work)
    assert run.returncode == 0 and run.of_type("approval/decided") == [...]

A ``clock`` makes the model's retry waits cost no time: ``ManualClock(autojump=True)``, or
:class:`SkippingClock` when a real timeout must still run out between the retries.

The REPL runs in-process too, as textual's ``App.run_test()`` drives an app with a ``Pilot``:
:func:`repl_in_process` starts ``run_repl`` with prompt_toolkit reading keys from a pipe and
drawing its dumb-terminal prompt (``TERM=dumb``) on the same :class:`Screen` dsh writes to, so
the screen reads as pexpect's transcript does, without the ``\\r``. :func:`on_terminal` runs
a script against it in an event loop of its own and returns the :class:`Terminal` to check::

    async def script(term: Terminal) -> None:
        await term.turn("toolbash")
        await term.expect_question("bash", "$ ls -la")
        term.keys("y\\r")
        await term.expect("Tool results: [bash] total")
        assert await term.leave() == 0

    term = on_terminal(env, work, script)
    assert term.decisions() == ["allowed"]

Every wait is for something dsh writes (:meth:`Terminal.expect`), bounded by
``tests.support.HANG_GUARD`` for a hang; never a sleep. Approval questions in a test of the
policy or the loop: :class:`ScriptedAsker` answers them as a person would type, through
``approve.question_text`` and ``approve.parse_answer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_core.agent.approval import Answer, Question
from dsh_core.clock import LOOP_CLOCK, Clock
from dsh_core.masking import SECRETS
from dsh_core.model.seam import ChatModel
from dsh_stdio.__main__ import main
from dsh_stdio.config import parse_config
from dsh_stdio.run.runtime import Runtime
from dsh_stdio.terminal.approve import VIEW, Layout, parse_answer, question_text
from dsh_stdio.tty import Streams
from tests.support import HANG_GUARD, Run, read_events

__all__ = [
    "Screen",
    "ScriptedAsker",
    "SkippingClock",
    "Terminal",
    "in_surroundings",
    "on_terminal",
    "repl_in_process",
    "run_in_process",
]

CHOICES = r'\[y\]es / \[N\]o(?: / \[a\]lways (?:this session|for "[^"]*"))?: '
"""The choices, as a pattern: "always" for the session, or for ``bash`` for one first word."""
CHOICES_ONCE = r"\[y\]es / \[N\]o: "
SANDBOX_NOTE = r" \((?:not )?sandboxed[^\n]*\)"
"""What a ``bash`` question says about the sandbox: either, whichever this machine gets."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)
"""What a run of dsh may set for the process: restored after each in-process run."""


class SkippingClock:
    """The event loop's time, except that a sleep (a retry's wait) returns at once and moves
    this clock on by its length: timeouts run in real time, backoff costs none.

    For a test whose point is a real timeout between retries (``DSH_TIMEOUT`` running out);
    :class:`~dsh_core.testing.ManualClock` ``(autojump=True)`` when no timeout must fire.
    """

    def __init__(self) -> None:
        self.skipped = 0.0
        self.slept: list[float] = []
        """Every sleep asked for, in order."""

    def time(self) -> float:
        return asyncio.get_running_loop().time() + self.skipped

    def call_at(self, when: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_at(when - self.skipped, callback)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.skipped += seconds
        await asyncio.sleep(0)


@contextlib.contextmanager
def in_surroundings(env: Mapping[str, str], cwd: Path | None) -> Iterator[None]:
    """The process as a child dsh would find it: ``env`` as the whole environment, ``cwd``
    as the working directory, for the span of the block.

    Afterwards everything a run may change for the whole process is put back: the
    environment, the directory, the signal dispositions, and the secrets the masking knows
    (a child's die with it).
    """
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_signals = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    os.environ.clear()
    os.environ.update(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        SECRETS.clear()


def _text_stream(errors: str) -> io.TextIOWrapper:
    """Text over bytes in memory, encoded as a child's stdout (or stderr) on a pipe is."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, newline="\n")


def _contents(stream: io.TextIOWrapper) -> bytes:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue()


def _wait_stdin_readers() -> None:
    """Wait until the pipe mode's stdin thread has let go of the input file (it reads to the
    end of a file at once), so that its descriptor can be closed under no reader."""
    deadline = time.monotonic() + HANG_GUARD
    while any(t.name == "dsh-stdin" and t.is_alive() for t in threading.enumerate()):
        if time.monotonic() > deadline:
            raise AssertionError("dsh's stdin thread never finished reading its input")
        time.sleep(0.001)


def run_in_process(
    env: Mapping[str, str],
    *args: str,
    stdin: bytes | str = b"",
    cwd: Path | None = None,
    clock: Clock = LOOP_CLOCK,
) -> Run:
    """Run ``dsh args...`` in this process as a child on pipes would run; its :class:`Run`.

    ``stdin`` is what the pipe would carry (a file here: read the same way, never a terminal),
    ``env`` the whole environment, ``cwd`` the working directory (for the run: the test's
    own comes back), and its home is ``env["DSH_HOME"]``. stdout and stderr are encoded as a
    child's are on pipes.
    """
    data = stdin.encode("utf-8", "surrogateescape") if isinstance(stdin, str) else stdin
    out, err = _text_stream("surrogateescape"), _text_stream("backslashreplace")
    started = time.monotonic()
    with tempfile.TemporaryFile() as source, in_surroundings(env, cwd):
        source.write(data)
        source.seek(0)
        try:
            status = main(list(args), streams=Streams(source.fileno(), out, err), clock=clock)
        finally:
            _wait_stdin_readers()
    home = Path(env.get("DSH_HOME") or Path(env.get("HOME", "/"), ".dsh"))  # as dsh finds it
    return Run(status, _contents(out), _contents(err), home, time.monotonic() - started)


# -- the terminal -------------------------------------------------------------------------------


class Screen(io.StringIO):
    """What a terminal shows: dsh's writes and prompt_toolkit's prompt, in order, as text.

    Not a terminal to ``isatty()`` (so no colour); every write resolves the futures that
    :meth:`next_write` handed out.
    """

    def __init__(self) -> None:
        super().__init__()
        self._waiting: list[asyncio.Future[None]] = []

    def write(self, text: str) -> int:
        written = super().write(text)
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)
        return written

    def next_write(self) -> asyncio.Future[None]:
        """A future resolved by the next write (ask before looking, so none is missed)."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return future


@dataclass
class Terminal:
    """The REPL running in-process, and what it showed; the pilot of :func:`repl_in_process`."""

    screen: Screen
    runtime: Runtime
    task: asyncio.Task[int]
    keyboard: Any
    """prompt_toolkit's pipe input: what :meth:`keys` types goes there."""
    home: Path
    seen: int = 0
    """How far :meth:`expect` has read the screen."""

    @property
    def text(self) -> str:
        return self.screen.getvalue()

    async def expect(self, wanted: str | re.Pattern[str]) -> re.Match[str] | str:
        """Wait until ``wanted`` (text, or a compiled pattern) shows after what was matched
        before, as pexpect's ``expect`` does; return it (the match, for a pattern)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANG_GUARD
        while True:
            written = self.screen.next_write()
            rest = self.text[self.seen :]
            if isinstance(wanted, str):
                at = rest.find(wanted)
                if at >= 0:
                    self.seen += at + len(wanted)
                    return wanted
            elif (match := wanted.search(rest)) is not None:
                self.seen += match.end()
                return match
            if self.task.done():
                self.task.result()  # a crash shows as itself
                raise AssertionError(f"dsh left before showing {wanted!r}:\n{rest}")
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(
                    f"gave up waiting for {wanted!r} after {HANG_GUARD} s:\n{rest}"
                )
            # The next write, or the REPL's end (then the loop above says so).
            either: set[asyncio.Future[Any]] = {written, self.task}
            await asyncio.wait(either, timeout=left, return_when="FIRST_COMPLETED")
            written.cancel()

    def keys(self, keys: str) -> None:
        """Type ``keys`` (``\\r`` is Enter, ``\\x03`` Ctrl-C, ``\\x04`` Ctrl-D)."""
        self.keyboard.send_text(keys)

    async def expect_question(
        self, tool: str, shown: str, note: str | None = None, *, once: bool = False
    ) -> None:
        """The question's prompt line: ``Allow <tool>? <shown> [note] [y]es / [N]o ...: ``.

        ``note`` is the remark after the call; by default, for ``bash`` whether it runs in the
        sandbox, for other tools none. ``once``: no "always" is offered (a call outside the
        working directory, on a protected path, or leaving the sandbox).
        """
        default = SANDBOX_NOTE if tool == "bash" else ""
        remark = default if note is None else " " + re.escape(note)
        choices = CHOICES_ONCE if once else CHOICES
        await self.expect(
            re.compile(rf"Allow {re.escape(tool)}\? {re.escape(shown)}{remark} {choices}")
        )

    async def turn(self, line: str) -> None:
        """At the prompt, type ``line`` and Enter."""
        await self.expect("> ")
        self.keys(line + "\r")

    def ctrl_c(self) -> None:
        """What Ctrl-C during a turn does: the SIGINT handler's call (the signal itself is a
        child process's test)."""
        self.runtime.cancel_turn("user")

    async def leave(self) -> int:
        """Ctrl-D at the prompt; the exit status."""
        await self.expect("> ")
        self.keys("\x04")
        return await asyncio.wait_for(self.task, HANG_GUARD)

    def events(self, kind: str, session: str | None = None) -> list[dict[str, Any]]:
        """The ``data`` of each ``kind`` event in a session's log (default: the only one)."""
        logs = {path.parent.name: path for path in self.home.rglob("session.jsonl")}
        if session is None:
            [log] = logs.values()
        else:
            log = logs[session]
        return [event["data"] for event in read_events(log) if event["type"] == kind]

    def decisions(self, session: str | None = None) -> list[str]:
        return [data["outcome"] for data in self.events("approval/decided", session)]

    def turn_ends(self, session: str | None = None) -> list[dict[str, Any]]:
        return [data["reason"] for data in self.events("turn/end", session)]


@contextlib.asynccontextmanager
async def repl_in_process(
    env: Mapping[str, str],
    *args: str,
    cwd: Path,
    model: ChatModel | None = None,
    clock: Clock = LOOP_CLOCK,
    rows: int = 24,
    columns: int = 200,
) -> AsyncIterator[Terminal]:
    """Run the REPL (``dsh args...`` at a terminal) in this process; the :class:`Terminal`
    that drives it.

    prompt_toolkit reads the keys :meth:`Terminal.keys` types and draws its dumb-terminal
    prompt on the screen; stdin is no terminal to dsh (``/dev/null``), so it changes no
    terminal's modes. ``model`` replaces the DeepSeek adapter (a ``ScriptedModel``), ``clock``
    is the adapter's; ``rows`` x ``columns`` is the size the approval question lays itself
    out for.
    """
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output.plain_text import PlainTextOutput

    from dsh_stdio.terminal.repl import run_repl

    screen = Screen()
    surroundings = {**env, "TERM": "dumb", "LINES": str(rows), "COLUMNS": str(columns)}
    no_terminal = os.open(os.devnull, os.O_RDONLY)
    with (
        contextlib.closing(_Descriptor(no_terminal)),
        in_surroundings(surroundings, cwd),
        create_pipe_input() as keyboard,
        create_app_session(input=keyboard, output=PlainTextOutput(screen)),
    ):
        config = parse_config(list(args))
        runtime = await Runtime.open(
            config,
            out=screen,
            err=screen,
            terminal=True,
            stdin=no_terminal,
            model=model,
            clock=clock,
        )
        task = asyncio.create_task(run_repl(runtime, screen))
        term = Terminal(screen, runtime, task, keyboard, config.home)
        try:
            yield term
        finally:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await runtime.close()


@dataclass(frozen=True)
class _Descriptor:
    fd: int

    def close(self) -> None:
        os.close(self.fd)


def on_terminal(
    env: Mapping[str, str],
    cwd: Path,
    script: Callable[[Terminal], Awaitable[None]],
    *args: str,
    clock: Clock = LOOP_CLOCK,
    model: ChatModel | None = None,
) -> Terminal:
    """Run the REPL in-process (:func:`repl_in_process`) and ``script`` against it, in an event
    loop of its own; the :class:`Terminal`, for checking the screen and the logs afterwards."""

    async def main() -> Terminal:
        async with repl_in_process(env, *args, cwd=cwd, clock=clock, model=model) as term:
            await script(term)
        return term

    return asyncio.run(main())


# -- approval questions -------------------------------------------------------------------------


@dataclass
class ScriptedAsker:
    """A person at a terminal, answering approval questions with the replies given, in order.

    Each question is laid out as the terminal shows it (``approve.question_text``) and each
    reply read as the terminal reads it (``approve.parse_answer``): a reply that is none of the
    choices is asked again, as there. What was shown is kept in :attr:`asked`.
    """

    replies: list[str]
    rows: int = 24
    columns: int = 200
    asked: list[Layout] = field(default_factory=list)
    """Each question, as laid out."""
    said: list[str] = field(default_factory=list)
    """What the terminal said between tries (the hint, the whole diff)."""

    async def __call__(self, question: Question) -> Answer:
        layout = question_text(question, rows=self.rows, columns=self.columns)
        self.asked.append(layout)
        while True:
            if not self.replies:
                raise AssertionError(f"asked with no reply left: {layout.prompt}")
            answer = parse_answer(self.replies.pop(0), layout)
            if isinstance(answer, Answer):
                return answer
            self.said.append(layout.whole if answer == VIEW else layout.hint)
