"""Reading session logs without locking or repairing them: listings and transcripts.

    summary = summarise_log(path, path.stat())   # what ``dsh --sessions`` shows of one log
    mtime_ns, summary = summarise_found(path)    # the same from one open and one fstat
    stored = read_log(path)                      # every readable event, damage listed

For ``dsh --sessions`` and ``dsh --show``: a log that a running dsh is writing, or that a crash
left damaged, is read as it is, and what cannot be read is named, never fatal. A summary reads
only the head and the tail of a log, so listing a thousand long sessions stays fast; every line
it does read goes through the one reader, :func:`~dsh_core.session.lines.decode_event`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..chain import error_chain
from ..errors import SessionLogError
from .events import SessionEvent, TurnEnd, TurnStart, UserText
from .lines import FORMAT_VERSION, check_header, damaged, decode_event, header_version, text_prefix

__all__ = [
    "FIRST_USER_CHARS",
    "SessionSummary",
    "StoredSession",
    "read_log",
    "summarise_found",
    "summarise_log",
]


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


def summarise_log(path: Path, status: os.stat_result) -> SessionSummary:
    """What a listing shows of the log at ``path``, reading its head and its tail only.

    Never raises for a damaged or unreadable log: what cannot be read is named in ``damage``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return _unreadable(path, status, exc)
    try:
        # It may have grown since ``status``: a dsh is writing it.
        return _summarise(path, fd, status, os.fstat(fd).st_size)
    except OSError as exc:
        return _unreadable(path, status, exc)
    finally:
        os.close(fd)


def summarise_found(path: Path) -> tuple[int, SessionSummary] | None:
    """For a walk of the store: the summary of the log at ``path`` and when it was last
    written (``st_mtime_ns``, to sort by), from one ``open`` and one ``fstat``; None when
    there is no log there (a stray file, a session still being created)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # there, but not for us to read: listed as such
        try:
            status = os.stat(path)
        except OSError:
            return None
        return status.st_mtime_ns, _unreadable(path, status, exc)
    try:
        status = os.fstat(fd)
        try:
            return status.st_mtime_ns, _summarise(path, fd, status, status.st_size)
        except OSError as exc:
            return status.st_mtime_ns, _unreadable(path, status, exc)
    finally:
        os.close(fd)


def _unreadable(path: Path, status: os.stat_result, exc: OSError) -> SessionSummary:
    updated = datetime.fromtimestamp(status.st_mtime, UTC)
    why = f"cannot read: {error_chain(exc)}"
    return SessionSummary(path.parent.name, path, None, updated, 0, None, False, None, why)


def _summarise(path: Path, fd: int, status: os.stat_result, size: int) -> SessionSummary:
    """The summary of the open log ``fd`` of ``size`` bytes; OSError when it cannot be read."""
    session_id = path.parent.name
    updated = datetime.fromtimestamp(status.st_mtime, UTC)
    problems: list[str] = []
    cwd: str | None = None
    head = os.pread(fd, _HEAD_BYTES, 0)
    newline = head.find(b"\n")
    try:
        header = check_header(head[: newline + 1] if newline >= 0 else head, path)
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
        event = decode_event(raw[:end])
        if isinstance(event, str):
            raise ValueError(event)
        if not isinstance(event.record, UserText):
            raise ValueError("it is not a user message")
        return event.record.text[:FIRST_USER_CHARS]
    # A long message: decode just the start of its text rather than the whole line.
    return text_prefix(raw, FIRST_USER_CHARS)


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


def _last_turn(
    fd: int, size: int, head: bytes, problems: list[str]
) -> tuple[int, TurnEnd | None, bool]:
    """(last turn number, its end, whether it is open) from the last ``turn/...`` line; a
    last line without its newline is the last of the ``problems`` (its bytes are read here).

    Searches backwards from the end, chunk by chunk, for the start of a turn line, so each byte
    is read at most once (``head``, the bytes from 0 already read, is not read again) and no
    line in between is parsed: a long last turn (tool output) costs reading it, no more.
    """
    torn: list[str] = []
    try:
        return _find_last_turn(fd, size, head, problems, torn)
    finally:
        problems.extend(torn)


def _find_last_turn(
    fd: int, size: int, head: bytes, problems: list[str], torn: list[str]
) -> tuple[int, TurnEnd | None, bool]:
    unreadable = False
    end, chunk = size, _TAIL_BYTES
    carry = b""
    """The start of the chunk searched before: a pattern may straddle two chunks."""
    while end > 0:
        start = max(0, end - chunk)
        # A small log is all in its head, already read.
        data = (head[start:end] if end <= len(head) else os.pread(fd, end - start, start)) + carry
        if end == size and data[-1:] != b"\n":
            torn.append("its last line is incomplete")  # said after what the turn lines say
        position = data.rfind(_TURN_LINE)
        while position >= 0:
            newline = data.find(b"\n", position + 1)
            # The line is in the chunk (usual: turn lines are short), or read on from the file.
            line = (
                data[position + 1 : newline]
                if newline >= 0
                else _line_at(fd, start + position + 1, size)
            )
            # A line still being written (or torn) has no newline yet.
            event = decode_event(line) if line is not None else None
            if isinstance(event, str):
                if not unreadable:
                    problems.append(f"a turn line near its end cannot be read ({event})")
                unreadable = True
            elif event is not None and isinstance(event.record, TurnEnd | TurnStart):
                record = event.record
                if unreadable:  # a later turn line was unreadable: how it ended is unknown
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
                header = check_header(raw, path)
            except SessionLogError as exc:
                if header_version(raw) > FORMAT_VERSION:
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
                parsed = decode_event(raw)
                if isinstance(parsed, str):
                    problems.append(damaged(path, number, parsed).message)
                    continue
                expected = events[-1].seq + 1 if events else 0
                if parsed.seq != expected:
                    problems.append(
                        damaged(
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
