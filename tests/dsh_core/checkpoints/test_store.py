"""The checkpoint store: objects stored once and checked on the way out, private files,
pruning by age and size that keeps what a kept checkpoint reaches."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from dsh_core.checkpoints.snapshot import Snapshotter, tree_children
from dsh_core.checkpoints.store import (
    DATABASE,
    CheckpointError,
    CheckpointRow,
    CheckpointStore,
    digest_of,
)


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore.open(tmp_path / "home" / "checkpoints")


def test_an_object_is_stored_once_and_comes_back_whole(store: CheckpointStore) -> None:
    data = b"the same bytes\n" * 1000
    with store.writing():
        first = store.put(data)
        second = store.put(data)
    assert first == second == digest_of(data)
    assert store.get(first) == data
    count = store._db.execute("SELECT COUNT(*) FROM objects").fetchone()[0]
    assert count == 1


def test_the_store_is_private(tmp_path: Path) -> None:
    os.umask(0o022)
    store = CheckpointStore.open(tmp_path / "home" / "checkpoints")
    with store.writing():
        store.put(b"x")
    directory = tmp_path / "home" / "checkpoints"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_damaged_object_is_an_error_naming_it_never_wrong_bytes(store: CheckpointStore) -> None:
    with store.writing():
        digest = store.put(b"original content that is long enough " * 10)
    store._db.execute("UPDATE objects SET data = ?, packed = 0", (b"tampered",))
    with pytest.raises(CheckpointError, match="damaged"):
        store.get(digest)


def test_a_missing_object_is_an_error(store: CheckpointStore) -> None:
    with pytest.raises(CheckpointError, match="missing"):
        store.get(digest_of(b"never stored"))


def test_an_unwritable_store_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("a file where the directory should be")
    with pytest.raises(CheckpointError, match="cannot open the checkpoint store"):
        CheckpointStore.open(tmp_path / "home" / "checkpoints")


def test_read_only_opening_needs_a_store_and_creates_none(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint store"):
        CheckpointStore.open(tmp_path / "none", read_only=True)
    assert not (tmp_path / "none").exists()


def _checkpoint(store: CheckpointStore, root: Path, ident: str, session: str) -> CheckpointRow:
    snapshot = Snapshotter(store, str(root)).take()
    row = CheckpointRow(ident, str(root), session, 1, snapshot.root, None, time.time())
    with store.writing():
        store.record(row)
    return row


def test_pruning_drops_old_checkpoints_and_what_only_they_reach(
    store: CheckpointStore, tmp_path: Path
) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "shared.txt").write_text("in both\n")
    (root / "old.txt").write_text("only in the old one\n")
    old = _checkpoint(store, root, "s1.1", "s1")
    (root / "old.txt").unlink()
    (root / "new.txt").write_text("only in the new one\n")
    _checkpoint(store, root, "s2.1", "s2")
    store._db.execute("UPDATE checkpoints SET used = 0 WHERE id = 's1.1'")

    dropped = store.prune(children=lambda digest: tree_children(store, digest))

    assert dropped == 1
    assert store.row("s1.1") is None and store.row("s2.1") is not None
    with pytest.raises(CheckpointError):
        store.get(old.before)
    with pytest.raises(CheckpointError):
        store.get(digest_of(b"only in the old one\n"))
    assert store.get(digest_of(b"in both\n")) == b"in both\n"


def test_pruning_by_size_goes_oldest_first_and_keeps_the_running_session(
    store: CheckpointStore, tmp_path: Path
) -> None:
    root = tmp_path / "work"
    root.mkdir()
    for number, session in enumerate(("a", "b", "c")):
        (root / f"{session}.bin").write_bytes(os.urandom(200_000))
        _checkpoint(store, root, f"{session}.1", session)
        store._db.execute("UPDATE checkpoints SET used = ? WHERE id = ?", (number, f"{session}.1"))
        (root / f"{session}.bin").unlink()

    store.prune(children=lambda d: tree_children(store, d), keep_session="a", max_bytes=300_000)

    assert store.row("a.1") is not None  # the oldest, but this run's session
    assert store.row("b.1") is None
    assert store.size() <= 300_000 or store.row("c.1") is None


def test_the_database_is_plain_sqlite(store: CheckpointStore) -> None:
    # Nothing but bytes and rows: a reader needs no program of ours, and runs none.
    tables = {
        row[0]
        for row in sqlite3.connect(store.directory / DATABASE).execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    assert tables == {"objects", "checkpoints", "statcache", "meta"}
