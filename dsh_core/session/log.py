"""One open session log: its events in memory and its file, locked, appended to line by line.

    log.append(TurnStart(turn=1, model="deepseek-v4-flash"))     # one write() of one line
    log.append(UserText(turn=1, text="hello"), durable=True)      # and an fsync

Each event is one ``write()`` of a whole line (a line with a long answer, a few: it is encoded
a slice at a time, :func:`~.lines.encode_line_parts`); ``durable=True`` adds an ``fsync``. A
failed write is cut back off the file, so a later append never follows a torn line. The file
holds an exclusive ``flock`` while open, so two processes never interleave their appends.
:class:`~dsh_core.session.store.SessionStore` makes and loads these.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import SessionLogError, UsageError
from .events import FORGOTTEN, Record, SessionEvent, SystemPrompt, TurnEnd, TurnStart
from .lines import encode_line_parts, format_time

__all__ = ["SessionLog", "lock", "write_all"]


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def lock(fd: int, path: Path) -> None:
    """Take the log's exclusive lock, or say that another dsh holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise SessionLogError(f"session log {path} is in use by another dsh process") from exc


class SessionLog:
    """An open session: its events in memory and its file, locked, ready for appends.

    Made by :class:`~dsh_core.session.store.SessionStore`, never directly. Not thread-safe: one
    writer, one thread.
    """

    def __init__(
        self,
        *,
        fd: int,
        path: Path,
        header: dict[str, Any],
        events: list[SessionEvent],
        clock: Callable[[], datetime],
    ) -> None:
        self.id: str = header["id"]
        self.path = path
        self.cwd: str = header["cwd"]
        self.created: str = header["created"]
        parent = header.get("parent")
        self.parent: dict[str, str] | None = parent if isinstance(parent, dict) else None
        """A subagent's session: ``{session, call_id}`` of the call that ran it; else None."""
        self.events = events
        """Every event, loaded and appended, in ``seq`` order (``events[n].seq == n``); those a
        compaction replaced may have been let go of (:meth:`forget`, and when the log was
        loaded, the :data:`~dsh_core.session.replaced.REPLACED_CONTENT` of its compactions)."""
        self._forgotten = 0
        """Events before this index were let go of."""
        self._fd: int | None = fd
        self._clock = clock
        self._size = os.fstat(fd).st_size
        """Bytes of whole, acknowledged lines; a failed write rolls the file back to it."""
        self._broken: OSError | None = None
        self.on_append: Callable[[SessionEvent], None] | None = None
        """Called with each event once it is written (``--json`` shows them as they come)."""

    def __repr__(self) -> str:
        return f"SessionLog(id={self.id!r}, path={str(self.path)!r}, events={len(self.events)})"

    def __enter__(self) -> SessionLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._fd is None

    def append(self, record: Record, *, durable: bool = False) -> SessionEvent:
        """Append one event as one whole line; with ``durable``, fsync before returning.

        Raises SessionLogError (its cause is the OSError) when the write fails; the file is cut
        back to its last whole line so that a later append does not follow a torn one.
        """
        if self._fd is None:
            raise UsageError(f"session log {self.path} is closed")
        if self._broken is not None:
            raise SessionLogError(
                f"session log {self.path} cannot be written after an earlier failure"
            ) from self._broken
        event = SessionEvent(len(self.events), format_time(self._clock()), record)
        written = 0
        try:
            for part in encode_line_parts(event.to_json()):  # one part, unless it is long
                write_all(self._fd, part)
                written += len(part)
            if durable:
                os.fsync(self._fd)
        except OSError as exc:
            self._roll_back(exc)
            raise SessionLogError(f"cannot write session log {self.path}") from exc
        self._size += written
        self.events.append(event)
        if self.on_append is not None:
            self.on_append(event)
        return event

    def open_turn(self) -> int | None:
        """The turn started and not ended yet, where a record written now belongs (a tool's,
        during its call); None between turns."""
        for event in reversed(self.events):
            record = event.record
            if isinstance(record, TurnEnd):
                return None
            if isinstance(record, TurnStart):
                return record.turn
        return None

    def extend(self, records: Sequence[Record], *, durable: bool = False) -> None:
        """Append ``records`` in order; with ``durable``, one fsync after the last covers all."""
        for index, record in enumerate(records, 1):
            self.append(record, durable=durable and index == len(records))

    def forget(self, through: int) -> None:
        """Let go of the events up to seq ``through`` in memory; the file keeps them.

        For a long session: what a compaction replaced is never sent again, and holding it
        would make memory grow with the session. Each such event reads as
        :data:`~dsh_core.session.events.FORGOTTEN` from then on, but for the system prompt, which
        every request sends. A history must have followed the log from its start (the usage it adds
        up, for one, counted what is let go of).
        """
        end = min(through + 1, len(self.events))
        for index in range(self._forgotten, end):
            if not isinstance(self.events[index].record, SystemPrompt):
                self.events[index] = FORGOTTEN
        self._forgotten = max(self._forgotten, end)

    def close(self) -> None:
        """Close the file and release the lock; idempotent."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def discard_if_empty(self) -> bool:
        """Close, and delete the log and its directory if no event was ever written.

        A session nobody used (dsh started and left without a turn) would otherwise be the
        newest one, and ``--continue`` would pick it over the conversation before it.
        """
        if self.events:
            return False
        self.close()
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # something else lives there: leave the directory
            self.path.parent.rmdir()
        return True

    def _roll_back(self, error: OSError) -> None:
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            # We cannot tell what is at the end of the file now; appending after it could bury
            # a torn line mid-file, which the next load would refuse. Stop writing instead.
            self._broken = error
