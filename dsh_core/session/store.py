"""Where sessions live, and loading one back: ``$DSH_HOME/sessions``, crash repair included.

    $DSH_HOME/sessions/<cwd key>/<session id>/session.jsonl      (0600; directories 0700)
    $DSH_HOME/sessions/.ids/<session id>                         where it is (:mod:`.ids`)

Usage::

    store = SessionStore(Path("~/.dsh").expanduser())
    log = store.create(Path.cwd())
    log.append(TurnStart(turn=1, model="deepseek-v4-flash"), durable=True)  # a typed record
    ...
    log, report = store.open(log.id)       # repairs what a crash left, and says so
    for notice in report.notices:
        ...

Loading is the only place that changes existing bytes, and only at the tail: a torn last line is
truncated, damage after the last complete ``turn/end`` is moved byte for byte into a sidecar
file, and a turn left open is closed by answering the tool calls it left (see
:func:`dsh_core.session.closing.closing_records`) and appending ``turn/end {kind: "interrupted"}``.
Every repair is reported in :class:`LoadReport`; damage anywhere earlier is refused. What a
compaction replaced is let go of as the log is read (:mod:`.replaced`). Readers
that must not lock or repair (``--sessions``, ``--show``) use :meth:`SessionStore.summaries`
and :meth:`SessionStore.read`. The design note is ``docs/notes/2026-11-30-session-log.md``.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any

from ..errors import SessionLogError, UsageError
from ..fileio import fsync_directory
from .catalogue import SessionSummary, StoredSession, read_log, summarise_found
from .closing import closing_records
from .events import Record, SessionEvent, TurnEnd, TurnStart
from .ids import note, place
from .lines import (
    FORMAT_VERSION,
    check_header,
    damaged,
    decode_event,
    encode_line,
    format_time,
    is_turn_end,
    utc,
)
from .log import SessionLog, lock, write_all
from .replaced import COMPACTION, Replaced

__all__ = ["LoadReport", "SessionStore", "cwd_key"]

logger = logging.getLogger(__name__)
# A library must not print: without this, Python's last-resort handler writes our warnings to
# stderr when the application has not configured logging.
logger.addHandler(logging.NullHandler())

SESSIONS_DIR = "sessions"
LOG_NAME = "session.jsonl"
SUBAGENTS_DIR = "subagents"
"""Inside a session's folder: the sessions of the subagents its calls ran."""
TOOL_OUTPUT_DIR = "tool-output"
"""Inside a session's folder: the whole output of results that were cut (0700, files 0600)."""
DAMAGED_SUFFIX = ".damaged-"

_FILE_MODE = 0o600
_DIR_MODE = 0o700
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KEY_NAME_LENGTH = 48
"""Characters of the readable part of a cwd key; the tail of the path says the most."""


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What loading a session repaired; empty when the file was whole."""

    notices: tuple[str, ...] = ()
    """One human-readable line per repair, in the order they were made."""
    interrupted_turn: int | None = None
    """The turn this load closed as ``interrupted``, else None."""
    appended: int = 0
    """Events this load appended to close that turn (results for its calls, ``turn/end``)."""


def cwd_key(cwd: str) -> str:
    """The directory name for a working directory: readable tail of the path plus a hash.

    ``/home/ann/src/dsh`` becomes ``home-ann-src-dsh-<12 hex digits>``. The readable part is
    sanitised and shortened, so the hash of the full path is what keeps keys apart.
    """
    parts = [part for part in PurePath(cwd).parts if part not in ("/", "")]
    name = _KEY_UNSAFE.sub("_", "-".join(parts))[-_KEY_NAME_LENGTH:].lstrip("._-") or "root"
    digest = hashlib.sha256(os.fsencode(cwd)).hexdigest()[:12]
    return f"{name}-{digest}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _make_private_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents as 0700; return those created, outermost first.

    The mode is set with chmod after mkdir because mkdir's mode is filtered by the umask.
    Directories that already exist are left as their owner set them.
    """
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    created: list[Path] = []
    for path in reversed(missing):
        try:
            os.mkdir(path, _DIR_MODE)
        except FileExistsError:
            continue  # another process made it between our check and mkdir
        os.chmod(path, _DIR_MODE)
        created.append(path)
    return created


class SessionStore:
    """Owns ``$DSH_HOME/sessions``: creates, finds, lists and loads session logs.

    ``clock`` and ``new_id`` are injectable so a replay reproduces a log byte for byte.
    """

    def __init__(
        self,
        home: Path,
        *,
        clock: Callable[[], datetime] | None = None,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        self.home = Path(home)
        self.root = self.home / SESSIONS_DIR
        self._clock = clock if clock is not None else _utc_now
        self._new_id = new_id if new_id is not None else self._default_id

    def _default_id(self) -> str:
        # Sortable by creation at a glance, unique through the random tail.
        return f"{utc(self._clock()):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"

    def create(
        self, cwd: Path, *, parent: SessionLog | None = None, call_id: str = ""
    ) -> SessionLog:
        """Start a new session for ``cwd``: directories, file and header made durable.

        With ``parent``, the session is a subagent's, started by the call ``call_id`` of that
        session: its header says so (``parent: {session, call_id}``) and it lives in the
        parent's folder (``<parent>/subagents/<id>/``), where ``--continue`` never looks.
        """
        cwd_text = os.path.abspath(cwd)
        session_id = self._new_id()
        if not _ID_PATTERN.fullmatch(session_id):
            raise UsageError(f"session id {session_id!r} is not a safe directory name")
        created = format_time(self._clock())
        if parent is None:
            directory = self.root / cwd_key(cwd_text) / session_id
        else:
            directory = parent.path.parent / SUBAGENTS_DIR / session_id
        path = directory / LOG_NAME
        taken = place(self.root, session_id)
        if taken is not None:  # in another directory: ids name one session, wherever it is
            raise SessionLogError(f"session {session_id} already exists in {taken.parent}")
        header: dict[str, Any] = {
            "type": "session",
            "version": FORMAT_VERSION,
            "id": session_id,
            "created": created,
            "cwd": cwd_text,
        }
        if parent is not None:
            header["parent"] = {"session": parent.id, "call_id": call_id}
        try:
            made = _make_private_dirs(directory.parent)
            os.mkdir(directory, _DIR_MODE)
            os.chmod(directory, _DIR_MODE)
            made.append(directory)
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, _FILE_MODE
            )
        except FileExistsError as exc:
            raise SessionLogError(f"session {session_id} already exists in {directory}") from exc
        except OSError as exc:
            raise SessionLogError(f"cannot create session log {path}") from exc
        try:
            os.fchmod(fd, _FILE_MODE)
            lock(fd, path)
            write_all(fd, encode_line(header))
            os.fsync(fd)
            # The new entries live in their parents: the file in ``directory``, each new
            # directory in the one above it.
            fsync_directory(directory)
            for new in made:
                fsync_directory(new.parent)
        except BaseException as exc:
            os.close(fd)
            if isinstance(exc, OSError):
                raise SessionLogError(f"cannot create session log {path}") from exc
            raise
        note(self.root, session_id, path)  # after the log is durable: an entry never leads on
        return SessionLog(fd=fd, path=path, header=header, events=[], clock=self._clock)

    def open(self, session_id: str) -> tuple[SessionLog, LoadReport]:
        """Load a session by id, repairing what a crash left (see :class:`LoadReport`).

        Raises SessionLogError for an unknown id, a log in use, damage before the last complete
        turn, or a newer format version.
        """
        return self._load(self.find(session_id))

    def find(self, session_id: str) -> Path:
        """The log of the session ``session_id``, without opening it.

        One look at the id's index entry (:mod:`dsh_core.session.ids`), whatever the number of
        sessions stored; without a sound entry, a walk of the store, which then writes it.
        Raises SessionLogError for an id that is unknown, unsafe, or in two directories.
        """
        if not _ID_PATTERN.fullmatch(session_id):
            found = []
        elif (indexed := place(self.root, session_id)) is not None:
            return indexed
        else:
            found = sorted(log for name, log in self._walk(session_id) if name == session_id)
            if len(found) == 1:
                note(self.root, session_id, found[0])
        if not found:
            raise SessionLogError(f"no session {session_id!r} in {self.root}")
        if len(found) > 1:
            places = ", ".join(str(path) for path in found)
            raise SessionLogError(f"session id {session_id!r} is ambiguous: {places}")
        return found[0]

    def indexed(self, session_id: str) -> bool:
        """Whether the index knows ``session_id``'s log (one look; False says nothing)."""
        return bool(_ID_PATTERN.fullmatch(session_id)) and place(self.root, session_id) is not None

    def ids_starting_with(self, prefix: str) -> list[str]:
        """The ids of the stored sessions (subagents' included) that begin with ``prefix``,
        sorted. A walk of the store: an index cannot say that no other id begins so."""
        return sorted({name for name, _ in self._walk(prefix)})

    def _walk(self, prefix: str) -> Iterator[tuple[str, Path]]:
        """(id, log) of each stored session whose id begins with ``prefix``."""
        for key in _directories(self.root):
            for session in _directories(key.path):
                if session.name.startswith(prefix):
                    log = Path(session.path, LOG_NAME)
                    if log.exists():
                        yield session.name, log
                for child in _directories(os.path.join(session.path, SUBAGENTS_DIR)):
                    if child.name.startswith(prefix):
                        log = Path(child.path, LOG_NAME)
                        if log.exists():
                            yield child.name, log

    def newest(self, cwd: Path) -> tuple[SessionLog, LoadReport] | None:
        """Load the most recently written session of ``cwd``, or None when it has none."""
        path = self.newest_path(cwd)
        return None if path is None else self._load(path)

    def newest_path(self, cwd: Path) -> Path | None:
        """The log of the most recently written session of ``cwd``, without opening it."""
        candidates = list(self._logs(self.root / cwd_key(os.path.abspath(cwd))))
        if not candidates:
            return None
        return max(candidates, key=lambda item: _recency(item[0], item[1]))[0]

    def summaries(self, cwd: Path | None = None) -> list[SessionSummary]:
        """Sessions of ``cwd`` (or of every directory) for a listing, most recent first.

        Read-only and fast: no lock, no repair, and from each log only its head and its tail
        (see :func:`summarise_found`: one ``open`` and one ``fstat`` a session); the first is
        the one :meth:`newest` would load. A damaged log is listed with what could be read.
        Raises SessionLogError when the sessions directory itself cannot be read; a missing
        one holds no sessions.
        """
        try:
            if not stat.S_ISDIR(os.stat(self.root).st_mode):
                raise SessionLogError(f"{self.root} is not a directory")
            if cwd is None:
                with os.scandir(self.root) as entries:
                    keys = [e.path for e in entries if not e.name.startswith(".") and e.is_dir()]
            else:
                keys = [os.path.join(self.root, cwd_key(os.path.abspath(cwd)))]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionLogError(f"cannot read the sessions in {self.root}") from exc
        return _summarised(keys)

    def children(self, summary: SessionSummary) -> list[SessionSummary]:
        """The sessions of the subagents ``summary``'s session ran, oldest first."""
        found = _summarised([os.path.join(summary.path.parent, SUBAGENTS_DIR)])
        found.sort(key=lambda item: item.path.parent.name)  # ids begin with their creation time
        return found

    def read(self, session_id: str) -> StoredSession:
        """The session ``session_id`` as its log holds it, read without locking or repairing.

        For readers (``dsh --show``): a session that a running dsh is writing can be read.
        """
        return read_log(self.find(session_id))

    @staticmethod
    def _logs(key_dir: Path) -> Iterator[tuple[Path, os.stat_result]]:
        for session_dir in _directories(key_dir):
            path = Path(session_dir.path, LOG_NAME)
            try:
                status = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue  # a stray file, or a session still being created
            yield path, status

    def _load(self, path: Path) -> tuple[SessionLog, LoadReport]:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise SessionLogError(f"cannot open session log {path}") from exc
        try:
            lock(fd, path)
            with _collection_paused():
                scan = _scan(fd, path)
            repaired = self._repair_tail(fd, path, scan)
            notices = [repaired] if repaired is not None else []
            log = SessionLog(
                fd=fd, path=path, header=scan.header, events=scan.events, clock=self._clock
            )
        except OSError as exc:
            os.close(fd)
            raise SessionLogError(f"cannot load session log {path}") from exc
        except BaseException:
            os.close(fd)
            raise
        interrupted: int | None = None
        closing: list[Record] = []
        if scan.open_turn is not None:
            interrupted = scan.open_turn
            opened = max(i for i, e in enumerate(log.events) if isinstance(e.record, TurnStart))
            records = [event.record for event in log.events[opened:]]
            try:
                closing = closing_records(records, TurnEnd(interrupted, "interrupted"))
                log.extend(closing, durable=True)
            except BaseException:
                log.close()
                raise
            unpaired = len(closing) - 1
            notices.append(
                f"turn {interrupted} was left open by a process that exited; "
                + (f"answered its {unpaired} unfinished tool call(s) and " if unpaired else "")
                + "closed it as interrupted"
            )
        for notice in notices:
            logger.warning("session %s: %s", log.id, notice)
        appended = len(closing) if interrupted is not None else 0
        return log, LoadReport(tuple(notices), interrupted, appended)

    def _repair_tail(self, fd: int, path: Path, scan: _Scan) -> str | None:
        """Cut the file back to its last good line, keeping damaged bytes in a sidecar.

        Returns the notice that says what was done, or None when the tail was whole.
        """
        if scan.damage is not None:
            line, offset, why = scan.damage
            size = os.fstat(fd).st_size
            moved = os.pread(fd, size - offset, offset)
            sidecar = self._write_sidecar(path, moved)
            os.ftruncate(fd, offset)
            os.fsync(fd)
            return (
                f"line {line} of {path} was damaged ({why}); moved it and everything after it "
                f"({len(moved)} bytes) to {sidecar}"
            )
        elif scan.torn is not None:
            line, offset = scan.torn
            size = os.fstat(fd).st_size
            os.ftruncate(fd, offset)
            os.fsync(fd)
            return (
                f"truncated a torn last line (line {line}, {size - offset} bytes) "
                f"left by an interrupted write to {path}"
            )
        return None

    def _write_sidecar(self, path: Path, data: bytes) -> Path:
        stamp = f"{utc(self._clock()):%Y%m%dT%H%M%S.%f}"[:-3] + "Z"
        base = path.with_name(f"{path.name}{DAMAGED_SUFFIX}{stamp}")
        candidate, n = base, 1
        while True:
            try:
                fd = os.open(
                    candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE
                )
                break
            except FileExistsError:
                n += 1
                candidate = base.with_name(f"{base.name}-{n}")
        try:
            os.fchmod(fd, _FILE_MODE)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        # The sidecar must be durable before the log loses those bytes.
        fsync_directory(path.parent)
        return candidate


@dataclass(slots=True)
class _Scan:
    header: dict[str, Any]
    events: list[SessionEvent]
    open_turn: int | None
    """The turn of a ``turn/start`` with no ``turn/end`` after it."""
    damage: tuple[int, int, str] | None
    """(line number, byte offset, what is wrong) of the first bad line, when it may be moved."""
    torn: tuple[int, int] | None
    """(line number, byte offset) of a last line without its newline."""


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while a log is decoded, the collector as it was after.

    A long session's load makes hundreds of thousands of objects that all live on, and none
    of them garbage: every collection they set off walked all those made before it again
    (15-25% of a 10,000-turn load). Nothing a load makes is a cycle; what runs meanwhile in
    other threads is only collected a moment later.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _scan(fd: int, path: Path, *, let_go: bool = True) -> _Scan:
    """Read the whole log once, line by line, and find where its good part ends; with
    ``let_go``, without holding what its compactions replaced (:class:`Replaced`)."""
    events: list[SessionEvent] = []
    open_turn: int | None = None
    damage: tuple[int, int, str] | None = None
    torn: tuple[int, int] | None = None
    os.lseek(fd, 0, os.SEEK_SET)
    # Read through a buffered reader on a dup: closing it must not close ``fd``.
    with os.fdopen(os.dup(fd), "rb") as file:
        header_line = file.readline()
        if not header_line:
            raise damaged(path, 1, "the file is empty (the session was never fully created)")
        header = check_header(header_line, path)
        offset = len(header_line)
        number = 1
        replaced = Replaced(events)
        append = events.append  # the loop runs once per line of a long session: plain style
        for raw in file:
            number += 1
            if raw[-1:] != b"\n":
                torn = (number, offset)
                break
            if damage is None:
                parsed = decode_event(raw, number - 2)
                if isinstance(parsed, str):
                    damage = (number, offset, parsed)
                else:
                    append(parsed)
                    record = parsed.record
                    kind = record.__class__
                    if kind is TurnStart:
                        open_turn = record.turn  # type: ignore[union-attr]
                        replaced.turn_start = parsed.seq
                    elif kind is TurnEnd:
                        open_turn = None
                        replaced.turn_start = None
                    elif kind in COMPACTION and let_go:
                        replaced.fold(parsed)
            elif is_turn_end(raw):
                # A complete turn/end after the damage: the damage is inside a finished turn,
                # and moving it would drop that turn. Refuse rather than guess.
                line, _, why = damage
                raise damaged(
                    path,
                    line,
                    f"{why}; it comes before the complete turn/end on line {number}, "
                    "so dsh will not repair it",
                )
            offset += len(raw)
    if replaced.reached_back:
        return _scan(fd, path, let_go=False)
    return _Scan(header, events, open_turn, damage, torn)


# Reading without a lock: listings and transcripts (``dsh --sessions``, ``dsh --show``).


def _summarised(folders: Iterable[str]) -> list[SessionSummary]:
    """The summaries of the sessions in ``folders``, most recent first (its log's
    modification time, then its id, break ties)."""
    found = []
    for folder in folders:
        for session in _directories(folder):
            summary = summarise_found(Path(session.path, LOG_NAME))
            if summary is not None:
                found.append((summary[0], session.name, summary[1]))
    found.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [summary for _, _, summary in found]


def _directories(path: str | Path) -> list[os.DirEntry[str]]:
    """The subdirectories of ``path`` (links to one included), but the index and other dot
    names; none when it cannot be read."""
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if not e.name.startswith(".") and e.is_dir()]
    except OSError:  # missing, not a directory, unreadable: it holds no sessions
        return []


def _recency(path: Path, status: os.stat_result) -> tuple[int, str]:
    """How recent a session is: its log's modification time, then its id to break ties."""
    return status.st_mtime_ns, path.parent.name
