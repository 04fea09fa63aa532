"""The ``write`` and ``edit`` tools: whole files and exact replacements, atomically.

Both change only a file read in this session and unchanged on disk since (checked when the call
is prepared, and again just before the new file takes the old one's place), so a change made
meanwhile by the person or another program is never overwritten unseen. A new file needs no
read; ``write`` creates missing parent directories.

The new content goes to a temporary file in the same directory, is fsynced, and renamed over
the old name, then the directory is fsynced: a crash leaves the old file or the new one, never
half of one. The old file's permission bits (and owner, where allowed) are kept; a new file
gets ``0o666`` less the umask.

A path is checked with its symlinks followed, so a write through a symlink changes the file it
points to (and is judged by it: ``notes.md -> .git/config`` is protected). The write itself follows
none (SPEC 10.11): the directory is opened by the resolved path without following a symlink
(:mod:`dsh_core.trust.beneath`), and the temporary file and the rename happen in that open
directory, so a symlink swapped in after the check is refused, never followed. A file with more than
one name (a hard link) is refused: another of its names may be outside the working directory.

The approval question shows a unified diff (:attr:`Invocation.preview`, from :mod:`.diff`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Mapping
from typing import Any

from ..fileio import format_size, fsync_descriptor
from ..model.seam import ToolSpec
from ..trust.beneath import open_directory
from ..trust.workspace import Fingerprint, Workspace
from . import specs
from .base import Access, Invocation, ToolError, ToolOutput, count_lines
from .diff import unified_diff
from .paths import (
    Target,
    bool_argument,
    check_arguments,
    counted,
    display_path,
    resolve_path,
    string_argument,
)
from .regular import check_regular, check_unchanged, open_regular
from .specs import MAX_EDIT_BYTES

__all__ = ["EditTool", "WriteTool", "write_atomically"]


class WriteTool:
    """``write {file_path, content}``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @property
    def spec(self) -> ToolSpec:
        return specs.WRITE

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return _describe_path(self.workspace, arguments)

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        check_arguments("write", arguments, ("file_path", "content"))
        target = resolve_path(self.workspace, arguments, "file_path")
        content = string_argument(arguments, "content", empty=True)
        assert content is not None
        data = _encode(content, "content")
        return _path_first(target, lambda: self._prepare(target, content, data))

    def _prepare(self, target: Target, content: str, data: bytes) -> Invocation:
        before = _existing(target, "write")
        old: str | None = None
        if before is not None:
            check_unchanged(self.workspace, target, before, "write")
            if before.st_size <= MAX_EDIT_BYTES:
                old_data, before = _read_whole(self.workspace, target, "write")
                old = old_data.decode("utf-8", "replace")
        expect = None if before is None else Fingerprint.of(before)
        lines = count_lines(content)

        async def run() -> ToolOutput:
            created = write_atomically(self.workspace, target, data, expect=expect)
            made = "".join(f"created directory {d}/, " for d in created)
            if expect is None:
                return ToolOutput(f"{made}created {target.shown} ({counted(lines, 'line')})")
            return ToolOutput(f"{made}wrote {counted(lines, 'line')} to {target.shown}")

        if before is not None and old is None:
            preview = (
                f"(the file is {format_size(before.st_size)}: no diff shown; the new content "
                f"has {counted(lines, 'line')}, {format_size(len(data))})"
            )
        else:
            preview = unified_diff(target.leads, old, content)
        summary = target.described(writing=True)
        if before is None:
            summary += " (new file)"
        return Invocation(_access(target), summary, run, preview)


class EditTool:
    """``edit {file_path, old_string, new_string, replace_all?}``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @property
    def spec(self) -> ToolSpec:
        return specs.EDIT

    def describe(self, arguments: Mapping[str, Any]) -> str:
        shown = _describe_path(self.workspace, arguments)
        return f"{shown} (every occurrence)" if arguments.get("replace_all") is True else shown

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        check_arguments("edit", arguments, ("file_path", "old_string", "new_string", "replace_all"))
        target = resolve_path(self.workspace, arguments, "file_path")
        old_string = string_argument(arguments, "old_string")
        new_string = string_argument(arguments, "new_string", empty=True)
        assert old_string is not None and new_string is not None
        replace_all = bool_argument(arguments, "replace_all", False)
        if old_string == new_string:
            raise ToolError("invalid arguments: old_string and new_string are the same")
        _encode(old_string, "old_string")
        _encode(new_string, "new_string")
        return _path_first(
            target, lambda: self._prepare(target, old_string, new_string, replace_all)
        )

    def _prepare(
        self, target: Target, old_string: str, new_string: str, replace_all: bool
    ) -> Invocation:
        before = _existing(target, "edit")
        if before is None:
            raise ToolError(f"cannot edit {target.shown}: it does not exist (write creates files)")
        check_unchanged(self.workspace, target, before, "edit")
        if before.st_size > MAX_EDIT_BYTES:
            raise ToolError(
                f"cannot edit {target.shown}: it is {format_size(before.st_size)}, over the "
                f"{format_size(MAX_EDIT_BYTES)} edit limit"
            )
        data, before = _read_whole(self.workspace, target, "edit")
        # surrogateescape: bytes that are not UTF-8 pass through unchanged.
        text = data.decode("utf-8", "surrogateescape")
        old_string, new_string, count = _find(target, text, old_string, new_string, replace_all)
        line = text.count("\n", 0, text.index(old_string)) + 1
        new_text = text.replace(old_string, new_string, -1 if replace_all else 1)
        new_data = new_text.encode("utf-8", "surrogateescape")
        expect = Fingerprint.of(before)

        async def run() -> ToolOutput:
            write_atomically(self.workspace, target, new_data, expect=expect)
            what = "1 occurrence" if count == 1 else f"{count:,} occurrences"
            where = f"line {line}" if count == 1 else f"first at line {line}"
            return ToolOutput(f"replaced {what} in {target.shown} ({where})")

        preview = unified_diff(
            target.leads, data.decode("utf-8", "replace"), new_data.decode("utf-8", "replace")
        )
        summary = target.described(writing=True)
        if replace_all:
            summary += " (every occurrence)"
        return Invocation(_access(target), summary, run, preview)


def _path_first(target: Target, prepare: Callable[[], Invocation]) -> Invocation:
    """``prepare()``, except that a change to a protected path or outside the working
    directory is decided on its path first (SPEC 10.2-10.4): what the file holds (text not
    found, a read it needs) is said only once a person allowed the path, and a pipe refuses
    the path, resolved (``notes.md -> .git/config``), whatever the content."""
    try:
        return prepare()
    except ToolError as exc:
        access = _access(target)
        if not (access.protected or access.outside):
            raise
        refused = exc

    async def fail() -> ToolOutput:
        raise refused

    return Invocation(access, target.described(writing=True), fail)


def _access(target: Target) -> Access:
    """A change to ``target``: outside the working directory, or to a protected path or a
    credential, it needs a person's yes each time (SPEC 10.2-10.4)."""
    return Access("write", target.outside, protected=target.guarded(writing=True))


def _find(target: Target, text: str, old: str, new: str, replace_all: bool) -> tuple[str, str, int]:
    """The strings to replace with, and how often ``old`` occurs; ToolError unless it fits."""
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r" not in old:
        # A CRLF file: read shows its lines without the CR, so the model's text has none.
        crlf_old, crlf_new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        if text.count(crlf_old):
            return _find(target, text, crlf_old, crlf_new, replace_all)
    if count == 0:
        raise ToolError(
            f"cannot edit {target.shown}: old_string was not found in it; read the file again "
            "and copy the text exactly, whitespace and indentation included"
        )
    if count > 1 and not replace_all:
        lines, start = [], 0
        for _ in range(min(count, 10)):
            start = text.index(old, start)
            lines.append(str(text.count("\n", 0, start) + 1))
            start += len(old)
        more = ", ..." if count > 10 else ""
        raise ToolError(
            f"cannot edit {target.shown}: old_string occurs {count:,} times (at lines "
            f"{', '.join(lines)}{more}); add surrounding lines to make it unique, or set "
            "replace_all to replace every occurrence"
        )
    return old, new, count


def _describe_path(workspace: Workspace, arguments: Mapping[str, Any]) -> str:
    path = arguments.get("file_path")
    if not isinstance(path, str) or not path:
        raise ToolError("invalid arguments: file_path must be a non-empty string")
    return display_path(workspace.root, path)


def _encode(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (\ud800) in the JSON string
        raise ToolError(f"invalid arguments: {name} is not valid Unicode text") from exc


def _existing(target: Target, verb: str) -> os.stat_result | None:
    """The status of the regular file at ``target``; None when nothing is there."""
    try:
        status = os.stat(target.real)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot {verb} {target.shown}") from exc
    check_regular(target, status, verb)
    _check_one_name(target, status, verb)
    return status


def _check_one_name(target: Target, status: os.stat_result, verb: str) -> None:
    """ToolError for a hard-linked file: its other names, maybe outside the working directory,
    share what this one holds."""
    if status.st_nlink > 1:
        raise ToolError(
            f"cannot {verb} {target.shown}: it is a hard link ({status.st_nlink} names share "
            "this file, and another may be outside the working directory); dsh changes only "
            "files with one name"
        )


def _read_whole(workspace: Workspace, target: Target, verb: str) -> tuple[bytes, os.stat_result]:
    """The file's bytes, checked against the read tracker on the open descriptor."""
    fd, status = open_regular(target, verb)
    with open(fd, "rb") as file:
        check_unchanged(workspace, target, status, verb)
        try:
            return file.read(MAX_EDIT_BYTES + 1), status
        except OSError as exc:
            raise ToolError(f"cannot {verb} {target.shown}") from exc


def write_atomically(
    workspace: Workspace, target: Target, data: bytes, *, expect: Fingerprint | None
) -> list[str]:
    """Put ``data`` at ``target`` in one step; the directories created for it, as shown.

    ``expect`` is the fingerprint the file must still have (None: no file may be there yet),
    checked before the temporary file is made and again just before the rename. The session's
    read tracker gets the new fingerprint, so a second change needs no new read.
    """
    base = str(workspace.root) if target.inside else "/"
    directory, name = os.path.split(os.path.relpath(target.real, base))
    try:
        dir_fd, created = open_directory(base, directory, create=True)
    except OSError as exc:
        raise _not_written(target, exc) from exc
    try:
        mode, owner = _check_still(target, dir_fd, name, expect)
        temporary = f".{name[:40]}.{os.urandom(4).hex()}.dsh-tmp"
        try:
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                0o600 if mode is not None else 0o666,  # a new file: 0o666 less the umask
                dir_fd=dir_fd,
            )
        except OSError as exc:
            raise ToolError(f"cannot write {target.shown}") from exc
        try:
            with open(fd, "wb", closefd=True) as file:
                file.write(data)
                file.flush()
                if mode is not None:
                    os.fchmod(fd, mode)
                if owner is not None:
                    with contextlib.suppress(PermissionError):  # only root may give a file away
                        os.fchown(fd, *owner)
                os.fsync(fd)
            _check_still(target, dir_fd, name, expect)
            _put(temporary, name, dir_fd, target, replace=expect is not None)
            fsync_descriptor(dir_fd)
            status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            raise ToolError(f"cannot write {target.shown}") from exc
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)
    workspace.read_files.record(target.real, Fingerprint.of(status))
    return [display_path(workspace.root, os.path.join(base, d)) for d in created]


def _not_written(target: Target, exc: OSError) -> ToolError:
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        return ToolError(
            f"cannot write {target.shown}: a symlink is now on its way to {target.real}, where "
            "there was none when the call was checked; dsh does not follow it"
        )
    return ToolError(f"cannot write {target.shown}")


def _check_still(
    target: Target, dir_fd: int, name: str, expect: Fingerprint | None
) -> tuple[int | None, tuple[int, int] | None]:
    """ToolError unless the file ``name`` in ``dir_fd`` is as ``expect`` says; its permission
    bits and owner."""
    try:
        status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if expect is None:
            return None, None
        raise ToolError(
            f"cannot write {target.shown}: it was deleted since it was read; read it again"
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot write {target.shown}") from exc
    if stat.S_ISLNK(status.st_mode):
        raise ToolError(
            f"cannot write {target.shown}: a symlink is now at {target.real}, where there was "
            "none when the call was checked; dsh does not follow it"
        )
    if expect is None:
        raise ToolError(
            f"cannot write {target.shown}: a file appeared there since this call was made; "
            "read it first"
        )
    _check_one_name(target, status, "write")
    change = expect.change(Fingerprint.of(status))
    if change:
        raise ToolError(
            f"cannot write {target.shown}: it changed on disk since it was read ({change}); "
            "read it again first"
        )
    owner = (status.st_uid, status.st_gid)
    return stat.S_IMODE(status.st_mode), None if owner == (os.getuid(), os.getgid()) else owner


def _put(temporary: str, name: str, dir_fd: int, target: Target, *, replace: bool) -> None:
    """The temporary file takes ``name``, both in the directory ``dir_fd``."""
    if replace:
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    # A new file must not clobber one that appeared meanwhile: link() fails if the name exists.
    try:
        os.link(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise ToolError(
            f"cannot write {target.shown}: a file appeared there since this call was made; "
            "read it first"
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        try:  # a file system without hard links: check, then rename
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        raise ToolError(
            f"cannot write {target.shown}: a file appeared there since this call was made"
        ) from None
    os.unlink(temporary, dir_fd=dir_fd)
