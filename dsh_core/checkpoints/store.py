"""The checkpoint store: content-addressed objects, checkpoint records and the stat cache.

    store = CheckpointStore.open(home / "checkpoints")     # 0700, its database 0600
    with store.writing():
        digest = store.put(b"hello\\n")                     # sha256 of the bytes, stored once
    store.get(digest)                                       # the bytes, checked against it

One SQLite database (``store.sqlite``, Python's own ``sqlite3``): a file's content and a
directory's listing are *objects*, keyed by the sha256 of their bytes and stored once, zlib
level 1 when that saves a tenth; a *checkpoint* is a row naming the root tree of the working
directory before a turn's first change (``before``) and at its end (``after``); the *stat
cache* is one row per working directory, so that a file whose path, size, mtime, ctime and
inode did not change is not read again. One transaction per checkpoint is one fsync (WAL,
``synchronous=FULL``), whatever the number of files: what a checkpoint stored is on disk when
:meth:`writing` returns.

Nothing here runs anything: no program is started and nothing the working directory holds is
interpreted (objects are bytes). The store lives in ``DSH_HOME``, which the sandbox hides and
the file tools refuse (SPEC 10.4, 14). Every object read back is checked against its digest, so
damage is an error that names the object, never a wrong file written back.

Pruning (:meth:`prune`) drops checkpoints older than 30 days, then the oldest until the store
is under 2 GiB, and the objects nothing kept refers to; a checkpoint the caller names is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CHECKPOINT, HarnessError

__all__ = [
    "DATABASE",
    "MAX_AGE_S",
    "MAX_STORE_BYTES",
    "CheckpointError",
    "CheckpointRow",
    "CheckpointStore",
    "StatEntry",
    "digest_of",
]

DATABASE = "store.sqlite"
MAX_AGE_S = 30 * 24 * 3600
"""Checkpoints older than this (by their last use) are pruned."""
MAX_STORE_BYTES = 2 << 30
"""The store is pruned, oldest checkpoints first, until it is smaller than this."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    digest BLOB PRIMARY KEY, size INTEGER NOT NULL, packed INTEGER NOT NULL, data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    id TEXT PRIMARY KEY, directory TEXT NOT NULL, session TEXT NOT NULL, turn INTEGER NOT NULL,
    before BLOB NOT NULL, after BLOB, created REAL NOT NULL, used REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS statcache (directory TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

_PACK_LEVEL = 1
"""zlib's fastest level, as git's loose objects: a checkpoint must not slow a turn down."""


class CheckpointError(HarnessError):
    """The checkpoint store cannot be used: unreadable, unwritable, or an object is damaged."""

    def __init__(self, message: str) -> None:
        super().__init__(message, CHECKPOINT)


def digest_of(data: bytes) -> bytes:
    """An object's key: the sha256 of its bytes."""
    return hashlib.sha256(data).digest()


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One checkpoint: the tree before a turn's first change and, once it ended, after."""

    id: str
    directory: str
    """The working directory it covers (resolved)."""
    session: str
    turn: int
    before: bytes
    """The root tree's digest before the turn's first change."""
    after: bytes | None
    """The root tree's digest at the turn's end; None until then (or after a crash)."""
    created: float


StatEntry = tuple[int, int, int, int, bytes]
"""What the stat cache keeps of a file: size, mtime_ns, ctime_ns, inode, and its digest."""


class CheckpointStore:
    """The store under ``directory``; one connection, usable from any thread (one at a time)."""

    def __init__(self, directory: Path, connection: sqlite3.Connection) -> None:
        self.directory = directory
        self._db = connection
        self._lock = threading.RLock()
        self._known: set[bytes] = set()
        """Digests known to be stored, so that a checkpoint does not ask again; dropped when
        another process pruned (the ``pruned`` counter in ``meta`` moved)."""
        self._pruned = self._prune_count()

    @classmethod
    def open(cls, directory: Path, *, read_only: bool = False) -> CheckpointStore:
        """The store in ``directory`` (created 0700 with a 0600 database unless ``read_only``).

        Raises CheckpointError naming the directory when it cannot be used.
        """
        path = directory / DATABASE
        try:
            if read_only:
                if not path.exists():
                    raise CheckpointError(f"no checkpoint store in {directory}")
                connection = sqlite3.connect(
                    f"file:{path}?mode=ro", uri=True, check_same_thread=False
                )
            else:
                _private_directory(directory)
                # Created 0600 before SQLite opens it: its own files (-wal, -shm) copy the mode.
                os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
                connection = sqlite3.connect(path, check_same_thread=False)
                connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
                connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA busy_timeout = 10000")
            connection.execute("PRAGMA synchronous = FULL")
            if not read_only:
                connection.executescript(_SCHEMA)
            connection.isolation_level = None  # transactions are ours: writing() opens them
            return cls(directory, connection)
        except (OSError, sqlite3.Error) as exc:
            raise CheckpointError(f"cannot open the checkpoint store in {directory}") from exc

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """One transaction: everything put or recorded in it is durable once it returns."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot write the checkpoint store {self._path}") from exc
            try:
                if self._prune_count() != self._pruned:  # objects may be gone: ask again
                    self._known.clear()
                    self._pruned = self._prune_count()
                yield
                self._db.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise CheckpointError(
                        f"cannot write the checkpoint store {self._path}"
                    ) from exc
                raise

    @property
    def _path(self) -> Path:
        return self.directory / DATABASE

    # -- objects ------------------------------------------------------------------------------

    def has(self, digest: bytes) -> bool:
        if digest in self._known:
            return True
        with self._lock:
            found = self._query("SELECT 1 FROM objects WHERE digest = ?", (digest,)) is not None
        if found:
            self._known.add(digest)
        return found

    def put(self, data: bytes, digest: bytes | None = None) -> bytes:
        """Store ``data`` (inside :meth:`writing`) unless it is there; its digest."""
        digest = digest or digest_of(data)
        if self.has(digest):
            return digest
        packed = zlib.compress(data, _PACK_LEVEL)
        stored, is_packed = (packed, 1) if len(packed) < len(data) * 0.9 else (data, 0)
        with self._lock:
            self._execute(
                "INSERT OR IGNORE INTO objects VALUES (?, ?, ?, ?)",
                (digest, len(data), is_packed, stored),
            )
        self._known.add(digest)
        return digest

    def get(self, digest: bytes) -> bytes:
        """The object's bytes; CheckpointError when it is missing or damaged."""
        with self._lock:
            row = self._query("SELECT packed, data FROM objects WHERE digest = ?", (digest,))
        if row is None:
            raise CheckpointError(f"object {digest.hex()[:16]} is missing from {self._path}")
        packed, stored = row
        try:
            data: bytes = zlib.decompress(stored) if packed else bytes(stored)
        except zlib.error as exc:
            raise CheckpointError(f"object {digest.hex()[:16]} in {self._path} is damaged") from exc
        if digest_of(data) != digest:
            raise CheckpointError(
                f"object {digest.hex()[:16]} in {self._path} is damaged (its bytes do not match)"
            )
        return data

    # -- checkpoints --------------------------------------------------------------------------

    def record(self, row: CheckpointRow) -> None:
        """Add a checkpoint (inside :meth:`writing`)."""
        with self._lock:
            self._execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.id,
                    row.directory,
                    row.session,
                    row.turn,
                    row.before,
                    row.after,
                    row.created,
                    row.created,
                ),
            )

    def set_after(self, checkpoint: str, root: bytes) -> None:
        """The tree at the turn's end (inside :meth:`writing`)."""
        with self._lock:
            self._execute(
                "UPDATE checkpoints SET after = ?, used = ? WHERE id = ?",
                (root, time.time(), checkpoint),
            )

    def row(self, checkpoint: str) -> CheckpointRow | None:
        with self._lock:
            found = self._query(
                "SELECT id, directory, session, turn, before, after, created FROM checkpoints "
                "WHERE id = ?",
                (checkpoint,),
            )
        if found is None:
            return None
        ident, directory, session, turn, before, after, created = found
        return CheckpointRow(
            ident, directory, session, turn, bytes(before), after and bytes(after), created
        )

    def touch(self, checkpoints: Iterable[str]) -> None:
        """Mark checkpoints as used now (an undo): pruning by age counts from here."""
        with self.writing(), self._lock:
            self._db.executemany(
                "UPDATE checkpoints SET used = ? WHERE id = ?",
                [(time.time(), ident) for ident in checkpoints],
            )

    # -- the stat cache -----------------------------------------------------------------------

    def stat_cache(self, directory: str) -> dict[str, StatEntry]:
        """The cache of ``directory`` as the last checkpoint of it left it (empty if none or
        unreadable: the files are then read again, which is never wrong)."""
        with self._lock:
            try:
                row = self._query("SELECT data FROM statcache WHERE directory = ?", (directory,))
            except CheckpointError:
                return {}
        if row is None:
            return {}
        try:
            entries = json.loads(zlib.decompress(row[0]))
            return {
                path: (size, mtime, ctime, inode, bytes.fromhex(digest))
                for path, size, mtime, ctime, inode, digest in entries
            }
        except (ValueError, TypeError, zlib.error):
            return {}

    def save_stat_cache(self, directory: str, cache: dict[str, StatEntry]) -> None:
        """Replace the cache of ``directory`` (inside :meth:`writing`)."""
        entries = [[path, *entry[:4], entry[4].hex()] for path, entry in cache.items()]
        data = zlib.compress(json.dumps(entries, separators=(",", ":")).encode(), _PACK_LEVEL)
        with self._lock:
            self._execute("INSERT OR REPLACE INTO statcache VALUES (?, ?)", (directory, data))

    # -- pruning ------------------------------------------------------------------------------

    def size(self) -> int:
        """Bytes the database takes (the write-ahead log not counted)."""
        with self._lock:
            pages = self._query("PRAGMA page_count", ())
            free = self._query("PRAGMA freelist_count", ())
            page = self._query("PRAGMA page_size", ())
        assert pages is not None and free is not None and page is not None
        return int((pages[0] - free[0]) * page[0])

    def prune(
        self,
        *,
        children: Callable[[bytes], Iterable[bytes]],
        keep_session: str | None = None,
        max_age_s: float = MAX_AGE_S,
        max_bytes: int = MAX_STORE_BYTES,
        now: float | None = None,
    ) -> int:
        """Drop checkpoints unused for ``max_age_s``, then the oldest until the store fits
        ``max_bytes``, then every object no kept checkpoint reaches (``children`` lists what
        a tree refers to); the checkpoints of ``keep_session`` stay. Returns how many went."""
        now = time.time() if now is None else now
        with self._lock:
            rows = self._db.execute(
                "SELECT id, used, session FROM checkpoints ORDER BY used"
            ).fetchall()
            candidates = [(ident, used) for ident, used, session in rows if session != keep_session]
            old = [ident for ident, used in candidates if used < now - max_age_s]
            rest = [ident for ident, _ in candidates if ident not in old]
            dropped = self._drop(old, children)
            while rest and self.size() > max_bytes:
                dropped += self._drop([rest.pop(0)], children)
        return dropped

    def _drop(self, checkpoints: list[str], children: Callable[[bytes], Iterable[bytes]]) -> int:
        if not checkpoints:
            return 0
        with self.writing():
            self._db.executemany(
                "DELETE FROM checkpoints WHERE id = ?", [(i,) for i in checkpoints]
            )
            roots = self._db.execute("SELECT before, after FROM checkpoints").fetchall()
            reachable: set[bytes] = set()
            pending = [bytes(root) for pair in roots for root in pair if root is not None]
            while pending:
                digest = pending.pop()
                if digest in reachable:
                    continue
                reachable.add(digest)
                with contextlib.suppress(CheckpointError):  # a damaged tree keeps what it can
                    pending.extend(children(digest))
            stored = [bytes(row[0]) for row in self._db.execute("SELECT digest FROM objects")]
            gone = [(digest,) for digest in stored if digest not in reachable]
            self._db.executemany("DELETE FROM objects WHERE digest = ?", gone)
            self._db.execute(
                "INSERT INTO meta VALUES ('pruned', 1) "
                "ON CONFLICT(key) DO UPDATE SET value = value + 1"
            )
        self._known.clear()
        self._pruned = self._prune_count()
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA incremental_vacuum")
        return len(checkpoints)

    def _prune_count(self) -> int:
        with self._lock:
            try:
                row = self._query("SELECT value FROM meta WHERE key = 'pruned'", ())
            except CheckpointError:
                return 0
        return int(row[0]) if row is not None else 0

    # -- plumbing -----------------------------------------------------------------------------

    def _query(self, sql: str, parameters: tuple[object, ...]) -> Any:
        """The first row of a query (a tuple), or None."""
        try:
            return self._db.execute(sql, parameters).fetchone()
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot read the checkpoint store {self._path}") from exc

    def _execute(self, sql: str, parameters: tuple[object, ...]) -> None:
        try:
            self._db.execute(sql, parameters)
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot write the checkpoint store {self._path}") from exc


def _private_directory(directory: Path) -> None:
    """``directory`` and missing parents, 0700 (chmod: mkdir's mode passes through the umask)."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
            os.chmod(path, 0o700)
