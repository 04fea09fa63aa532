"""The ``read`` tool: a text file as numbered lines, a bounded piece per call.

    [tool read] src/app.py
         1	import os
         2	...
    [read stopped at line 2,000 of 5,123 (2,000-line limit); read on with offset=2001]

What counts as text: no NUL byte in the first 8 KiB, and those 8 KiB valid UTF-8 (git's and
grep's NUL rule, plus the encoding every model edit assumes). A later byte that is not UTF-8 is
shown as U+FFFD, with a note. A file is streamed: a 2 GB file costs what the lines shown cost.
Only regular files are opened, and never in a way that can block (:mod:`.regular`).
"""

from __future__ import annotations

import codecs
import os
import threading
from collections.abc import Mapping
from typing import IO, Any

from ..fileio import format_size
from ..model.seam import ToolSpec
from ..trust.workspace import Fingerprint, Workspace
from . import specs
from .base import Access, Invocation, ToolError
from .paths import Target, check_arguments, counted, display_path, int_argument, resolve_path
from .regular import open_regular
from .specs import MAX_LINE_CHARS, MAX_LINES, MAX_OUTPUT_BYTES
from .stoppable import stoppable

__all__ = ["SNIFF_BYTES", "ReadTool", "read_text"]

SNIFF_BYTES = 8192
"""How much of a file's start decides whether it is text (``grep`` skips by the same rule)."""
LONG_LINE_BYTES = 1024 * 1024
"""How far a cut line is read to find its end; beyond this, reading stops in that line (a 2 GB
file without a line break must not be read to its end to show 2,000 characters)."""
COUNT_REST_BYTES = 8 * 1024 * 1024
"""When reading stops, lines left are counted if this much or less is left (a fast scan)."""

MAX_SKIP_BYTES = 1024 * 1024 * 1024
"""How far into a file ``read`` looks for the line to start from: past it, the call says to
grep. (A 50 GB file of holes read to its end took minutes.)"""

_BLOCK = 64 * 1024
_SKIP_BLOCK = 1024 * 1024
"""Passing lines, a larger block: a fifth of the time per GiB of 64 KiB blocks."""
_LINE_BYTES = MAX_LINE_CHARS * 4 + 4
"""Bytes read of one line: enough for MAX_LINE_CHARS characters of any UTF-8 width."""


class ReadTool:
    """``read {file_path, offset?, limit?}``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @property
    def spec(self) -> ToolSpec:
        return specs.READ

    def describe(self, arguments: Mapping[str, Any]) -> str:
        path = arguments.get("file_path")
        if not isinstance(path, str) or not path:
            raise ToolError("invalid arguments: file_path must be a non-empty string")
        shown = display_path(self.workspace.root, path)
        offset = arguments.get("offset")
        if isinstance(offset, int) and not isinstance(offset, bool) and offset > 1:
            return f"{shown} from line {offset}"
        return shown

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        check_arguments("read", arguments, ("file_path", "offset", "limit"))
        target = resolve_path(self.workspace, arguments, "file_path")
        # offset 0 is read as 1: models often count from 0, and nothing is lost by it.
        offset = max(1, int_argument(arguments, "offset", 1, minimum=0))
        limit = int_argument(arguments, "limit", MAX_LINES, minimum=1)

        def work(stop: threading.Event) -> str:
            return read_text(self.workspace, target, offset, limit, stop)

        summary = target.described(writing=False)
        if offset > 1:
            summary += f" from line {offset}"
        access = Access("read", target.outside, protected=target.guarded(writing=False))
        # A file of a loaded skill, or a whole output dsh saved and named in this session (a
        # stub or a cut result points the model at it): no question, also on a pipe.
        if self.workspace.in_skill(target.real) or self.workspace.names_output(target.real):
            access = Access("read")
        # In a thread of its own: an offset deep into a huge file means reading up to it, and
        # Ctrl-C must not wait for that (nothing is left half done: it only reads).
        return Invocation(access, summary, stoppable(work, name="dsh-read"))


def read_text(
    workspace: Workspace,
    target: Target,
    offset: int,
    limit: int,
    stop: threading.Event | None = None,
) -> str:
    """What ``read`` answers; records the file in the session's read tracker. ``stop``, once
    set, ends the reading at its next block (the call was cancelled)."""
    fd, status = open_regular(target, "read")
    with open(fd, "rb", buffering=_BLOCK) as file:
        try:
            _check_text(target, os.pread(fd, SNIFF_BYTES, 0))
            text = _numbered(target, file, status, offset, limit, stop or threading.Event())
        except OSError as exc:
            raise ToolError(f"cannot read {target.shown}") from exc
    workspace.read_files.record(target.real, Fingerprint.of(status))
    return text


def _check_text(target: Target, head: bytes) -> None:
    nul = head.find(b"\0")
    if nul >= 0:
        raise ToolError(
            f"cannot read {target.shown}: it is a binary file (a NUL byte at offset {nul})"
        )
    try:
        # final=False: a character cut by the 8 KiB boundary is not an error.
        _decoder().decode(head, final=len(head) < SNIFF_BYTES)
        return
    except UnicodeDecodeError as exc:
        at = exc.start
    # Raised out here: the codec's own message would only repeat this one in the chain.
    raise ToolError(
        f"cannot read {target.shown}: it is not UTF-8 text (byte 0x{head[at]:02x} at offset "
        f"{at}); it may be binary, or text in another encoding"
    )


def _numbered(
    target: Target,
    file: IO[bytes],
    status: os.stat_result,
    offset: int,
    limit: int,
    stop: threading.Event,
) -> str:
    if status.st_size and offset - 1 > status.st_size:  # (a /proc file says it is empty)
        raise ToolError(
            f"cannot read {target.shown} from line {offset:,}: it has at most "
            f"{counted(status.st_size, 'line')} ({format_size(status.st_size)})"
        )
    passed = _skip_lines(file, offset - 1, stop)
    if passed < 0:
        raise ToolError(
            f"cannot read {target.shown} from line {offset:,}: its first "
            f"{format_size(MAX_SKIP_BYTES)} hold {counted(-passed - 1, 'line')}, and read looks "
            "no further for the line to start from; grep finds text anywhere in a file this large"
        )
    if passed == 0 and offset > 1:  # not one byte to pass
        return f"[{target.shown} is empty]"
    shown: list[str] = []
    size = 0
    replaced = False
    number = offset
    stopped_by = ""
    end_of_shown = file.tell()
    while passed == offset - 1:
        raw = file.readline(_LINE_BYTES)
        if not raw:
            break
        if len(shown) == min(limit, MAX_LINES):
            stopped_by = f"limit={limit}" if limit < MAX_LINES else f"{MAX_LINES:,}-line limit"
            break
        line, line_size, bad, endless = _line(file, raw)
        replaced = replaced or bad
        size += line_size
        if size > MAX_OUTPUT_BYTES:
            stopped_by = "50 KiB output limit"
            break
        shown.append(f"{number:>6}\t{line}")
        if endless:
            rest = format_size(status.st_size - file.tell())
            shown.append(
                f"[read stopped inside line {number:,}: no line break in its first "
                f"{format_size(LONG_LINE_BYTES)}, and {rest} more follow; this is no file to "
                "read by lines: grep finds text in it]"
            )
            break
        number += 1
        end_of_shown = file.tell()
    if not shown:
        if offset == 1:
            return f"[{target.shown} is empty]"
        raise ToolError(
            f"cannot read {target.shown} from line {offset}: it has only {counted(passed, 'line')}"
        )
    if stopped_by:
        shown.append(_read_on(file, status, number - 1, end_of_shown, stopped_by))
    if replaced:
        shown.append("[some bytes in these lines are not valid UTF-8; they are shown as \ufffd]")
    return "\n".join(shown)


def _skip_lines(file: IO[bytes], count: int, stop: threading.Event) -> int:
    """Move past ``count`` lines without holding them; how many lines were passed (fewer when
    the file ends first, a last line without a newline included), or ``-1 - passed`` when
    :data:`MAX_SKIP_BYTES` were read first. ToolError once ``stop`` is set."""
    passed = 0
    skipped = 0
    open_line = False  # bytes after the last newline passed: a line without its newline yet
    while passed < count:
        if stop.is_set():
            raise ToolError("read was stopped")  # the call was cancelled: nobody reads this
        if skipped >= MAX_SKIP_BYTES:
            return -1 - passed
        block = file.read(_SKIP_BLOCK)
        skipped += len(block)
        if not block:
            return passed + open_line
        newlines = block.count(b"\n")
        if passed + newlines < count:
            passed += newlines
            open_line = not block.endswith(b"\n")
            continue
        position = -1
        for _ in range(count - passed):
            position = block.index(b"\n", position + 1)
        file.seek(position + 1 - len(block), os.SEEK_CUR)
        return count
    return passed


def _line(file: IO[bytes], raw: bytes) -> tuple[str, int, bool, bool]:
    """A line as shown; what it adds to the output (number, tab, text, newline: UTF-8 bytes,
    about); whether bytes in it were not UTF-8; whether it has no end in sight (see
    :data:`LONG_LINE_BYTES`). Reads past a long line."""
    if len(raw) <= MAX_LINE_CHARS and raw.endswith(b"\n"):
        try:  # the common line: short, whole, UTF-8
            return raw[:-1].decode("utf-8").removesuffix("\r"), len(raw) + 7, False, False
        except UnicodeDecodeError:
            pass
    length = len(raw)
    cut = len(raw) == _LINE_BYTES and not raw.endswith(b"\n")
    endless = False
    while cut:
        if length >= LONG_LINE_BYTES:
            endless = True
            break
        more = file.readline(min(_BLOCK, LONG_LINE_BYTES - length))
        length += len(more)
        if not more or more.endswith(b"\n"):
            break
    try:
        # A cut line may end inside a character: final=False leaves it out.
        text = _decoder().decode(raw, final=not cut)
        bad = False
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        bad = True
    text = text.removesuffix("\n").removesuffix("\r")
    if endless:
        text = f"{text[:MAX_LINE_CHARS]} … [line cut: no line break in {length:,} bytes]"
    elif cut or len(text) > MAX_LINE_CHARS:
        text = f"{text[:MAX_LINE_CHARS]} … [line cut: {length:,} bytes in all]"
    return text, len(text.encode("utf-8", "replace")) + 8, bad, endless


def _decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")()


def _read_on(
    file: IO[bytes], status: os.stat_result, last: int, end_of_shown: int, stopped_by: str
) -> str:
    """The marker that ends a cut read: where it stopped, why, and the offset to go on from."""
    rest = status.st_size - end_of_shown
    if rest <= COUNT_REST_BYTES:
        file.seek(end_of_shown)
        where = f"line {last:,} of {last + _count_lines(file):,}"
    else:
        where = f"line {last:,} ({format_size(rest)} more follow)"
    return f"[read stopped at {where} ({stopped_by}); read on with offset={last + 1}]"


def _count_lines(file: IO[bytes]) -> int:
    lines = 0
    block = b""
    while chunk := file.read(_BLOCK):
        lines += chunk.count(b"\n")
        block = chunk
    return lines + (1 if block and not block.endswith(b"\n") else 0)
