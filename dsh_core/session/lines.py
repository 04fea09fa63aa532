"""The line format of a session log: writing a line, and the one reader of every line.

    line 1    {"type":"session","version":1,"id":...,"created":...,"cwd":...}
    line 2..  {"type":...,"seq":0,"time":...,"data":{...}}      seq counts from 0 without gaps

Pure functions over bytes, no I/O: the writer (:mod:`.log`), the loader that repairs
(:mod:`.store`) and the readers that do not (:mod:`.catalogue`) all go through
:func:`decode_event`, so a line means the same thing to each of them. A line's ``data`` is read
by :func:`dsh_core.session.events.parse_record`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..chain import error_chain
from ..errors import SessionLogError, UsageError
from ..records import maker
from .events import SessionEvent, parse_record

__all__ = [
    "FORMAT_VERSION",
    "check_header",
    "damaged",
    "decode_event",
    "encode_line",
    "encode_line_parts",
    "format_time",
    "header_version",
    "is_turn_end",
    "text_prefix",
    "utc",
]

FORMAT_VERSION = 1
"""The format this code writes; logs with a higher version are refused, not guessed at."""

_LINE_BREAKS = (("\x85", "\\u0085"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
"""Characters that end a line for str.splitlines() but not for JSON, and their escapes."""
_JSON_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*', re.DOTALL)
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner that json.loads runs, without its checks around it (see decode_event)."""
_EVENT = maker(SessionEvent)


def format_time(moment: datetime) -> str:
    """``2026-11-30T09:15:02.123Z``: UTC with milliseconds; a naive datetime is taken as UTC."""
    moment = utc(moment)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def encode_line(value: dict[str, Any], *, ascii: bool = False) -> bytes:
    """One JSON line, compact, UTF-8, keys in the order the writer built them.

    Parseable line by line by any reader: U+0085, U+2028 and U+2029 are escaped. With
    ``ascii`` every character that is not printable ASCII is a ``\\u`` escape (for a
    terminal, where a C1 control or a bidi override would act on the screen).
    """
    try:
        text = json.dumps(value, ensure_ascii=ascii, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"session event is not JSON-serialisable: {error_chain(exc)}") from exc
    if ascii:  # DEL is the one control character JSON leaves raw
        return (text.replace("\x7f", "\\u007f") + "\n").encode()
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


LONG_STRING = 1 << 20
"""Characters from which a string in an event is encoded a slice at a time
(:func:`encode_line_parts`)."""
_COMPACT = (",", ":")
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_line_parts(value: dict[str, Any], *, slice_chars: int = LONG_STRING) -> Iterator[bytes]:
    """:func:`encode_line`'s bytes, in parts: a string of ``slice_chars`` or more (a long
    answer) is encoded a slice at a time.

    The whole line at once costs twice the answer again (``json.dumps``' str, then its UTF-8);
    in slices it costs a slice. Every other value is encoded as ``json.dumps`` encodes it
    nested, so the bytes are the same; what cannot be encoded fails before the first part.
    """
    pieces: list[str | _Long] = []
    try:
        long = _collect(value, pieces, slice_chars, ascii=False)
    except _NotStrKey:
        long = False
    if not long:
        yield encode_line(value)  # nothing long, or keys json.dumps would convert: one part
        return
    # A lone surrogate has no UTF-8 form: the whole line in \u escapes, as encode_line does.
    ascii = any(
        _has_surrogate(piece.text if isinstance(piece, _Long) else piece) for piece in pieces
    )
    if ascii:
        pieces.clear()
        _collect(value, pieces, slice_chars, ascii=True)
    for piece in pieces:
        if isinstance(piece, str):
            yield _encoded(piece, ascii)
            continue
        text = piece.text
        for start in range(0, len(text), slice_chars):
            part = json.dumps(text[start : start + slice_chars], ensure_ascii=ascii)
            yield _encoded(part[1:-1], ascii)
    yield b"\n"


class _NotStrKey(Exception):
    """A dict key json.dumps would convert: :func:`encode_line` writes that line whole."""


class _Long:
    """A string to encode in slices, between the quotes :func:`_collect` wrote around it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _collect(value: Any, pieces: list[str | _Long], slice_chars: int, *, ascii: bool) -> bool:
    """Append ``value``'s JSON to ``pieces``, long strings as :class:`_Long`; whether there was
    one. Raises :class:`_NotStrKey` for a key that is not a str."""
    if isinstance(value, str) and len(value) >= slice_chars:
        pieces += ['"', _Long(value), '"']
        return True
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise _NotStrKey
        found = False
        pieces.append("{")
        for number, (key, item) in enumerate(value.items()):
            pieces.append(("," if number else "") + json.dumps(key, ensure_ascii=ascii) + ":")
            found = _collect(item, pieces, slice_chars, ascii=ascii) or found
        pieces.append("}")
        return found
    if isinstance(value, list | tuple):
        found = False
        pieces.append("[")
        for number, item in enumerate(value):
            if number:
                pieces.append(",")
            found = _collect(item, pieces, slice_chars, ascii=ascii) or found
        pieces.append("]")
        return found
    try:
        pieces.append(json.dumps(value, ensure_ascii=ascii, separators=_COMPACT))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"session event is not JSON-serialisable: {error_chain(exc)}") from exc
    return False


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _encoded(text: str, ascii: bool) -> bytes:
    if ascii:
        return text.encode()
    for char, escape in _LINE_BREAKS:  # as encode_line does, a piece at a time
        if char in text:
            text = text.replace(char, escape)
    return text.encode("utf-8")


def damaged(path: Path, line: int, why: str) -> SessionLogError:
    """The error for a damaged line: it names the file and the line."""
    return SessionLogError(f"session log {path} is damaged at line {line}: {why}")


def check_header(raw: bytes, path: Path) -> dict[str, Any]:
    """The header on line 1 (with its newline), checked; SessionLogError says what is wrong."""
    if not raw.endswith(b"\n"):
        raise damaged(
            path, 1, "the header line is incomplete (the session was never fully created)"
        )
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise damaged(path, 1, "the header is not JSON") from None
    if not isinstance(header, dict) or header.get("type") != "session":
        raise damaged(path, 1, "the first line is not a session header")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise damaged(path, 1, f"the header has no valid format version ({version!r})")
    if version > FORMAT_VERSION:
        raise SessionLogError(
            f"session log {path} is format version {version}, written by a newer dsh; "
            f"this dsh reads version {FORMAT_VERSION}: upgrade dsh to open it"
        )
    for field in ("id", "created", "cwd"):
        if not isinstance(header.get(field), str):
            raise damaged(path, 1, f"the header has no {field}")
    return header


def header_version(raw: bytes) -> int:
    """The header line's format version, or 0 when it has none that can be read."""
    value = _json_object(raw)
    version = value.get("version") if isinstance(value, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def decode_event(raw: bytes, seq: int | None = None) -> SessionEvent | str:
    """The event on one whole line, or what is wrong with it; ``seq`` None: any seq will do."""
    # The common line, ``{...}\n`` as the writer wrote it (or without its newline, as a
    # listing cuts it), goes straight to the C scanner: a long resume decodes tens of
    # thousands, and json.loads' checks around it cost a third of the parse. Anything else
    # (leading blanks, a bad byte, trailing text) takes the one way through _json_object, so
    # it is judged, and worded, as it always was.
    value: Any = None
    try:
        text = raw.decode("utf-8")
        value, end = _SCAN(text, 0)
        whole = end == len(text) or (end == len(text) - 1 and text[end] == "\n")
        if not whole or value.__class__ is not dict:
            value = None
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
        value = None
    if value is None:
        value = _json_object(raw)
        if isinstance(value, str):
            return value
    get = value.get
    kind, number, time, data = get("type"), get("seq"), get("time"), get("data")
    # Exact classes first (what the scanner makes, and cheaper); then the rule in full.
    if not (kind.__class__ is str and time.__class__ is str and data.__class__ is dict) and not (
        isinstance(kind, str) and isinstance(time, str) and isinstance(data, dict)
    ):
        return "not an event (type, seq, time, data)"
    if (number.__class__ is not int or (seq is not None and seq != number)) and (
        not isinstance(number, int) or isinstance(number, bool) or seq not in (None, number)
    ):
        return f"seq {number!r} where {seq} was expected"
    try:
        record = parse_record(kind, data)
    except ValueError as exc:
        return f"a {kind} event whose data is wrong ({error_chain(exc)})"
    return _EVENT(number, time, record)


def is_turn_end(raw: bytes) -> bool:
    """Whether the line is a ``turn/end`` (whatever its data): where a finished turn ends."""
    if b'"turn/end"' not in raw:  # cheap filter before parsing
        return False
    value = _json_object(raw)
    return isinstance(value, dict) and value.get("type") == "turn/end"


def text_prefix(raw: bytes, limit: int) -> str:
    """The first ``limit`` characters of the ``text`` of a line of which only the start was read.

    For a listing's first user message, so that a long one (a whole diff) costs a few KiB.
    ``ValueError`` says why it cannot be read.
    """
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
            return value[:limit]
    raise ValueError("its text is not a JSON string")


def _json_object(raw: bytes) -> dict[str, Any] | str:
    """The JSON object on a line, or what is wrong with it."""
    try:
        value = json.loads(raw.decode("utf-8"))  # decode first: loads(bytes) sniffs encodings
    except UnicodeDecodeError:
        return "not UTF-8"
    except ValueError:
        return "not JSON"
    except RecursionError:  # a hostile line of ten thousand "[": it is no event either
        return "not JSON (nested too deeply)"
    return value if isinstance(value, dict) else "not a JSON object"
