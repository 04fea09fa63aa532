"""Opening regular files safely, and checking they did not change since they were read.

    fd, status = open_regular(target, "read")           # ToolError for a FIFO, a directory...
    check_unchanged(workspace, target, status, "edit")  # ToolError unless read and unchanged

Shared by ``read``, ``write`` and ``edit``. A file is opened only when it is a regular file,
and never in a way that can block: a FIFO or a device is refused from its type, and the open is
``O_NONBLOCK`` in case one was swapped in between. What was opened is the file that was checked:
a symlink swapped in on the way after the check (to a key, to ``/proc/self/environ``) is found
on the descriptor and refused.
"""

from __future__ import annotations

import os
import stat

from ..trust.workspace import Fingerprint, Workspace
from .base import ToolError
from .paths import Target

__all__ = ["check_regular", "check_unchanged", "open_regular"]


def open_regular(target: Target, verb: str) -> tuple[int, os.stat_result]:
    """A descriptor open for reading on a regular file, and its status; ToolError otherwise.

    The type is checked before opening (a FIFO's open would wait for a writer) and again on the
    descriptor, since the name may have been swapped in between.
    """
    try:
        status = os.stat(target.real)
    except OSError as exc:
        raise ToolError(f"cannot {verb} {target.shown}") from exc
    check_regular(target, status, verb)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(target.real, flags)
    except OSError as exc:
        raise ToolError(f"cannot {verb} {target.shown}") from exc
    try:
        status = os.fstat(fd)
        check_regular(target, status, verb)
        _check_opened(fd, target, verb)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def _check_opened(fd: int, target: Target, verb: str) -> None:
    """ToolError unless ``fd`` is open on ``target.real``: the path was resolved and judged
    before the open, and a symlink swapped in since would have led elsewhere."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: the check before the open stands alone
        return
    if opened != target.real:
        raise ToolError(
            f"cannot {verb} {target.shown}: it changed while it was being opened (it led to "
            f"{target.real} when checked, then to {opened}); ask again"
        )


def check_regular(target: Target, status: os.stat_result, verb: str) -> None:
    """ToolError unless ``status`` is a regular file's, saying what it is instead."""
    mode = status.st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        what = "it is a directory (glob lists the files in it)"
    elif stat.S_ISFIFO(mode):
        what = "it is a named pipe (FIFO), not a regular file"
    elif stat.S_ISSOCK(mode):
        what = "it is a socket, not a regular file"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        what = "it is a device, not a regular file"
    else:
        what = "it is not a regular file"
    raise ToolError(f"cannot {verb} {target.shown}: {what}")


def check_unchanged(workspace: Workspace, target: Target, now: os.stat_result, verb: str) -> None:
    """ToolError unless ``target`` was read in this session and is as it was then."""
    then = workspace.read_files.fingerprint(target.real)
    if then is None:
        raise ToolError(
            f"cannot {verb} {target.shown}: it was not read in this session; "
            f"read it first (any part), then {verb} it"
        )
    change = then.change(Fingerprint.of(now))
    if change:
        raise ToolError(
            f"cannot {verb} {target.shown}: it changed on disk since it was read ({change}); "
            "read it again first"
        )
