"""Small file helpers shared by the session log, the context files and the tools.

fsync_directory(path.parent)        # after a rename or a create: the new name is durable
fsync_descriptor(dir_fd)            # the same, for a directory already open
data = read_up_to(fd, 8192)         # 8192 bytes unless the file ends first
data = read_regular(path, 1 << 20)  # the first MiB of a regular file; None: none there
format_size(300 * 1024 + 1)         # "300.1 KiB"
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["format_size", "fsync_descriptor", "fsync_directory", "read_regular", "read_up_to"]

_READ_BLOCK = 1 << 16
"""One ``os.read`` at most: a big ``size`` does not allocate a buffer of its size up front."""


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """Make the directory entries in ``path`` durable (a new or renamed name in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsync_descriptor(fd)
    finally:
        os.close(fd)


def fsync_descriptor(fd: int) -> None:
    """``os.fsync(fd)``, where a file system that cannot fsync a directory (``EINVAL``,
    ``ENOTSUP``) is accepted: there is nothing more to do there."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise


def read_up_to(fd: int, size: int) -> bytes:
    """``size`` bytes from ``fd``, fewer only at its end (``os.read`` may return less early)."""
    parts: list[bytes] = []
    wanted = size
    while wanted > 0:
        part = os.read(fd, min(wanted, _READ_BLOCK))
        if not part:
            break
        parts.append(part)
        wanted -= len(part)
    return b"".join(parts)


def read_regular(path: str | os.PathLike[str], size: int) -> bytes | None:
    """The first ``size`` bytes of the regular file ``path``; None when there is none there
    (missing, unreadable, a directory, a FIFO: opened without blocking, never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_up_to(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_size(size: int) -> str:
    """``812 bytes``, ``1.2 KiB``, ``50 KiB``, ``2 GiB``: to a tenth, rounded up, so a size just
    over a limit never reads as equal to it."""
    for unit, scale in _UNITS:
        if size >= scale:
            whole, tenth = divmod(-(-size * 10 // scale), 10)  # integer ceiling: no float error
            return f"{whole}.{tenth} {unit}" if tenth else f"{whole} {unit}"
    return f"{size:,} bytes"
