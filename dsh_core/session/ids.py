"""Where a session id's log is, without walking the store: an index that can be stale, never wrong.

    $DSH_HOME/sessions/.ids/<session id>   a small file (0600) that says where it is:
                                           <cwd key>/<session id>
                                           <cwd key>/<parent id>/subagents/<session id>

Usage::

    place(root, "20261203-101500-ab12cd")  # root / key / id / "session.jsonl", or None
    note(root, session_id, log)           # after a session is created, or found by a walk

An entry is written whole or not at all (a new file renamed over the old one), and read
with one ``open`` and one ``read``. What it says is checked before it is used: one of the two
shapes, ending in the id, so it stays below the sessions root; then the log there is looked
at. So an entry that is missing (a session written by a dsh from before the index, or by a
process killed between its log and its entry, or copied in by hand) or stale (the session was
deleted or moved, the entry cut short by a crash) reads as None, and
:meth:`~dsh_core.session.store.SessionStore.find` walks the store as it always did, and
writes what it found. The index makes a lookup cheap; it never decides that a session does
not exist. It is a plain file, not a symlink: a dsh from before it, or any tool that follows
links, sees nothing in ``.ids`` it could take for a session. Nothing here raises: an index
that cannot be written only makes the next lookup walk.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

__all__ = ["INDEX_DIR", "note", "place"]

INDEX_DIR = ".ids"
"""Inside the sessions root; a dot name, so no working directory's key can be it."""

_LOG_NAME = "session.jsonl"
_SUBAGENTS = "subagents"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_PLACE = re.compile(rf"{_NAME}/(?:{_NAME}/{_SUBAGENTS}/)?{_NAME}")
"""What an entry may say: two names (key, id), or four (key, parent, ``subagents``, id)."""
_ENTRY_BYTES = 4 * 128 + 3
"""The longest entry: four names of at most 128 characters and their slashes."""


def place(root: Path, session_id: str) -> Path | None:
    """The log of ``session_id`` as its index entry says, if the entry is sound and the log is
    there; None otherwise (then only a walk can tell)."""
    try:
        fd = os.open(os.path.join(root, INDEX_DIR, session_id), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no entry, or no index
        return None
    try:
        raw = os.read(fd, _ENTRY_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    where = raw.decode("ascii", "replace")
    if not _PLACE.fullmatch(where) or where.rsplit("/", 1)[-1] != session_id:
        return None
    log = root / where / _LOG_NAME
    try:
        os.stat(log)
    except OSError:
        return None
    return log


def note(root: Path, session_id: str, log: Path) -> None:
    """Make the index say that ``session_id``'s log is ``log`` (a path below ``root``)."""
    try:
        where = log.parent.relative_to(root).as_posix()
    except ValueError:
        return
    if not _PLACE.fullmatch(where) or where.rsplit("/", 1)[-1] != session_id:
        return
    index = os.path.join(root, INDEX_DIR)
    # A name no session id can have (ids start with a letter or a digit).
    temporary = os.path.join(index, f".{session_id}.{os.getpid()}")
    with contextlib.suppress(OSError):
        if not os.path.isdir(index):
            with contextlib.suppress(FileExistsError):
                os.mkdir(index, 0o700)
            os.chmod(index, 0o700)  # mkdir's mode is filtered by the umask
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, where.encode("ascii"))
        finally:
            os.close(fd)
        os.replace(temporary, os.path.join(index, session_id))  # whole, or not at all
