"""Other processes for a long ``grep``: parts of the walk searched at the same time.

    found = Findings(walk)
    with Division(walk, found, regex, start) as division:   # never forks if not worth it
        for relative, entry in walk.files(start, rules, sharing=division):
            ...                                              # every process runs this loop

**Why processes.** A search of a big tree spends its time in ``open``, ``read`` and ``close``
(the kernel's part, more than half) and in the Python between them: about as much CPU as
ripgrep spends, but on one core where ripgrep uses all of them. A second thread does not help:
it takes the GIL back after every system call, and each hand-over is a wake-up on the other core
(measured no faster: ``docs/notes/2026-12-03-costs-that-grow-grep-and-stream.md``). A forked
process shares nothing but the descriptors it inherits.

**How.** Once the walk has yielded :data:`FILES_FIRST` files, at the next directory boundary
with two directories or more still to walk, the process forks. The walk's stack holds the
directories nearest the top at its bottom and walks them last: the child takes half of those
(rounded up), the ones walked last, and the parent keeps the rest; both go on with the same
walk. The child inherits the descriptors of the directories the walk holds, so what it opens is
what was listed, as before (:mod:`dsh_core.trust.beneath`). It writes its lines and notes to a
pipe and exits; the parent, when only the child's part is left above it on the stack, reads
them and puts them after its own. A process that has to wait for a child, or is done, puts a
byte in a pipe all of them share ("a core is idle"); a process still walking takes it at its
next directory and gives half of what it has left to a child of its own, by the same rules. So
a tree whose work is in one directory (``site-packages`` in the standard library) is divided
again inside it, and no more processes run at once than there are cores.

The result is the one a single process gives, line for line and note for note: every line
carries the walk's note counts at the moment it was found, so a result stopped at the cap
(:data:`~dsh_core.tools.specs.MAX_GREP_MATCHES`) inside a child's part counts what one process
would have.

**What a child runs**: this thread's code only, the walk, RE2 on a copy of the pattern of its
own (``re2.compile`` shares one object between threads, and another thread may have held its
locks at the fork), ``pathspec``, ``json`` and system calls; never the event loop, the log,
stdout or a lock another thread may hold. Its signal handlers are the defaults, and it no longer
writes to the event loop's wake-up descriptor (a signal to it alone must not look like one to
dsh). It leaves by ``os._exit``. It dies with the thread that forked it (``PR_SET_PDEATHSIG``),
so a dsh that exits, however it exits, leaves no search behind, and it is killed (with its own
children) when the call is cancelled or its parent stops at the cap first. A walk that can
reach ``/proc`` never divides (every process has files of its own there), and dsh's own
``/proc`` files stay fenced in a child (:func:`~dsh_core.trust.credentials.own_pids`).

**Nothing is lost when one fails.** A child that dies, is killed, says nothing sensible, or is
not done long after its parent (:func:`_patience`: a hang) has its part walked by its parent,
as if there had been no division: the same result, later.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import time
import warnings
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..specs import MAX_GREP_MATCHES

if TYPE_CHECKING:
    from ..linear import LinearRegex
    from .walk import Pending, Walk

__all__ = ["FILES_FIRST", "Division", "Findings"]

FILES_FIRST = 2_000
"""Files one process searches before it divides the rest: a fork costs about a millisecond, the
search of 2,000 small files about fifteen."""

_LISTS = ("unreadable", "fenced", "own_process", "swapped")
_COUNTS = ("symlinks_out", "binary")
"""The :class:`~.walk.Walk` fields its notes are made of."""

Mark = list[int]
"""The lengths of the walk's :data:`_LISTS`, then its :data:`_COUNTS`, at one moment."""

_PR_SET_PDEATHSIG = 1
"""``prctl`` option from ``<linux/prctl.h>``."""

_FAILED = 70
"""The child's exit status when its search raised: the parent walks its part."""


class Findings(list[str]):
    """``grep``'s lines, each with the walk's note counts when it was found (:data:`Mark`)."""

    def __init__(self, walk: Walk) -> None:
        super().__init__()
        self.walk = walk
        self.marks: list[Mark] = []

    def append(self, line: str, /) -> None:
        super().append(line)
        self.marks.append(_mark(self.walk))


def _mark(walk: Walk) -> Mark:
    return [len(getattr(walk, name)) for name in _LISTS] + [getattr(walk, n) for n in _COUNTS]


@dataclass
class _Part:
    """What one child walks: ``pending[top:end]`` as it was when it forked."""

    pid: int
    reading: int
    top: int
    end: int
    forked_at: float
    status: int = 0
    """Its wait status, once reaped."""


class Division:
    """The walk of one ``grep`` call, divided between processes when it grows long."""

    def __init__(self, walk: Walk, found: Findings, regex: LinearRegex, start: str) -> None:
        self.walk = walk
        self.found = found
        self.regex = regex
        self.active = _worth_dividing(start)
        """Whether the walk may divide at all (else :meth:`before` never forks)."""
        self.in_child = False
        self._parts: list[_Part] = []
        """The children walking parts of ``pending``, the part walked last first."""
        self._idle: tuple[int, int] | None = None
        """The pipe every process of this walk shares: a byte in it says a core is idle."""
        self._to_parent = -1

    def before(self, pending: list[Pending], yielded: int) -> None:
        """Called by the walk before each directory (``yielded`` files so far). When only
        children's parts are left above the next one, their findings are put in and their
        directories taken off ``pending`` (or, when a child failed, left to this walk); else,
        when it is time, a child takes part of what is left."""
        while self._parts and len(pending) == self._parts[-1].end:
            part = self._parts.pop()
            if self._finish(part):
                del pending[part.top :]
        if self._parts or self.in_child or self._idle is not None:
            if self._idle is None or not self._take_idle():
                return
        elif not self.active or yielded < FILES_FIRST:
            return
        if not self._fork(pending):
            self._say_idle()  # not here: another process may divide

    def _fork(self, pending: list[Pending]) -> bool:
        """A child for part of what is left to this walk; False if there is too little."""
        top = self._parts[-1].end if self._parts else 0
        if not self.active or len(pending) - top < 2:
            return False
        # The directories nearest the top hold the most: half of them, rounded up, since this
        # walk also has the rest of the one it is in. They are walked last: the child's
        # findings come after all of this walk's.
        level = pending[top][5]
        given = (sum(1 for entry in pending[top:] if entry[5] == level) + 1) // 2
        parent = os.getpid()
        prctl = _prctl()
        try:
            if self._idle is None:
                self._idle = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
                # Two processes now; a core beyond the second is idle from the start.
                os.write(self._idle[1], b"." * max(0, _cores() - 2))
            reading, writing = os.pipe2(os.O_CLOEXEC)
        except OSError:
            self.active = False
            return False
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns of a fork in a process with threads; the module's docstring
                # says what the child runs, and why that is safe.
                warnings.simplefilter("ignore", DeprecationWarning)
                child = os.fork()
        except OSError:  # no memory, no processes left: this walk goes on alone
            os.close(reading)
            os.close(writing)
            self.active = False
            return False
        if child == 0:
            os.close(reading)
            self._become_child(parent, writing, prctl)
            pending[:] = pending[top : top + given]
            return True
        os.close(writing)
        self._parts.append(_Part(child, reading, top, top + given, time.monotonic()))
        return True

    def _become_child(self, parent: int, writing: int, prctl: Any) -> None:
        for part in self._parts:  # its parent's, not its own
            os.close(part.reading)
        self._parts = []
        if self._to_parent >= 0:  # its parent's own way to the grandparent
            os.close(self._to_parent)
        self.in_child = True
        self._to_parent = writing
        signal.set_wakeup_fd(-1)  # the event loop's: a signal here is not dsh's
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # it died before the request took effect
            os._exit(_FAILED)
        self.regex.renew()
        self.found.clear()
        self.found.marks.clear()
        for name in _LISTS:
            setattr(self.walk, name, [])
        for name in _COUNTS:
            setattr(self.walk, name, 0)

    def _finish(self, part: _Part) -> bool:
        """The child's findings put after this walk's; False when there are none to put (it
        failed, or the walk was told to stop): this walk goes on with its part itself."""
        self._say_idle()  # while this process waits, another may divide
        report = self._collect(part)
        self._take_idle()
        if report is None:
            return False
        try:
            lines, marks, notes = report["found"], report["marks"], report["notes"]
            room = MAX_GREP_MATCHES + 1 - len(self.found)
            if len(lines) >= room > 0:  # one process stops at this line: count as it would
                lines, marks = lines[:room], marks[:room]
                notes = _cut(notes, marks[-1])
            before = _mark(self.walk)
            merged = {name: getattr(self.walk, name) + notes[name] for name in _LISTS + _COUNTS}
            moved = [[mine + theirs for mine, theirs in zip(before, m, strict=True)] for m in marks]
            if not all(isinstance(line, str) for line in lines) or len(moved) != len(lines):
                return False
        except (KeyError, IndexError, TypeError, ValueError):
            return False
        self.found.extend(lines)
        self.found.marks.extend(moved)
        for name, value in merged.items():
            setattr(self.walk, name, value)
        return True

    def _collect(self, part: _Part) -> dict[str, Any] | None:
        """The child's report, and the child reaped; None if it failed, took too long, or the
        walk was stopped (it is killed)."""
        chunks: list[bytes] = []
        deadline = time.monotonic() + _patience(time.monotonic() - part.forked_at)
        poller = select.poll()
        poller.register(part.reading, select.POLLIN)
        try:
            while not self.walk.stop.is_set() and time.monotonic() < deadline:
                if not poller.poll(100):
                    continue
                chunk = os.read(part.reading, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            else:
                return None
        except OSError:
            return None
        finally:
            _end(part)
        if os.waitstatus_to_exitcode(part.status) != 0:
            return None
        try:
            report = json.loads(b"".join(chunks))
        except ValueError:
            return None
        return report if isinstance(report, dict) else None

    def _say_idle(self) -> None:
        if self._idle is not None:
            with contextlib.suppress(OSError):  # full: enough processes know
                os.write(self._idle[1], b".")

    def _take_idle(self) -> bool:
        assert self._idle is not None
        try:
            return os.read(self._idle[0], 1) != b""
        except BlockingIOError:
            return False

    def close(self) -> None:
        """Every child still running killed and reaped; the pipes closed."""
        while self._parts:
            _end(self._parts.pop())
        if self._idle is not None and not self.in_child:
            for fd in self._idle:
                os.close(fd)
            self._idle = None

    def __enter__(self) -> Division:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
        if not self.in_child:
            return
        # The child never leaves the search: what called it is its parent's.
        code = _FAILED
        if kind is None:
            try:
                report = {"found": list(self.found), "marks": self.found.marks}
                report["notes"] = {name: getattr(self.walk, name) for name in _LISTS + _COUNTS}
                _write_all(self._to_parent, json.dumps(report).encode())
                code = 0
            except BaseException:  # any failure: the parent walks the part
                code = _FAILED
        self._say_idle()
        os._exit(code)


def _end(part: _Part) -> None:
    """``part``'s child killed if it still runs (and with it its own), reaped, its pipe closed."""
    with contextlib.suppress(ProcessLookupError):  # ended already: reaped below
        os.kill(part.pid, signal.SIGKILL)
    _, part.status = os.waitpid(part.pid, 0)
    os.close(part.reading)


def _cut(notes: dict[str, Any], mark: Mark) -> dict[str, Any]:
    """``notes`` as they were at ``mark``."""
    cut = {name: notes[name][:length] for name, length in zip(_LISTS, mark, strict=False)}
    cut.update(zip(_COUNTS, mark[len(_LISTS) :], strict=True))
    return cut


def _write_all(fd: int, data: bytes) -> None:
    with memoryview(data) as view:
        while view:
            view = view[os.write(fd, view) :]


def _patience(parent_took: float) -> float:
    """How long the parent waits for the child once its own part is done: the child had about
    as much to do, so this long means a hang (or a disk much slower in its part)."""
    return 5.0 + 3 * parent_took


def _worth_dividing(start: str) -> bool:
    """Whether a walk from ``start`` may divide: there is a second core, and it is not a walk
    that can reach ``/proc``, where every process has files of its own (the child's are not
    dsh's, and the walk steps around dsh's)."""
    if start == "/" or start == "/proc" or start.startswith("/proc/"):
        return False
    return _cores() >= 2


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@functools.cache
def _prctl() -> Any:
    """libc's ``prctl``, found in the parent (no import or lookup in the child); None without."""
    import ctypes  # only a long grep needs it: kept out of startup

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None
