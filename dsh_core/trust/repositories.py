"""Where the repositories and protected names are below the working directory, kept up to date.

    scan = RepositoryScan(root, skip=installation)
    scan.found()    # a trust.Found: walked at the first ask, then brought up to date

The first ask walks the tree: at most :data:`SCAN_BUDGET` entries, symlinks not followed, not
into git directories, ``.dsh``, ``.agents`` or ``skip`` (dsh's installation, read-only anyway).
It notes each directory holding a ``.git``, each directory that is a git directory itself
(``HEAD``, ``objects``, ``refs``) and each ``.dsh``, ``.agents`` and ``AGENTS.md`` below the
top. A command may make a repository anywhere (``git init x``, a submodule in the index that
the user's next ``git status`` recurses into): so every later ask catches up, and must stay
cheap on a big tree.

It does, from inotify: each directory the walk lists gets a watch for names made or moved into
it (before it is listed, so nothing made meanwhile is missed), and a later ask reads the events
queued since. Only a new directory is walked (and watched); a new name is looked at only when
it is one of the few that matter. The cost of an ask is the events since the last one, not the
size of the tree. Where inotify is not to be had (no watch left, or none at all) each ask walks
again, within the same budget; when the kernel's queue overflowed, the next ask does.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from . import AGENTS_FILE
from .policy import (
    GIT_DIRECTORY_NAMES,
    PROTECTED_DIR_NAMES,
    Found,
    looks_like_git_directory,
)

__all__ = ["SCAN_BUDGET", "RepositoryScan"]

SCAN_BUDGET = 50_000
"""Directory entries one walk looks at, at most (a home directory can hold millions): past it,
the walk stops and says so (:attr:`~.policy.Found.complete`)."""

_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ISDIR = 0x40000000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_EXCL_UNLINK = 0x04000000
_MASK = _IN_CREATE | _IN_MOVED_TO | _IN_ONLYDIR | _IN_DONT_FOLLOW | _IN_EXCL_UNLINK
"""Names made or moved into a directory; only a directory, never through a symlink."""
_EVENT = struct.Struct("iIII")
"""``struct inotify_event``: wd, mask, cookie, len; then ``len`` bytes of name, NUL-padded."""

_NOTED = frozenset((".git", *PROTECTED_DIR_NAMES, AGENTS_FILE))
_GIT_DIRECTORY = frozenset(GIT_DIRECTORY_NAMES)


class RepositoryScan:
    """Repositories and protected names under ``root`` (see the module docstring)."""

    def __init__(self, root: Path, *, skip: Sequence[Path] = (), budget: int = SCAN_BUDGET):
        self.root = root
        self._top = str(root)
        self._skip = frozenset(str(path) for path in skip)
        self._budget = budget
        self._lock = threading.Lock()
        self._walked = False
        self._complete = True
        self._left = budget
        self._repositories: set[str] = set()
        self._gitdirs: set[str] = set()
        self._protected: set[str] = set()
        self._watches: dict[int, str] = {}
        self._inotify: _Inotify | None = None

    def found(self) -> Found:
        """What is below the top now."""
        with self._lock:
            if not self._walked:
                self._walked = True
                self._inotify = _Inotify.open()
                if self._inotify is not None:
                    weakref.finalize(self, self._inotify.close)
                self._walk_all()
            elif self._inotify is None:
                self._walk_all()
            else:
                self._catch_up()
            return Found(
                _existing(self._repositories),
                _existing(self._gitdirs),
                _existing(self._protected),
                complete=self._complete,
            )

    def _walk_all(self) -> None:
        self._repositories.clear()
        self._gitdirs.clear()
        self._protected.clear()
        self._complete = True
        self._left = self._budget
        if self.root == Path("/"):
            # The whole file system, /proc and all: the note already says it is all writable.
            self._complete = False
            return
        self._walk(self._top)

    def _walk(self, start: str) -> None:
        pending = [start]
        while pending:
            directory = pending.pop()
            self._watch(directory)  # first: what is made while it is listed is an event
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError:
                continue  # unreadable, or gone meanwhile: nothing in it to protect
            self._left -= len(entries)
            if self._left < 0:
                self._complete = False
                return
            if directory != self._top and {e.name for e in entries} >= _GIT_DIRECTORY:
                self._gitdirs.add(directory)  # git takes it for one: not walked into
                continue
            for entry in entries:
                if entry.name in _NOTED:
                    self._note(directory, entry.name)
                elif entry.is_dir(follow_symlinks=False) and entry.path not in self._skip:
                    pending.append(entry.path)

    def _note(self, directory: str, name: str) -> None:
        """``name`` is in ``directory``: a ``.git``, ``.dsh``, ``.agents`` or ``AGENTS.md``."""
        if directory == self._top:
            return  # the top's own are looked at on every ask (trust.inventory)
        if name == ".git":
            self._repositories.add(directory)
        else:
            self._protected.add(os.path.join(directory, name))

    def _watch(self, directory: str) -> None:
        if self._inotify is None:
            return
        try:
            self._watches[self._inotify.watch(directory)] = directory
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.ENOMEM):  # no watch left: walk every time
                self._inotify.close()
                self._inotify = None
                self._watches.clear()

    def _catch_up(self) -> None:
        assert self._inotify is not None
        self._left = self._budget
        new: list[str] = []
        for wd, mask, name in self._inotify.events():
            if mask & _IN_Q_OVERFLOW:
                self._walk_all()  # events were lost: look at everything again
                return
            if mask & _IN_IGNORED:
                self._watches.pop(wd, None)  # the directory is gone
                continue
            directory = self._watches.get(wd)
            if directory is None or not name:
                continue
            if name in _NOTED:
                self._note(directory, name)
            elif name in _GIT_DIRECTORY:
                if directory != self._top and looks_like_git_directory(directory):
                    self._gitdirs.add(directory)
            elif mask & _IN_ISDIR:
                new.append(os.path.join(directory, name))
        for directory in dict.fromkeys(new):
            if directory != self._top and directory not in self._skip:
                self._walk(directory)


def _existing(paths: set[str]) -> tuple[Path, ...]:
    """``paths`` that are still there (a repository moved away leaves a stale name), sorted;
    the stale ones are forgotten."""
    gone = {path for path in paths if not os.path.lexists(path)}
    paths -= gone
    return tuple(Path(path) for path in sorted(paths))


class _Inotify:
    """An inotify instance (Python has no binding: ctypes, as :mod:`.beneath` does)."""

    def __init__(self, fd: int, add: Any) -> None:
        self._fd = fd
        self._add = add

    @classmethod
    def open(cls) -> _Inotify | None:
        """A new instance; None where the kernel or the limits give none."""
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init, add = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError):
            return None
        add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        add.restype = ctypes.c_int
        fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        return None if fd < 0 else cls(fd, add)

    def watch(self, directory: str) -> int:
        """A watch on ``directory`` (the same one again for the same directory); OSError."""
        import ctypes

        wd = self._add(self._fd, os.fsencode(directory), _MASK)
        if wd < 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), directory)
        return int(wd)

    def events(self) -> Iterator[tuple[int, int, str]]:
        """(watch, mask, name) of each event queued, until none is left."""
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return
            offset = 0
            while offset < len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset : offset + length].split(b"\0", 1)[0]
                offset += length
                yield wd, mask, os.fsdecode(name)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
