"""Restores: the tree back exactly, conflicts left and named, nothing written through a link."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.checkpoints.restore import (
    apply_restore,
    overwrite,
    plan_restore,
    root_identity,
)
from dsh_core.checkpoints.snapshot import Change, Snapshotter, diff
from dsh_core.checkpoints.store import CheckpointError, CheckpointStore


def tree(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every path below ``root``: its kind, mode and bytes (a link's target)."""
    found: dict[str, tuple[str, int, bytes]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            status = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISLNK(status.st_mode):
                found[relative] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(status.st_mode):
                found[relative] = ("dir", stat.S_IMODE(status.st_mode), b"")
            else:
                found[relative] = ("file", stat.S_IMODE(status.st_mode), path.read_bytes())
    return found


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore.open(tmp_path / "home" / "checkpoints")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hello')\n")
    (path / "src" / "run.sh").write_text("#!/bin/sh\n")
    (path / "src" / "run.sh").chmod(0o755)
    (path / "docs").mkdir(mode=0o750)
    (path / "docs").chmod(0o750)
    (path / "docs" / "guide.md").write_text("# Guide\n")
    (path / "latest").symlink_to("docs/guide.md")
    (path / "empty").mkdir()
    (path / "data.bin").write_bytes(bytes(range(256)) * 4)
    return path


def turn(store: CheckpointStore, work: Path, change: Callable[[], object]) -> list[Change]:
    """What ``change`` did between two checkpoints, as a turn would have it."""
    snapshotter = Snapshotter(store, str(work))
    before = snapshotter.take()
    change()
    after = snapshotter.take(rules_from=before)
    return diff(store, before.root, after.root)


def test_an_undo_puts_the_tree_back_exactly(store: CheckpointStore, work: Path) -> None:
    original = tree(work)

    def havoc() -> None:
        (work / "src" / "app.py").write_text("print('broken')\n")
        (work / "src" / "run.sh").chmod(0o644)
        (work / "docs" / "guide.md").unlink()
        (work / "docs").rmdir()
        (work / "docs").mkdir()  # a directory where one was, another mode
        (work / "latest").unlink()
        (work / "latest").symlink_to("/etc/passwd")
        (work / "empty").rmdir()
        (work / "empty").write_text("a file where a directory was\n")
        (work / "data.bin").unlink()
        (work / "new" / "deep").mkdir(parents=True)
        (work / "new" / "deep" / "made.txt").write_text("the turn made this\n")

    changes = turn(store, work, havoc)
    plan = plan_restore(str(work), root_identity(str(work)), changes, towards="before")
    assert plan.conflicts == ()
    applied = apply_restore(store, plan)
    assert applied.failed == []
    assert tree(work) == original


def test_a_file_changed_since_the_turn_is_left_and_named(
    store: CheckpointStore, work: Path
) -> None:
    def edit() -> None:
        (work / "src" / "app.py").write_text("the model's\n")
        (work / "docs" / "guide.md").write_text("the model's too\n")

    changes = turn(store, work, edit)
    (work / "docs" / "guide.md").write_text("the person's, since\n")
    plan = plan_restore(str(work), root_identity(str(work)), changes, towards="before")
    assert [(c.path, c.why) for c in plan.conflicts] == [
        ("docs/guide.md", "changed since the turn ended")
    ]
    applied = apply_restore(store, plan)
    assert applied.restored == ["src/app.py"]
    assert (work / "src" / "app.py").read_text() == "print('hello')\n"
    assert (work / "docs" / "guide.md").read_text() == "the person's, since\n"
    apply_restore(store, overwrite(plan))  # the person said to overwrite it
    assert (work / "docs" / "guide.md").read_text() == "# Guide\n"


def test_a_directory_swapped_for_a_link_is_never_written_through(
    store: CheckpointStore, work: Path, tmp_path: Path
) -> None:
    home = tmp_path / "user-home"
    home.mkdir()
    (home / ".bashrc").write_text("# the person's\n")

    def edit() -> None:
        (work / "docs" / "guide.md").write_text("the model's\n")
        (work / "docs" / ".bashrc").write_text("planted\n")

    changes = turn(store, work, edit)
    (work / "docs").rename(work / "docs.moved")
    (work / "docs").symlink_to(home)  # between the checkpoint and the undo
    plan = plan_restore(str(work), root_identity(str(work)), changes, towards="before")
    applied = apply_restore(store, overwrite(plan))
    assert (home / ".bashrc").read_text() == "# the person's\n"
    assert sorted(os.listdir(home)) == [".bashrc"]
    assert {c.path for c in plan.conflicts} == {"docs/guide.md", "docs/.bashrc"}
    assert all("symlink" in c.why for c in plan.conflicts)
    assert applied.restored == []


def test_a_working_directory_replaced_by_a_link_is_refused(
    store: CheckpointStore, work: Path, tmp_path: Path
) -> None:
    changes = turn(store, work, lambda: (work / "src" / "app.py").write_text("x\n"))
    identity = root_identity(str(work))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    work.rename(tmp_path / "work.moved")
    work.symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="replaced by a link"):
        plan_restore(str(work), identity, changes, towards="before")
    work.unlink()
    work.mkdir()  # another directory by the same name
    with pytest.raises(CheckpointError, match="not the directory the checkpoint was taken of"):
        plan_restore(str(work), identity, changes, towards="before")
    assert list(elsewhere.iterdir()) == []


def test_a_redo_puts_the_turn_back(store: CheckpointStore, work: Path) -> None:
    def edit() -> None:
        (work / "src" / "app.py").write_text("the turn's\n")
        (work / "made.txt").write_text("made\n")

    changes = turn(store, work, edit)
    after = tree(work)
    identity = root_identity(str(work))
    apply_restore(store, plan_restore(str(work), identity, changes, towards="before"))
    assert not (work / "made.txt").exists()
    apply_restore(store, plan_restore(str(work), identity, changes, towards="after"))
    assert tree(work) == after
