"""The ``glob`` and ``grep`` tools: file names and file contents, over one walk (:mod:`.tree.walk`).

Both skip ``.git`` and what ``.gitignore`` files ignore, never follow a directory symlink, and
say in their result what they could not read. ``glob`` lists files newest first; ``grep`` shows
``path:line:text`` in walk order (name order, a directory's files before its subdirectories).
Both run in a daemon thread, so that the event loop goes on, told to stop when the call is
cancelled (checked between files, and between the 8 MiB pieces of a large file), and left
behind at exit if still busy (:mod:`.stoppable`).

Every pattern is matched in linear time (:mod:`.linear`, RE2; SPEC 10.7), and RE2 releases the
GIL while it searches, so Ctrl-C is seen at once whatever the pattern. ``grep`` searches a
file's bytes as they are (no decoding, one search over the whole piece) and decodes only the
lines it shows; line numbers are counted only around matches; a file (or a piece of one) that
holds none of the literals a match must contain (:func:`~.literals.required_literals`) is not
searched at all. A long walk goes on in forked processes, each taking part of it
(:mod:`.tree.divided`), with the same result.
"""

from __future__ import annotations

import heapq
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..fileio import read_up_to
from ..model.seam import ToolSpec
from ..trust.workspace import Workspace
from . import specs
from .base import Access, Invocation, ToolError
from .linear import LinearRegex, check_length, linear_regex
from .literals import rarest_byte, required_literals
from .paths import Target, check_arguments, list_name, resolve, resolve_path, string_argument
from .read import SNIFF_BYTES
from .specs import MAX_GLOB_PATHS, MAX_GREP_LINE_CHARS, MAX_GREP_MATCHES
from .stoppable import stoppable
from .tree.divided import Division, Findings
from .tree.globs import glob_test, split_pattern
from .tree.walk import Walk, rules_above

__all__ = ["GlobTool", "GrepTool"]

_CHUNK = 8 * 1024 * 1024
"""Files are searched in pieces of about this size (cut at line ends): bounded memory."""

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

_BUFFER = 1024 * 1024
"""A file smaller than this is read first into one buffer, reused: see :func:`_search`."""


class GlobTool:
    """``glob {pattern, path?}``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @property
    def spec(self) -> ToolSpec:
        return specs.GLOB

    def describe(self, arguments: Mapping[str, Any]) -> str:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("invalid arguments: pattern must be a non-empty string")
        path = arguments.get("path")
        return f"{pattern} in {path}" if isinstance(path, str) and path else pattern

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        check_arguments("glob", arguments, ("pattern", "path"))
        pattern = string_argument(arguments, "pattern")
        given = string_argument(arguments, "path", required=False)
        assert pattern is not None
        base, rest = split_pattern(pattern)
        if not rest:
            raise ToolError(
                f"invalid arguments: pattern {pattern!r} names no files; "
                f"add a file pattern, e.g. {pattern.rstrip('/')}/**/*"
            )
        matches = glob_test(rest)
        where = os.path.join(given or "", base) if base else (given or ".")
        target = resolve(self.workspace, where, "path")
        depth = None if "**" in rest else rest.count("/")

        def work(stop: threading.Event) -> str:
            walk, prefix, _ = _begin(self.workspace, target, stop, "glob in")
            found: list[tuple[int, str]] = []
            rules = rules_above(target.real, str(self.workspace.root))
            # Unordered: the result is sorted by time, and sorting each directory costs a third.
            wanted = walk.files(target.real, rules, depth, ordered=False, want=matches)
            for relative, entry in wanted:
                mtime = _mtime(walk, entry)
                if mtime is not None:
                    found.append((-mtime, prefix + relative))  # newest first, then by name
            return _glob_result(found, pattern, target, walk)

        summary = pattern if given is None else f"{pattern} in {given}"
        if not target.inside:
            summary += f" (outside the working directory: {target.real})"
        return Invocation(_access(target), _guarded(summary, target), stoppable(work))


def _glob_result(found: list[tuple[int, str]], pattern: str, target: Target, walk: Walk) -> str:
    """``found``: (minus the mtime, path) of each match."""
    if not found:
        lines = [f"no files match {pattern} in {target.shown}"]
        if "/" not in pattern and "**" not in pattern:
            lines[0] += f" (* stays in one directory: **/{pattern} matches at any depth)"
        return "\n".join(lines + walk.notes())
    newest = heapq.nsmallest(MAX_GLOB_PATHS, found)
    lines = [list_name(path) for _, path in newest]
    if len(found) > len(newest):
        lines.append(
            f"[{len(newest)} of {len(found):,} matching files shown, newest first; narrow the "
            "pattern or path for the rest]"
        )
    return "\n".join(lines + walk.notes())


def _mtime(walk: Walk, entry: os.DirEntry[str]) -> int | None:
    """When the file last changed; None for a symlink that leads to a directory or nowhere."""
    try:
        if entry.is_symlink():
            if walk.barrier(entry) is not None:  # listed by its name; where it leads is not seen
                return entry.stat(follow_symlinks=False).st_mtime_ns
            status = entry.stat()
            return status.st_mtime_ns if stat.S_ISREG(status.st_mode) else None
        return entry.stat(follow_symlinks=False).st_mtime_ns
    except OSError:
        return None


class GrepTool:
    """``grep {pattern, path?, glob?}``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @property
    def spec(self) -> ToolSpec:
        return specs.GREP

    def describe(self, arguments: Mapping[str, Any]) -> str:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("invalid arguments: pattern must be a non-empty string")
        text = f"/{pattern}/"
        path = arguments.get("path")
        if isinstance(path, str) and path:
            text += f" in {path}"
        files = arguments.get("glob")
        if isinstance(files, str) and files:
            text += f" ({files})"
        return text

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        check_arguments("grep", arguments, ("pattern", "path", "glob"))
        pattern = string_argument(arguments, "pattern")
        files = string_argument(arguments, "glob", required=False)
        assert pattern is not None
        check_length(pattern, "pattern")
        regex = linear_regex(pattern, "pattern", multiline=True)
        needles = required_literals(pattern)
        name_filter = None if files is None else glob_test(files, "glob")
        by_path = files is not None and "/" in files

        def wanted(relative: str) -> bool:
            assert name_filter is not None
            return name_filter(relative if by_path else relative.rpartition("/")[2])

        target = resolve_path(self.workspace, arguments, "path", default=".")

        def work(stop: threading.Event) -> str:
            walk, prefix, one_file = _begin(self.workspace, target, stop, "search", True)
            found = Findings(walk)
            if one_file:  # named by the call: searched even if ignored
                name = os.path.basename(target.real)
                if name_filter is None or wanted(name):
                    with walk.one_file(target.real) as path:  # not through a swapped link
                        _search(path, regex, needles, target.shown, found, walk)
            else:
                rules = rules_above(target.real, str(self.workspace.root))
                choose = None if name_filter is None else wanted
                buffer = bytearray(_BUFFER)
                # A long walk goes on in several processes (:mod:`.tree.divided`), all in this loop.
                with Division(walk, found, regex, target.real) as division:
                    walking = walk.files(target.real, rules, want=choose, sharing=division)
                    for relative, entry in walking:
                        if stop.is_set():  # cancelled: the answer is no longer awaited
                            break
                        if entry.is_symlink():
                            if (why := walk.barrier(entry)) is not None:
                                walk.skip(why, prefix + relative)
                                continue
                            if not _leads_to_a_file(entry):  # a directory, a FIFO: nothing
                                continue
                        name, held = walk.reach(entry)  # in the directory listed, not a swap
                        shown = prefix + relative
                        if _search(name, regex, needles, shown, found, walk, held, buffer):
                            break
            return _grep_result(found, pattern, target, walk)

        summary = f"/{pattern}/ in {target.summary}" + (f" ({files})" if files else "")
        return Invocation(_access(target), _guarded(summary, target), stoppable(work))


def _access(target: Target) -> Access:
    """A walk from ``target``: in a credential location, it needs a yes each time."""
    return Access("read", target.outside, protected=target.guarded(writing=False))


def _guarded(summary: str, target: Target) -> str:
    return f"{summary} (credentials: {target.credentials})" if target.credentials else summary


def _grep_result(found: list[str], pattern: str, target: Target, walk: Walk) -> str:
    if not found:
        return "\n".join([f"no matches for /{pattern}/ in {target.shown}", *walk.notes()])
    lines = found[:MAX_GREP_MATCHES]
    if len(found) > MAX_GREP_MATCHES:
        lines.append(
            f"[stopped at {MAX_GREP_MATCHES} matches; there are more: narrow the pattern, "
            "path or glob]"
        )
    return "\n".join(lines + walk.notes())


def _leads_to_a_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _search(
    path: str,
    regex: LinearRegex,
    needles: tuple[bytes, ...],
    shown: str,
    found: list[str],
    walk: Walk,
    dir_fd: int | None = None,
    buffer: bytearray | None = None,
) -> bool:
    """Add ``path``'s matching lines to ``found``; True once it holds one more than the cap, or
    when the walk was told to stop.

    ``needles``: a match holds one of them (() when unknown): a piece that holds none is not
    searched. ``dir_fd``: the directory the walk holds ``path`` in. ``buffer``: where a file
    smaller than it is read first, reused from file to file.
    """
    try:
        fd = os.open(path, _OPEN, dir_fd=dir_fd)
    except OSError:
        walk.unreadable.append(shown)
        return False
    try:
        # The size from lseek, not fstat: for a small file, making a stat_result costs a fifth
        # of its whole search. Only regular files come here (the walk's file type, a link's
        # target checked, the one file named checked); one swapped since for something else
        # fails to seek or to read, and is reported.
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
        except OSError:  # a /proc file without an end: read what it gives
            size = 0
        data: bytes | None = None
        if buffer is not None and 0 < size < len(buffer):
            # Into the walk's buffer: a file that is binary or holds none of the literals (most
            # of them) never becomes a bytes object.
            got = os.preadv(fd, (buffer,), 0)
            if got == size:  # else it changed since: read as below
                if buffer.find(b"\0", 0, min(got, SNIFF_BYTES)) >= 0:
                    walk.binary += 1
                    return False
                if needles and not _buffer_holds_any(buffer, got, needles):
                    return False
                with memoryview(buffer) as view:
                    data = view[:got].tobytes()
        if data is None:
            # Not _CHUNK for a small file: that allocates (and frees) 8 MiB each time. A /proc
            # file says it is empty, and is not: SNIFF_BYTES of it, for the NUL test.
            data = os.pread(fd, min(_CHUNK, size + 1 if size else SNIFF_BYTES), 0)
        if data.find(b"\0", 0, SNIFF_BYTES) >= 0:
            walk.binary += 1
            return False
        whole = len(data) == size
        if whole and needles and not _holds_any(data, needles):
            return False
        name = ""
        line = 1
        if whole:  # most files: one piece
            pieces: Iterable[tuple[bytes, bool]] = ((data, True),)
        else:
            os.lseek(fd, len(data), os.SEEK_SET)
            pieces = _pieces(fd, data)
        for piece, last in pieces:
            if walk.stop.is_set():
                return True
            # A piece is searched alone (a match never spans two): one without the literals
            # holds no match. A whole file was tested above.
            if whole or not needles or _holds_any(piece, needles):
                for number, shown_line in _matching_lines(regex, piece, line):
                    name = name or list_name(shown)
                    found.append(f"{name}:{number}:{shown_line}")
                    if len(found) > MAX_GREP_MATCHES:
                        return True
            if not last:
                line += piece.count(b"\n")
    except OSError:
        walk.unreadable.append(shown)
    finally:
        os.close(fd)
    return False


def _pieces(fd: int, data: bytes) -> Iterator[tuple[bytes, bool]]:
    """The file in pieces of about :data:`_CHUNK` bytes, each ending at a line end, starting
    with ``data`` (read already, not all of it), each with whether it is the last."""
    carry = data
    while True:
        block = read_up_to(fd, _CHUNK)
        if not block:
            yield carry, True
            return
        data = carry + block
        cut = data.rfind(b"\n") + 1
        if cut == 0:  # one line longer than a piece: search it in parts
            cut = len(data)
        yield data[:cut], False
        carry = data[cut:]


def _matching_lines(regex: LinearRegex, data: bytes, first: int) -> Iterator[tuple[int, str]]:
    """(line number, line as shown) for each line where a match starts.

    One search runs over the whole piece; lines are found (and counted) only around matches.
    """
    position = 0
    counted = 0
    number = first
    end = len(data)
    while position <= end:
        span = regex.search(data, position)
        if span is None:
            return
        start = span[0]
        if start == end and (end == 0 or data[end - 1] == _NEWLINE):
            return  # an empty match after the last line: there is no line there
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", start)
        if line_end < 0:
            line_end = end
        number += data.count(b"\n", counted, line_start)
        counted = line_start
        yield number, _cut_line(data, line_start, line_end, start)
        position = line_end + 1


_NEWLINE = ord("\n")


def _holds_any(data: bytes, needles: tuple[bytes, ...]) -> bool:
    return any(needle in data for needle in needles)


def _buffer_holds_any(buffer: bytearray, end: int, needles: tuple[bytes, ...]) -> bool:
    """Whether ``buffer[:end]`` holds one of ``needles`` (not copied).

    Each needle's rarest byte is looked for first (:func:`~.literals.rarest_byte`): most files
    do not hold it, and where one does, the needle is looked for from there on.
    """
    for needle in needles:
        at = rarest_byte(needle)
        first = buffer.find(needle[at], at, end)
        if first >= 0 and buffer.find(needle, first - at, end) >= 0:
            return True
    return False


def _cut_line(data: bytes, line_start: int, line_end: int, match_start: int) -> str:
    line = data[line_start:line_end].removesuffix(b"\r").decode("utf-8", "replace")
    if len(line) <= MAX_GREP_LINE_CHARS:
        return line
    at = len(data[line_start:match_start].decode("utf-8", "replace"))
    begin = max(0, min(at - MAX_GREP_LINE_CHARS // 4, len(line) - MAX_GREP_LINE_CHARS))
    piece = line[begin : begin + MAX_GREP_LINE_CHARS]
    before = "… " if begin else ""
    after = " …" if begin + MAX_GREP_LINE_CHARS < len(line) else ""
    return f"{before}{piece}{after} [line cut: {len(line):,} characters]"


def _begin(
    workspace: Workspace, target: Target, stop: threading.Event, verb: str, files_too: bool = False
) -> tuple[Walk, str, bool]:
    """The walk for ``target``, the prefix of the paths it shows, and whether ``target`` is one
    file (only when ``files_too``; else a file is a ToolError, as is anything not found)."""
    root = str(workspace.root)
    allowed = (root,) if target.inside else (root, target.real)
    walk = Walk(stop, allowed, workspace.credentials)
    try:
        status = os.stat(target.real)
    except OSError as exc:
        raise ToolError(f"cannot {verb} {target.shown}") from exc
    if stat.S_ISREG(status.st_mode) and files_too:
        return walk, "", True
    if not stat.S_ISDIR(status.st_mode):
        what = "a directory or a regular file" if files_too else "a directory"
        raise ToolError(f"cannot {verb} {target.shown}: it is not {what}")
    if target.inside:
        relative = os.path.relpath(target.real, root)
        return walk, ("" if relative == "." else relative + "/"), False
    return walk, target.shown.rstrip("/") + "/", False
