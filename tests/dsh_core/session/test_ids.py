"""The id index: a lookup is one look at one entry, and an entry that is missing, stale or
hostile is never believed: the store is walked as before, and the entry written again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dsh_core.errors import SessionLogError
from dsh_core.session import SessionStore
from dsh_core.session.ids import INDEX_DIR, place
from tests.dsh_core.session.test_session import CWD, numbered, ticking


def entry(store: SessionStore, session_id: str) -> Path:
    return store.root / INDEX_DIR / session_id


def test_a_new_session_is_indexed_and_found_by_its_entry_alone(store: SessionStore) -> None:
    with store.create(CWD) as log:
        pass
    assert entry(store, log.id).read_text() == log.path.parent.relative_to(store.root).as_posix()
    assert oct(entry(store, log.id).stat().st_mode & 0o777) == "0o600"
    assert oct((store.root / INDEX_DIR).stat().st_mode & 0o777) == "0o700"
    # A copy in another directory would make a walk say "ambiguous": the entry decides alone.
    copy = store.root / "someone-else-000000000000" / log.id
    shutil.copytree(log.path.parent, copy)
    assert store.find(log.id) == log.path
    assert store.indexed(log.id)


def test_without_its_entry_a_session_is_found_by_walking_and_indexed_again(
    store: SessionStore,
) -> None:
    with store.create(CWD) as log:
        pass
    shutil.rmtree(store.root / INDEX_DIR)  # as a dsh from before the index left it
    assert not store.indexed(log.id)
    assert store.find(log.id) == log.path
    assert store.indexed(log.id)
    with store.open(log.id)[0] as loaded:
        assert loaded.path == log.path


def test_a_stale_entry_is_not_believed(store: SessionStore) -> None:
    with store.create(CWD) as log, store.create(CWD) as other:
        pass
    moved = store.root / "moved-000000000000" / log.id
    moved.parent.mkdir()
    log.path.parent.rename(moved)
    assert store.find(log.id) == moved / "session.jsonl"  # walked, and written again
    assert place(store.root, log.id) == moved / "session.jsonl"
    shutil.rmtree(moved)
    with pytest.raises(SessionLogError, match=f"no session '{log.id}' in "):
        store.find(log.id)
    # An entry that names another session's place (a hand edit) leads nowhere either.
    entry(store, log.id).write_text(other.path.parent.relative_to(store.root).as_posix())
    with pytest.raises(SessionLogError, match=f"no session '{log.id}' in "):
        store.find(log.id)


@pytest.mark.parametrize(
    "says",
    ["../../outside/s0", "/etc/s0", "key/../s0", "", "k/p/other/s0", "k/s0\n", "\xff/s0"],
)
def test_an_entry_that_leaves_the_store_is_not_followed(
    store: SessionStore, tmp_path: Path, says: str
) -> None:
    outside = tmp_path / "outside" / "s0"
    outside.mkdir(parents=True)
    (outside / "session.jsonl").write_text('{"type":"session"}\n')
    (store.root / INDEX_DIR).mkdir(parents=True)
    entry(store, "s0").write_bytes(says.encode("utf-8", "surrogateescape"))
    assert place(store.root, "s0") is None
    with pytest.raises(SessionLogError, match="no session 's0' in "):
        store.find("s0")


def test_an_id_is_one_session_in_every_directory(tmp_path: Path) -> None:
    first = SessionStore(tmp_path, clock=ticking(), new_id=numbered())
    second = SessionStore(tmp_path, clock=ticking(), new_id=numbered())  # the same ids again
    with first.create(CWD):
        pass
    with pytest.raises(SessionLogError, match="session s0 already exists in "):
        second.create(Path("/elsewhere"))
    assert not (tmp_path / "sessions" / INDEX_DIR / "s0").read_text().startswith("elsewhere")


def test_subagent_sessions_are_indexed_and_prefixes_walk(store: SessionStore) -> None:
    with store.create(CWD) as parent, store.create(CWD, parent=parent, call_id="c1") as child:
        pass
    assert store.find(child.id) == child.path
    assert "subagents" in entry(store, child.id).read_text()
    assert store.ids_starting_with("s") == ["s0", "s1"]
    assert store.ids_starting_with(child.id) == [child.id]
    assert store.ids_starting_with("x") == []


def test_an_unwritable_index_only_means_walking(store: SessionStore) -> None:
    store.root.mkdir(parents=True)
    (store.root / INDEX_DIR).write_text("a file where the index belongs\n")
    with store.create(CWD) as log:
        pass
    assert not store.indexed(log.id)
    assert store.find(log.id) == log.path
    assert [summary.id for summary in store.summaries()] == [log.id]
    assert os.path.isfile(store.root / INDEX_DIR)
