"""Run a command in its own process group, keep its output within bounds, end it with escalation.

    output = CappedOutput(workspace.output_dir, limit=30_000)
    try:
        completion = await run_child(argv, cwd=root, env=env, sink=output.feed, time_limit=120)
    finally:
        output.close()
    output.text()            # all of it, or head + marker naming the file + tail

The child runs in a new session (so its own process group, and no controlling terminal: the
terminal's Ctrl-C reaches dsh, not the command), with stdin ``/dev/null``, stdout and stderr on
one pipe (they interleave as written), and no descriptor of ours (``close_fds``: the session
log's locked descriptor never reaches it) but those named in ``pass_fds`` (a sandbox's set-up).
Signals go to the child's process group, except where ``signal_group`` names another for all but
SIGKILL (bubblewrap's sandbox runs in a session of its own).

How it ends (times are :class:`Timings` fields; these are the defaults):

- It exits: output is read until the pipe closes, at most ``pipe_grace`` (0.25 s) longer, since
  a background child (``sleep 1000 &``) may hold the pipe open; then whatever is left of the
  group gets SIGKILL, what the pipe still holds is read, and the pipe is closed.
- Timeout: SIGTERM to the group, SIGKILL 2 s later if the shell has not exited.
- Cancellation of the awaiting task (Ctrl-C, SIGTERM of dsh): SIGINT to the group at 0 s,
  SIGTERM at 2 s, SIGKILL at 5 s, each only while the shell is still running. The stopping is
  shielded: a second cancellation cannot cut it short. The cancellation is absorbed, and
  :func:`run_child` returns a :class:`Completion` that says so (the task's ``cancelling()``
  count still shows it), so the caller can report the partial output. A command that exited
  by itself before any signal was sent counts as exited, whatever came after.

After any of these, the rest of the group gets SIGKILL: no child in the group outlives the call.

Before the first child starts, dsh makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``,
:func:`hide_own_environment`): the API key is gone from the child's environment and, since
start-up, from the environment block ``/proc/<dsh>/environ`` shows (:mod:`dsh_core.trust.startenv`),
but dsh's memory holds its own copy. Other processes of that user can then read none of dsh's
``/proc`` files that need ptrace access (and cannot attach a debugger); root still can.

Limit: a descendant that leaves the group (``setsid``, a daemon that double-forks) is out of
reach of ``killpg``; the call still returns (the pipe is given up after the grace), but that
process lives on. ``prctl(PR_SET_CHILD_SUBREAPER)`` would let dsh find such orphans, but it is
process-wide: dsh would inherit and have to reap the orphans of every child it runs, and could
not tell which command an orphan came from. The sandbox (bubblewrap with its own PID namespace,
``--die-with-parent``) closes this: when the namespace's first process dies, all of it dies.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal, TypeVar

from ..chain import error_chain
from ..masking import StreamMasker
from ..session.events import ToolOutput
from .specs import SAVED_OUTPUT_LIMIT as SAVED_OUTPUT_LIMIT

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "CANCEL_ESCALATION",
    "DEFAULT_TIMINGS",
    "SAVED_OUTPUT_LIMIT",
    "TIMEOUT_ESCALATION",
    "CappedOutput",
    "Completion",
    "Ended",
    "Escalation",
    "Timings",
    "capped_result",
    "hide_own_environment",
    "run_child",
    "signal_name",
]

T = TypeVar("T")

logger = logging.getLogger(__name__)
# A library must not print: the last-resort handler would write warnings to stderr.
logger.addHandler(logging.NullHandler())

_PR_SET_DUMPABLE = 4
"""``prctl`` option from ``<linux/prctl.h>``."""

Escalation = tuple[tuple[float, signal.Signals], ...]
"""Signals for a process group, each at its time in seconds since the stopping began."""

CANCEL_ESCALATION: Escalation = (
    (0.0, signal.SIGINT),
    (2.0, signal.SIGTERM),
    (5.0, signal.SIGKILL),
)
"""Ctrl-C or SIGTERM of dsh (SPEC section 8): ask, then insist, then kill."""

TIMEOUT_ESCALATION: Escalation = ((0.0, signal.SIGTERM), (2.0, signal.SIGKILL))
"""A command past its timeout: end it, and kill it if it does not end."""


_CHUNK = 64 * 1024
"""One read of the pipe (a Linux pipe holds 64 KiB by default)."""
_READS_PER_TURN = 16
"""Reads before the reader yields to the event loop, so a flood cannot starve a timeout."""
_DRAIN_READS = 16
"""Reads of what is left after the group is killed: a pipe holds at most this much by default,
and a writer that escaped the group could otherwise keep the drain going forever."""


@dataclass(frozen=True, slots=True)
class Timings:
    """How long each way of ending a child waits (defaults: SPEC section 8)."""

    on_cancel: Escalation = CANCEL_ESCALATION
    """Signals when the awaiting task is cancelled."""
    on_timeout: Escalation = TIMEOUT_ESCALATION
    """Signals when the timeout expires."""
    pipe_grace: float = 0.25
    """How long output is still read after the shell exited, for children holding the pipe."""


DEFAULT_TIMINGS = Timings()

Ended = Literal["exited", "timed-out", "cancelled"]
"""Why the call ended: by itself, at its timeout, or because its task was cancelled."""


@dataclass(frozen=True, slots=True)
class Completion:
    """How a child ended."""

    returncode: int
    """The shell's status; negative when a signal killed it (``-9``: SIGKILL)."""
    ended: Ended
    signals: tuple[signal.Signals, ...] = ()
    """What the escalation sent to the group, in order (not the final sweep of leftovers)."""


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; the number itself for a signal Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


async def run_child(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    sink: Callable[[bytes], None],
    time_limit: float,
    timings: Timings = DEFAULT_TIMINGS,
    pass_fds: Sequence[int] = (),
    signal_group: Callable[[], int | None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Completion:
    """Run ``argv`` to its end, passing its output to ``sink`` as it arrives.

    ``pass_fds`` are inherited by the child under their numbers. ``signal_group`` names the
    process group that gets every signal but SIGKILL, when that is not the child's own (a
    sandbox's, in a session of its own); None from it means the child's own. ``on_start`` hears
    the child's pid (its process group's id) once it runs: a background job's owner, to end it
    at once when the session ends.

    Raises OSError when the child cannot be started (a missing ``cwd`` or program). A
    cancellation is absorbed once the child is ended (see the module docstring).
    """
    hide_own_environment()
    child = _Child.start(argv, cwd, env, sink, pass_fds, signal_group)
    ended: Ended = "exited"
    signals: tuple[signal.Signals, ...] = ()
    try:
        if on_start is not None:
            on_start(child.pid)
        try:
            async with asyncio.timeout(time_limit):
                await asyncio.shield(child.exited)
        except TimeoutError:
            ended = "timed-out"
            signals, cancelled = await _uncancellable(child.stop(timings.on_timeout))
            if cancelled:
                ended = "cancelled"
    except asyncio.CancelledError:
        ended = "cancelled"
        signals, _ = await _uncancellable(child.stop(timings.on_cancel))
    finally:
        # On every way out, also an unexpected error: nothing of the group may outlive the call.
        await _uncancellable(child.finish(timings.pipe_grace))
    if not signals:
        ended = "exited"  # it exited by itself just as the time ran out or the cancel came
    return Completion(child.returncode, ended, signals)


@functools.cache
def hide_own_environment() -> None:
    """Make dsh non-dumpable, once per process, so that a command of the same user cannot read
    its ``/proc/<pid>/environ`` (the API key). A failure is logged at debug level and ignored:
    this is defence in depth (the sandbox, when there is one, hides dsh's processes anyway)."""
    import ctypes  # only a command needs it: kept out of startup

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    except (OSError, AttributeError) as exc:  # not Linux: no prctl
        logger.debug("could not make dsh non-dumpable: %s", error_chain(exc))


class _Child:
    """A started child: its process group, the pipe it writes to, and the task reading it."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        read_fd: int,
        sink: Callable[[bytes], None],
        signal_group: Callable[[], int | None] | None = None,
    ):
        self._proc = proc
        self._pgid = proc.pid  # a new session's leader: its pid is the group's id
        self._signal_group = signal_group
        self._fd = read_fd
        self._sink = sink
        os.set_blocking(read_fd, False)
        self.exited: asyncio.Future[None] = asyncio.ensure_future(_wait_exited(proc.pid))
        """Done when the shell has exited; it is not reaped yet, so its pid (and the group's
        id) cannot be reused while we still signal the group."""
        self._reading = asyncio.ensure_future(self._read())

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        sink: Callable[[bytes], None],
        pass_fds: Sequence[int] = (),
        signal_group: Callable[[], int | None] | None = None,
    ) -> _Child:
        read_fd, write_fd = os.pipe()
        try:
            import subprocess  # only a command needs it: kept out of startup

            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(pass_fds),
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child has its copy: EOF comes when the last writer is gone
        return cls(proc, read_fd, sink, signal_group)

    @property
    def pid(self) -> int:
        """The child's pid, and its process group's id."""
        return self._pgid

    @property
    def returncode(self) -> int:
        assert self._proc.returncode is not None, "only known after finish()"
        return self._proc.returncode

    async def stop(self, escalation: Escalation) -> tuple[signal.Signals, ...]:
        """Send each signal at its time, until the shell exits; return those sent."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        sent: list[signal.Signals] = []
        for at, signum in escalation:
            delay = began + at - loop.time()
            if delay > 0:
                await asyncio.wait((self.exited,), timeout=delay)
            if self.exited.done():
                break
            self._signal(signum)
            sent.append(signum)
        return tuple(sent)

    async def finish(self, pipe_grace: float) -> None:
        """Once the shell has exited: read the rest, kill what is left, close, reap."""
        if not self.exited.done():  # only after an unexpected error: never leave it running
            self._signal(signal.SIGKILL)
        try:
            await self.exited
            # Output still in flight comes before EOF; a background child holding the pipe
            # open would make EOF wait for it, so we wait only so long.
            await asyncio.wait((self._reading,), timeout=pipe_grace)
        finally:
            self._signal(signal.SIGKILL)
            self._reading.cancel()
            try:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._reading  # re-raises what broke the reading, if anything did
                # What the killed children wrote before they died is in the pipe already.
                self._read_available(_DRAIN_READS)
            finally:
                os.close(self._fd)
                if self.exited.done():
                    self._proc.wait()  # it has exited: this reaps without blocking

    def _signal(self, signum: signal.Signals) -> None:
        if signum != signal.SIGKILL and self._signal_group is not None:
            group = self._signal_group()
            if group is not None:
                try:
                    os.killpg(group, signum)
                    return
                except (ProcessLookupError, PermissionError):
                    pass  # that group is gone: the child's own is what is left
        # Gone already (ProcessLookupError), or no member we may signal (PermissionError:
        # a setuid program): either way there is nothing more we can do to the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pgid, signum)

    async def _read(self) -> None:
        while self._read_available(_READS_PER_TURN):
            await _wait_readable(self._fd)

    def _read_available(self, reads: int) -> bool:
        """Pass on what the pipe holds now, at most ``reads`` reads; False at its end."""
        for _ in range(reads):
            try:
                data = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                return True
            if not data:
                return False
            self._sink(data)
        return True


async def _wait_exited(pid: int) -> None:
    """Return once process ``pid`` (our child) has exited, without reaping it."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: a thread waits instead
        await asyncio.to_thread(os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        return
    try:
        await _wait_readable(pidfd)  # a pidfd becomes readable when its process exits
    finally:
        os.close(pidfd)


async def _wait_readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _resolve, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _uncancellable(work: Awaitable[T]) -> tuple[T, bool]:
    """Await ``work`` to its end even if the awaiting task is cancelled meanwhile.

    Returns its result and whether a cancellation arrived. The cancellation is not lost: the
    task's ``cancelling()`` count still holds it for whoever handles the task's end.
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            return await asyncio.shield(task), cancelled
        except asyncio.CancelledError:
            if task.cancelled():  # the work itself was cancelled, not only our wait for it
                raise
            cancelled = True


def capped_result(text: str, spill_dir: Path, *, limit: int, prefix: str) -> ToolOutput:
    """A finished text (a server's result, a subagent's answer) as a result, capped as a
    command's output is: past ``limit``, head and tail, and the whole of it in a file of
    ``spill_dir`` that the model is told it may read."""
    capped = CappedOutput(spill_dir, limit=limit, prefix=prefix)
    capped.feed(text.encode("utf-8", "surrogatepass"))
    capped.close()
    saved = capped.output_file
    return ToolOutput(
        capped.text(), truncated=capped.truncated, output_file=str(saved) if saved else None
    )


class CappedOutput:
    """A command's output as it arrives: whole while short, else head and tail plus a file.

    Bytes are decoded as UTF-8 incrementally (a character split between two reads stays whole;
    invalid bytes become U+FFFD). Up to ``limit`` characters are kept in memory. Past it, a
    file (0600, in ``spill_dir``, created 0700 when missing) gets everything, written as it
    arrives, up to ``file_limit`` bytes (it then stops, on a character's boundary, and
    :meth:`text` says so), and memory keeps only the first and the last ``limit // 2``
    characters: 100 MB of output costs no more memory than 31 KB. The API key is masked as the
    output arrives, so neither the result nor the file holds it (SPEC 10.5).
    """

    def __init__(
        self,
        spill_dir: Path,
        *,
        limit: int = 30_000,
        prefix: str = "output-",
        file_limit: int = SAVED_OUTPUT_LIMIT,
    ) -> None:
        self.limit = limit
        self.file_limit = file_limit
        self.saved = 0
        """Bytes written to the file."""
        self.file_full = False
        """Whether the file stopped at ``file_limit``: the output went on past it."""
        self._spill_dir = spill_dir
        self._prefix = prefix
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._masker = StreamMasker()
        self._parts: list[str] = []
        """Everything, while it fits ``limit``."""
        self._head = ""
        self._tail = ""
        self._spilled = False
        """Whether the output outgrew ``limit``: from then on only head and tail are kept."""
        self.chars = 0
        """Characters seen so far."""
        self.path: Path | None = None
        """The file with the whole output, once it did not fit."""
        self._file: BinaryIO | None = None
        self._file_error: OSError | None = None

    @property
    def truncated(self) -> bool:
        """Whether :meth:`text` leaves something out."""
        return self.chars > self.limit

    @property
    def output_file(self) -> Path | None:
        """The file holding all of the output, when it was cut and the file could be written."""
        return self.path if self.truncated and self._file_error is None else None

    def feed(self, data: bytes) -> None:
        """Add what the command wrote."""
        self._add(self._masker.feed(self._decoder.decode(data)))

    def close(self) -> None:
        """Flush a character left incomplete at the end, and close the file."""
        self._add(self._masker.feed(self._decoder.decode(b"", final=True)) + self._masker.flush())
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                self._file_error = exc

    def text(self) -> str:
        """The output, or its head, a line saying what was cut and where it all is, its tail."""
        if not self.truncated:
            return "".join(self._parts)
        cut = self.chars - len(self._head) - len(self._tail)
        if self._file_error is None and self.file_full:
            where = (
                f"the first {_size(self.file_limit)} of the output are in {self.path}; "
                "the rest was not saved"
            )
        elif self._file_error is None:
            where = f"the whole output is in {self.path}"
        else:
            where = f"the whole output could not be saved: {error_chain(self._file_error)}"
        head = self._head if self._head.endswith("\n") else self._head + "\n"
        return f"{head}[... {cut:,} of {self.chars:,} characters cut here; {where}]\n{self._tail}"

    def _add(self, text: str) -> None:
        if not text:
            return
        self.chars += len(text)
        half = self.limit // 2
        if self.chars <= self.limit:
            self._parts.append(text)
            return
        if not self._spilled:  # the moment it stops fitting
            whole = "".join(self._parts) + text
            self._parts, self._spilled = [], True
            self._head, self._tail = whole[:half], whole[-(self.limit - half) :]
            self._spill(whole)
            return
        self._tail = (self._tail + text)[-(self.limit - half) :]
        self._write(text)

    def _spill(self, text: str) -> None:
        try:
            self._spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            import tempfile

            fd, name = tempfile.mkstemp(prefix=self._prefix, suffix=".txt", dir=self._spill_dir)
        except OSError as exc:
            self._file_error = exc
            return
        self.path = Path(name)
        self._file = os.fdopen(fd, "wb")
        self._write(text)

    def _write(self, text: str) -> None:
        if self._file is None:
            return
        data = text.encode("utf-8")
        room = self.file_limit - self.saved
        if len(data) > room:
            # The last piece: cut on a character's boundary (what "ignore" drops is the
            # beginning of a character that did not fit).
            data = data[:room].decode("utf-8", "ignore").encode("utf-8")
            self.file_full = True
        try:
            self._file.write(data)
            self.saved += len(data)
        except OSError as exc:
            self._file_error = exc
        if self.file_full or self._file_error is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                self._file_error = self._file_error or exc


def _size(count: int) -> str:
    """``64 MiB`` for 64 * 2**20 bytes; bytes, with separators, when not whole mebibytes."""
    mebibytes, rest = divmod(count, 1 << 20)
    return f"{mebibytes} MiB" if mebibytes and not rest else f"{count:,} bytes"
