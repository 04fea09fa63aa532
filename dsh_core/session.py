"""The durable session log: one append-only JSONL file per session (SPEC section 6).

Layout and format::

    $DSH_HOME/sessions/<cwd key>/<session id>/session.jsonl      (0600; directories 0700)
    line 1    {"type":"session","version":1,"id":...,"created":...,"cwd":...}
    line 2..  {"type":...,"seq":0,"time":...,"data":{...}}      seq counts from 0 without gaps

Usage::

    store = SessionStore(Path("~/.dsh").expanduser())
    log = store.create(Path.cwd())
    log.append(TurnStart(turn=1, model="deepseek-v4-flash"), durable=True)  # a typed record
    ...
    log, report = store.open(log.id)       # repairs what a crash left, and says so
    for notice in report.notices:
        ...

Each event is one ``write()`` of a whole line; ``durable=True`` adds an ``fsync``. Loading is
the only place that changes existing bytes, and only at the tail: a torn last line is truncated,
damage after the last complete ``turn/end`` is moved byte for byte into a sidecar file, and a turn
left open is closed by answering the tool calls it left (see
:func:`dsh_core.history.closing_records`) and appending ``turn/end {kind: "interrupted"}``.
Every repair is reported in :class:`LoadReport`; damage anywhere earlier is refused. An open log
holds an exclusive ``flock`` so two processes never interleave their appends. Readers that
must not lock or repair (``--sessions``, ``--show``) use :meth:`SessionStore.summaries` and
:func:`read_log`. The design note is ``docs/notes/2026-11-30-session-log.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from types import TracebackType
from typing import Any

from .chain import error_chain
from .errors import SessionLogError, UsageError
from .events import Record, TurnEnd, TurnStart, parse_record, record_type
from .fileio import fsync_directory
from .history import closing_records

__all__ = [
    "FORMAT_VERSION",
    "LoadReport",
    "SessionEvent",
    "SessionLog",
    "SessionStore",
    "SessionSummary",
    "StoredSession",
    "cwd_key",
    "encode_line",
    "format_time",
    "read_log",
    "summarise_log",
]

logger = logging.getLogger(__name__)
# A library must not print: without this, Python's last-resort handler writes our warnings to
# stderr when the application has not configured logging.
logger.addHandler(logging.NullHandler())

FORMAT_VERSION = 1
"""The format this code writes; logs with a higher version are refused, not guessed at."""

SESSIONS_DIR = "sessions"
LOG_NAME = "session.jsonl"
DAMAGED_SUFFIX = ".damaged-"

_FILE_MODE = 0o600
_DIR_MODE = 0o700
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KEY_NAME_LENGTH = 48
"""Characters of the readable part of a cwd key; the tail of the path says the most."""
_LINE_BREAKS = (("\x85", "\\u0085"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
"""Characters that end a line for str.splitlines() but not for JSON, and their escapes."""
_HEADER_LIMIT = 1 << 16
"""Bytes of line 1 that :meth:`SessionStore.list` reads; a real header is far shorter."""


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One line of the log after the header: a record and where and when it was written."""

    seq: int
    """Position in the log, from 0 without gaps."""
    time: str
    """When it was appended, UTC, ``2026-11-30T09:15:02.123Z``."""
    record: Record
    """What happened: a typed record from :mod:`dsh_core.events`."""

    @property
    def type(self) -> str:
        """The line's type: ``turn/start``, ``user/message``, ..."""
        return record_type(self.record)

    @property
    def data(self) -> dict[str, Any]:
        """The line's payload, as written."""
        return self.record.to_data()

    def to_json(self) -> dict[str, Any]:
        """The whole line as a JSON object: ``{type, seq, time, data}``."""
        return {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What loading a session repaired; empty when the file was whole."""

    notices: tuple[str, ...] = ()
    """One human-readable line per repair, in the order they were made."""
    interrupted_turn: int | None = None
    """The turn this load closed as ``interrupted``, else None."""
    appended: int = 0
    """Events this load appended to close that turn (results for its calls, ``turn/end``)."""


def format_time(moment: datetime) -> str:
    """``2026-11-30T09:15:02.123Z``: UTC with milliseconds; a naive datetime is taken as UTC."""
    moment = _utc(moment)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


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


def encode_line(value: dict[str, Any]) -> bytes:
    """One JSON line, compact, UTF-8, keys in the order the writer built them.

    Parseable line by line by any reader: U+0085, U+2028 and U+2029 are escaped.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"session event is not JSON-serialisable: {error_chain(exc)}") from exc
    # Only JSON strings can hold these, so escaping them is exact; raw, they split the line
    # for readers that use str.splitlines() (NEL, LINE and PARAGRAPH SEPARATOR).
    for char, escape in _LINE_BREAKS:
        if char in text:
            text = text.replace(char, escape)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (undecodable path bytes, a split pair in model output) have no UTF-8
        # form; \u escapes keep the line valid UTF-8 and read back to the same string.
        return (json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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


def _lock(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise SessionLogError(f"session log {path} is in use by another dsh process") from exc


class SessionLog:
    """An open session: its events in memory and its file, locked, ready for appends.

    Made by :class:`SessionStore`, never directly. Not thread-safe: one writer, one thread.
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
        self.events = events
        """Every event, loaded and appended, in ``seq`` order."""
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
        line = encode_line(event.to_json())
        try:
            _write_all(self._fd, line)
            if durable:
                os.fsync(self._fd)
        except OSError as exc:
            self._roll_back(exc)
            raise SessionLogError(f"cannot write session log {self.path}") from exc
        self._size += len(line)
        self.events.append(event)
        if self.on_append is not None:
            self.on_append(event)
        return event

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
        return f"{_utc(self._clock()):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"

    def create(self, cwd: Path) -> SessionLog:
        """Start a new session for ``cwd``: directories, file and header made durable."""
        cwd_text = os.path.abspath(cwd)
        session_id = self._new_id()
        if not _ID_PATTERN.fullmatch(session_id):
            raise UsageError(f"session id {session_id!r} is not a safe directory name")
        created = format_time(self._clock())
        directory = self.root / cwd_key(cwd_text) / session_id
        path = directory / LOG_NAME
        header = {
            "type": "session",
            "version": FORMAT_VERSION,
            "id": session_id,
            "created": created,
            "cwd": cwd_text,
        }
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
            _lock(fd, path)
            _write_all(fd, encode_line(header))
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
        return SessionLog(fd=fd, path=path, header=header, events=[], clock=self._clock)

    def open(self, session_id: str) -> tuple[SessionLog, LoadReport]:
        """Load a session by id, repairing what a crash left (see :class:`LoadReport`).

        Raises SessionLogError for an unknown id, a log in use, damage before the last complete
        turn, or a newer format version.
        """
        return self._load(self.find(session_id))

    def find(self, session_id: str) -> Path:
        """The log of the session ``session_id``, without opening it.

        Raises SessionLogError for an id that is unknown, unsafe, or in two directories.
        """
        found = (
            sorted(self.root.glob(f"*/{session_id}/{LOG_NAME}"))
            if _ID_PATTERN.fullmatch(session_id)
            else []
        )
        if not found:
            raise SessionLogError(f"no session {session_id!r} in {self.root}")
        if len(found) > 1:
            places = ", ".join(str(path) for path in found)
            raise SessionLogError(f"session id {session_id!r} is ambiguous: {places}")
        return found[0]

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
        (see :func:`summarise_log`); the first is the one :meth:`newest` would load. A damaged
        log is listed with what could be read. Raises SessionLogError when the sessions
        directory itself cannot be read; a missing one holds no sessions.
        """
        try:
            if not stat.S_ISDIR(os.stat(self.root).st_mode):
                raise SessionLogError(f"{self.root} is not a directory")
            if cwd is None:
                keys = sorted(self.root.iterdir())
            else:
                keys = [self.root / cwd_key(os.path.abspath(cwd))]
            found = [item for key in keys for item in self._logs(key)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionLogError(f"cannot read the sessions in {self.root}") from exc
        found.sort(key=lambda item: _recency(item[0], item[1]), reverse=True)
        return [summarise_log(path, status) for path, status in found]

    def read(self, session_id: str) -> StoredSession:
        """The session ``session_id`` as its log holds it, read without locking or repairing.

        For readers (``dsh --show``): a session that a running dsh is writing can be read.
        """
        return read_log(self.find(session_id))

    @staticmethod
    def _logs(key_dir: Path) -> Iterator[tuple[Path, os.stat_result]]:
        if not key_dir.is_dir():
            return
        for session_dir in sorted(key_dir.iterdir()):
            path = session_dir / LOG_NAME
            try:
                status = path.stat()
            except (FileNotFoundError, NotADirectoryError):
                continue  # a stray file, or a session still being created
            yield path, status

    def _load(self, path: Path) -> tuple[SessionLog, LoadReport]:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise SessionLogError(f"cannot open session log {path}") from exc
        try:
            _lock(fd, path)
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
                for record in closing[:-1]:
                    log.append(record)
                log.append(closing[-1], durable=True)
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
            damaged = os.pread(fd, size - offset, offset)
            sidecar = self._write_sidecar(path, damaged)
            os.ftruncate(fd, offset)
            os.fsync(fd)
            return (
                f"line {line} of {path} was damaged ({why}); moved it and everything after it "
                f"({len(damaged)} bytes) to {sidecar}"
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

    def _write_sidecar(self, path: Path, damaged: bytes) -> Path:
        stamp = f"{_utc(self._clock()):%Y%m%dT%H%M%S.%f}"[:-3] + "Z"
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
            _write_all(fd, damaged)
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


def _bad(path: Path, line: int, why: str) -> SessionLogError:
    return SessionLogError(f"session log {path} is damaged at line {line}: {why}")


def _check_header(raw: bytes, path: Path) -> dict[str, Any]:
    if not raw.endswith(b"\n"):
        raise _bad(path, 1, "the header line is incomplete (the session was never fully created)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _bad(path, 1, "the header is not JSON") from None
    if not isinstance(header, dict) or header.get("type") != "session":
        raise _bad(path, 1, "the first line is not a session header")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _bad(path, 1, f"the header has no valid format version ({version!r})")
    if version > FORMAT_VERSION:
        raise SessionLogError(
            f"session log {path} is format version {version}, written by a newer dsh; "
            f"this dsh reads version {FORMAT_VERSION}: upgrade dsh to open it"
        )
    for field in ("id", "created", "cwd"):
        if not isinstance(header.get(field), str):
            raise _bad(path, 1, f"the header has no {field}")
    return header


def _parse_event(raw: bytes, seq: int | None) -> SessionEvent | str:
    """The event on one whole line, or what is wrong with it; ``seq`` None: any seq will do."""
    try:
        value = json.loads(raw.decode("utf-8"))  # decode first: loads(bytes) sniffs encodings
    except UnicodeDecodeError:
        return "not UTF-8"
    except ValueError:
        return "not JSON"
    if not isinstance(value, dict):
        return "not a JSON object"
    kind, number, time, data = (value.get(k) for k in ("type", "seq", "time", "data"))
    if not (isinstance(kind, str) and isinstance(time, str) and isinstance(data, dict)):
        return "not an event (type, seq, time, data)"
    if not isinstance(number, int) or isinstance(number, bool) or seq not in (None, number):
        return f"seq {number!r} where {seq} was expected"
    try:
        record = parse_record(kind, data)
    except ValueError as exc:
        return f"a {kind} event whose data is wrong ({error_chain(exc)})"
    return SessionEvent(number, time, record)


def _is_turn_end(raw: bytes) -> bool:
    if b'"turn/end"' not in raw:  # cheap filter before parsing
        return False
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is a ValueError
        return False
    return isinstance(value, dict) and value.get("type") == "turn/end"


def _scan(fd: int, path: Path) -> _Scan:
    """Read the whole log once, line by line, and find where its good part ends."""
    events: list[SessionEvent] = []
    open_turn: int | None = None
    damage: tuple[int, int, str] | None = None
    torn: tuple[int, int] | None = None
    os.lseek(fd, 0, os.SEEK_SET)
    # Read through a buffered reader on a dup: closing it must not close ``fd``.
    with os.fdopen(os.dup(fd), "rb") as file:
        header_line = file.readline()
        if not header_line:
            raise _bad(path, 1, "the file is empty (the session was never fully created)")
        header = _check_header(header_line, path)
        offset = len(header_line)
        number = 1
        for raw in file:
            number += 1
            if not raw.endswith(b"\n"):
                torn = (number, offset)
                break
            if damage is None:
                parsed = _parse_event(raw, len(events))
                if isinstance(parsed, str):
                    damage = (number, offset, parsed)
                else:
                    events.append(parsed)
                    if isinstance(parsed.record, TurnStart):
                        open_turn = parsed.record.turn
                    elif isinstance(parsed.record, TurnEnd):
                        open_turn = None
            elif _is_turn_end(raw):
                # A complete turn/end after the damage: the damage is inside a finished turn,
                # and moving it would drop that turn. Refuse rather than guess.
                line, _, why = damage
                raise _bad(
                    path,
                    line,
                    f"{why}; it comes before the complete turn/end on line {number}, "
                    "so dsh will not repair it",
                )
            offset += len(raw)
    return _Scan(header, events, open_turn, damage, torn)


# Reading without a lock: listings and transcripts (``dsh --sessions``, ``dsh --show``).


def _recency(path: Path, status: os.stat_result) -> tuple[int, str]:
    """How recent a session is: its log's modification time, then its id to break ties."""
    return status.st_mtime_ns, path.parent.name


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session as a listing shows it, read from the head and the tail of its log."""

    id: str
    path: Path
    """The ``session.jsonl`` file."""
    cwd: str | None
    """The working directory it was started in; None when the header cannot be read."""
    updated: datetime
    """When the log was last written (its modification time), UTC."""
    turns: int
    """The number of its last turn (0: no turn yet)."""
    last_end: TurnEnd | None
    """How the last turn ended; None when no turn has ended yet or the last one is open."""
    open: bool
    """The last turn has no ``turn/end``: a running dsh is writing it, or one died (the next
    load closes it as ``interrupted``)."""
    first_user: str | None
    """The beginning of the first user message (at most :data:`FIRST_USER_CHARS` characters),
    None when there is none."""
    damage: str | None = None
    """What could not be read, when something could not."""


FIRST_USER_CHARS = 200
"""Characters of the first user message a summary keeps: enough for one line of a listing."""

_HEAD_BYTES = 1 << 14
"""A log's head, read first: the header, the system prompt and the first user message."""
_HEAD_LIMIT = 1 << 20
"""How far a summary looks for the first user message, behind a very long system prompt."""
_TAIL_BYTES = 1 << 14
"""A log's tail, read first for its last turn; earlier chunks grow (times 4) from there."""
_TAIL_CHUNK_LIMIT = 1 << 20
_TURN_LINE_LIMIT = 1 << 20
"""A turn line longer than this is not read whole (a real one is a few hundred bytes)."""
_PREFIX_BYTES = 1 << 12
"""Bytes of a user message line that are enough for FIRST_USER_CHARS characters."""
# encode_line writes "type" first and compactly, and JSON strings hold no raw newline: these
# patterns find the starts of lines without parsing the lines in between.
_USER_LINE = b'\n{"type":"user/message",'
_TURN_LINE = b'\n{"type":"turn/'
_JSON_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*', re.DOTALL)


def summarise_log(path: Path, status: os.stat_result) -> SessionSummary:
    """What a listing shows of the log at ``path``, reading its head and its tail only.

    Never raises for a damaged or unreadable log: what cannot be read is named in ``damage``.
    """
    session_id = path.parent.name
    updated = datetime.fromtimestamp(status.st_mtime, UTC)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return SessionSummary(
            session_id,
            path,
            None,
            updated,
            0,
            None,
            False,
            None,
            f"cannot read: {error_chain(exc)}",
        )
    problems: list[str] = []
    cwd: str | None = None
    try:
        size = os.fstat(fd).st_size  # it may have grown since ``status``: a dsh is writing
        head = os.pread(fd, _HEAD_BYTES, 0)
        newline = head.find(b"\n")
        try:
            header = _check_header(head[: newline + 1] if newline >= 0 else head, path)
        except SessionLogError as exc:
            problems.append(exc.message)
        else:
            session_id, cwd = header["id"], header["cwd"]
        try:
            first_user = _first_user_text(fd, head, size)
        except ValueError as exc:
            first_user = None
            problems.append(f"its first user message cannot be read ({error_chain(exc)})")
        turns, last_end, is_open = _last_turn(fd, size, head, problems)
        if size and os.pread(fd, 1, size - 1) != b"\n":
            problems.append("its last line is incomplete")
    except OSError as exc:
        return SessionSummary(
            session_id, path, cwd, updated, 0, None, False, None, f"cannot read: {error_chain(exc)}"
        )
    finally:
        os.close(fd)
    damage = "; ".join(problems) if problems else None
    return SessionSummary(
        session_id, path, cwd, updated, turns, last_end, is_open, first_user, damage
    )


def _first_user_text(fd: int, head: bytes, size: int) -> str | None:
    start = _find_line(fd, head, size, _USER_LINE)
    if start is None:
        return None
    if start + _PREFIX_BYTES <= len(head):
        raw = head[start : start + _PREFIX_BYTES]
    else:
        raw = os.pread(fd, _PREFIX_BYTES, start)
    end = raw.find(b"\n")
    if end >= 0:
        value = json.loads(raw[:end].decode("utf-8"))
        text = value.get("data", {}).get("text") if isinstance(value, dict) else None
        if not isinstance(text, str):
            raise ValueError("it has no text")
        return text[:FIRST_USER_CHARS]
    # A long message: decode just the start of its text rather than the whole line.
    return _text_prefix(raw)


def _find_line(fd: int, head: bytes, size: int, pattern: bytes) -> int | None:
    """Where the first line that ``pattern`` starts begins, searching from the head on.

    Reads on in growing chunks (each byte once) up to :data:`_HEAD_LIMIT`.
    """
    position = head.find(pattern)
    if position >= 0:
        return position + 1
    keep = len(pattern) - 1  # a match may straddle two chunks
    base, carry, chunk = len(head), head[-keep:], _HEAD_BYTES * 4
    while base < min(size, _HEAD_LIMIT):
        piece = os.pread(fd, min(chunk, _HEAD_LIMIT - base), base)
        if not piece:
            break
        data = carry + piece
        position = data.find(pattern)
        if position >= 0:
            return base - len(carry) + position + 1
        base, carry, chunk = base + len(piece), data[-keep:], chunk * 4
    return None


def _text_prefix(raw: bytes) -> str:
    """The beginning of the ``text`` string in the first bytes of a ``user/message`` line."""
    data = raw.find(b'"data":')
    key = raw.find(b'"text":"', data) if data >= 0 else -1
    if key < 0:
        raise ValueError("its text is not where it was expected")
    chars = raw[key + len(b'"text":"') :].decode("utf-8", "ignore")  # the cut may split a char
    body = _JSON_STRING_BODY.match(chars)
    text = body.group() if body else ""
    for cut in range(7):  # the cut may split an escape (at most 6 characters: \uXXXX)
        try:
            value = json.loads(f'"{text[: len(text) - cut]}"')
        except ValueError:
            continue
        if isinstance(value, str):
            return value[:FIRST_USER_CHARS]
    raise ValueError("its text is not a JSON string")


def _last_turn(
    fd: int, size: int, head: bytes, problems: list[str]
) -> tuple[int, TurnEnd | None, bool]:
    """(last turn number, its end, whether it is open) from the last ``turn/...`` line.

    Searches backwards from the end, chunk by chunk, for the start of a turn line, so each byte
    is read at most once (``head``, the bytes from 0 already read, is not read again) and no
    line in between is parsed: a long last turn (tool output) costs reading it, no more.
    """
    damaged = False
    end, chunk = size, _TAIL_BYTES
    carry = b""
    """The start of the chunk searched before: a pattern may straddle two chunks."""
    while end > 0:
        start = max(0, end - chunk)
        # A small log is all in its head, already read.
        data = (head[start:end] if end <= len(head) else os.pread(fd, end - start, start)) + carry
        position = data.rfind(_TURN_LINE)
        while position >= 0:
            line = _line_at(fd, start + position + 1, size)
            if line is not None:  # a line still being written (or torn) has no newline yet
                try:
                    record = _parse_line(line)
                except ValueError as exc:
                    if not damaged:
                        problems.append(
                            f"a turn line near its end cannot be read ({error_chain(exc)})"
                        )
                    damaged = True
                else:
                    if isinstance(record, TurnEnd | TurnStart):
                        if damaged:  # a later turn line was unreadable: how it ended is unknown
                            return record.turn, None, False
                        if isinstance(record, TurnEnd):
                            return record.turn, record, False
                        return record.turn, None, True
            position = data.rfind(_TURN_LINE, 0, position)
        carry = data[: len(_TURN_LINE) - 1]
        end, chunk = start, min(chunk * 4, _TAIL_CHUNK_LIMIT)
    return 0, None, False


def _line_at(fd: int, offset: int, size: int) -> bytes | None:
    """The line that starts at ``offset``, without its newline; None when it has none."""
    data = b""
    while offset + len(data) < size and len(data) < _TURN_LINE_LIMIT:
        piece = os.pread(fd, _PREFIX_BYTES, offset + len(data))
        if not piece:
            break
        newline = piece.find(b"\n")
        if newline >= 0:
            return data + piece[:newline]
        data += piece
    return None


def _parse_line(raw: bytes) -> Record:
    value = json.loads(raw.decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    kind, data = value.get("type"), value.get("data")
    if not isinstance(kind, str) or not isinstance(data, dict):
        raise ValueError("not an event")
    return parse_record(kind, data)


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session log as it is on disk, read without locking or repairing it."""

    id: str
    path: Path
    cwd: str | None
    """The working directory it was started in; None when the header cannot be read."""
    events: tuple[SessionEvent, ...]
    """Every event that could be read, in file order."""
    open_turn: int | None
    """A turn started and not ended: a dsh is writing it, or one died."""
    problems: tuple[str, ...]
    """One line per damaged place (file and line named), in file order; empty when whole."""


def read_log(path: Path) -> StoredSession:
    """Read the log at ``path`` as it is: no lock, no repair, damage listed, not fatal.

    Damaged lines are skipped and named in ``problems``, and reading goes on after them, so a
    reader sees everything that can be read. Raises SessionLogError when the file cannot be
    opened or was written by a newer dsh (its lines cannot be trusted to mean what they say).
    """
    try:
        file = path.open("rb")
    except OSError as exc:
        raise SessionLogError(f"cannot read session log {path}") from exc
    events: list[SessionEvent] = []
    problems: list[str] = []
    open_turn: int | None = None
    session_id, cwd = path.parent.name, None
    try:
        with file:
            raw = file.readline()
            try:
                header = _check_header(raw, path)
            except SessionLogError as exc:
                if _format_version(raw) > FORMAT_VERSION:
                    raise
                problems.append(exc.message)
            else:
                session_id, cwd = header["id"], header["cwd"]
            number = 1
            for raw in file:
                number += 1
                if not raw.endswith(b"\n"):
                    problems.append(
                        f"session log {path} ends in an incomplete line (line {number}, "
                        f"{len(raw)} bytes): a write was cut short, or is still going on"
                    )
                    break
                parsed = _parse_event(raw, None)
                if isinstance(parsed, str):
                    problems.append(_bad(path, number, parsed).message)
                    continue
                expected = events[-1].seq + 1 if events else 0
                if parsed.seq != expected:
                    problems.append(
                        _bad(
                            path, number, f"seq {parsed.seq} where {expected} was expected"
                        ).message
                    )
                events.append(parsed)
                if isinstance(parsed.record, TurnStart):
                    open_turn = parsed.record.turn
                elif isinstance(parsed.record, TurnEnd):
                    open_turn = None
    except OSError as exc:
        raise SessionLogError(f"cannot read session log {path}") from exc
    return StoredSession(session_id, path, cwd, tuple(events), open_turn, tuple(problems))


def _format_version(raw: bytes) -> int:
    """The header line's format version, or 0 when it has none that can be read."""
    try:
        version = json.loads(raw.decode("utf-8")).get("version")
    except (ValueError, AttributeError):
        return 0
    return version if isinstance(version, int) and not isinstance(version, bool) else 0
