"""What a checkpoint holds and skips, the stat cache that spares reads, and what changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_core import fileio
from dsh_core.checkpoints import snapshot as snapshot_module
from dsh_core.checkpoints.snapshot import (
    DIRECTORY,
    FILE,
    LINK,
    Snapshotter,
    diff,
    walk_tree,
)
from dsh_core.checkpoints.store import CheckpointStore


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore.open(tmp_path / "home" / "checkpoints")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    """No racy window: a file written before the walk began may be trusted to the cache (in
    real use, one changed in the last two seconds is read again)."""
    monkeypatch.setattr(snapshot_module, "RACY_NS", 0)


def reading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the walks read from now on (their paths), as they read them."""
    reads: list[str] = []
    real_read = fileio.read_up_to

    def counting(fd: int, size: int) -> bytes:
        reads.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_read(fd, size)

    monkeypatch.setattr(snapshot_module, "read_up_to", counting)
    return reads


def listing(store: CheckpointStore, root: bytes) -> dict[str, tuple[int, int]]:
    return {path: (entry.kind, entry.mode) for path, entry in walk_tree(store, root)}


def test_files_links_directories_and_modes_are_held(store: CheckpointStore, work: Path) -> None:
    (work / "src").mkdir(mode=0o750)
    (work / "src" / "run.sh").write_text("echo hi\n")
    (work / "src" / "run.sh").chmod(0o755)
    (work / "empty").mkdir()
    (work / "link").symlink_to("src/run.sh")
    (work / "dangling").symlink_to("/nowhere")
    (work / "empty").chmod(0o700)
    (work / "src").chmod(0o750)
    taken = Snapshotter(store, str(work)).take()
    assert listing(store, taken.root) == {
        "dangling": (LINK, 0o777),
        "empty": (DIRECTORY, 0o700),
        "link": (LINK, 0o777),
        "src": (DIRECTORY, 0o750),
        "src/run.sh": (FILE, 0o755),
    }
    assert taken.files == 3 and taken.bytes == len("echo hi\n")


def test_git_ignored_credentials_and_oversized_files_are_not_held(
    store: CheckpointStore, work: Path
) -> None:
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    (work / "sub" / ".git").mkdir(parents=True)  # a nested repository's own history too
    (work / "sub" / "kept.py").write_text("x = 1\n")
    (work / ".gitignore").write_text("build/\n*.log\n")
    (work / "build").mkdir()
    (work / "build" / "out.o").write_bytes(b"\0")
    (work / "debug.log").write_text("noise\n")
    (work / "secrets").mkdir()
    (work / "secrets" / "id_rsa").write_text("KEY\n")
    (work / "big.bin").write_bytes(b"x" * 2048)
    snapshotter = Snapshotter(
        store,
        str(work),
        fences=lambda directory: {"secrets": "~/.ssh"} if directory == str(work) else {},
        max_file_bytes=1024,
    )
    taken = snapshotter.take()
    assert set(listing(store, taken.root)) == {".gitignore", "sub", "sub/kept.py"}
    assert taken.skipped == ("big.bin",)


def test_an_unchanged_tree_is_walked_not_read(
    store: CheckpointStore, work: Path, monkeypatch: pytest.MonkeyPatch, trusting: None
) -> None:
    for n in range(20):
        (work / f"f{n}.txt").write_text(f"file {n}\n")
    first = Snapshotter(store, str(work)).take()
    reads = reading(monkeypatch)
    again = Snapshotter(store, str(work)).take()  # a new process: the cache from the store
    assert again.root == first.root and reads == []
    (work / "f3.txt").write_text("changed\n")
    third = Snapshotter(store, str(work)).take()
    assert reads == [str(work / "f3.txt")]
    assert [c.path for c in diff(store, first.root, third.root)] == ["f3.txt"]


def test_a_change_that_keeps_size_and_mtime_is_still_seen(
    store: CheckpointStore, work: Path, trusting: None
) -> None:
    # A model that rewrites a file and sets its mtime back: the ctime moves all the same.
    victim = work / "config.py"
    victim.write_text("debug = False\n")
    snapshotter = Snapshotter(store, str(work))
    before = snapshotter.take()
    stamp = victim.stat()
    victim.write_text("debug = True!\n"[:14])
    os.utime(victim, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert victim.stat().st_size == stamp.st_size
    after = snapshotter.take()
    assert [c.path for c in diff(store, before.root, after.root)] == ["config.py"]


def test_a_gitignore_edited_by_the_turn_cannot_hide_its_changes(
    store: CheckpointStore, work: Path
) -> None:
    (work / ".gitignore").write_text("*.log\n")
    (work / "notes.txt").write_text("mine\n")
    (work / "old.log").write_text("ignored before\n")
    snapshotter = Snapshotter(store, str(work))
    before = snapshotter.take()
    (work / ".gitignore").write_text("*.log\nnotes.txt\n")  # the turn hides its edit...
    (work / "notes.txt").write_text("the model's\n")
    (work / ".gitignore").write_text("notes.txt\n")  # ...and un-ignores a file it did not make
    after = snapshotter.take(rules_from=before)
    changed = {c.path for c in diff(store, before.root, after.root)}
    assert changed == {".gitignore", "notes.txt"}  # old.log stays out: it was never covered


def test_a_directory_swapped_for_a_link_during_the_walk_is_not_read_through(
    store: CheckpointStore, work: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not ours\n")
    (work / "docs").symlink_to(outside)
    taken = Snapshotter(store, str(work)).take()
    assert listing(store, taken.root) == {"docs": (LINK, 0o777)}


def test_diff_lists_what_came_and_went_with_a_directory(store: CheckpointStore, work: Path) -> None:
    (work / "gone").mkdir()
    (work / "gone" / "a.txt").write_text("a\n")
    snapshotter = Snapshotter(store, str(work))
    before = snapshotter.take()
    (work / "gone" / "a.txt").unlink()
    (work / "gone").rmdir()
    (work / "new" / "deep").mkdir(parents=True)
    (work / "new" / "deep" / "b.txt").write_text("b\n")
    after = snapshotter.take()
    changes = diff(store, before.root, after.root)
    assert [(c.path, c.before is None, c.after is None) for c in changes] == [
        ("gone", False, True),
        ("gone/a.txt", False, True),
        ("new", True, False),
        ("new/deep", True, False),
        ("new/deep/b.txt", True, False),
    ]


def test_a_file_changed_just_before_the_walk_is_read_again(
    store: CheckpointStore, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written in the walk's clock tick, a second write of the same size could look the same.
    (work / "fresh.txt").write_text("one\n")
    snapshotter = Snapshotter(store, str(work))
    snapshotter.take()
    reads = reading(monkeypatch)
    snapshotter.take()
    assert reads == [str(work / "fresh.txt")]


def test_a_file_holding_the_api_key_is_not_kept(store: CheckpointStore, work: Path) -> None:
    from dsh_core.masking import SECRETS

    key = "sk-dsh-checkpoint-test-0123456789"
    SECRETS.hide(key)
    try:
        (work / ".env").write_text(f"DEEPSEEK_API_KEY={key}\n")
        (work / "ok.txt").write_text("nothing secret\n")
        taken = Snapshotter(store, str(work)).take()
    finally:
        SECRETS.clear()
    assert set(listing(store, taken.root)) == {"ok.txt"}
    assert taken.skipped == (".env (holds the API key)",)
    database = (store.directory / "store.sqlite").read_bytes()
    assert key.encode() not in database
