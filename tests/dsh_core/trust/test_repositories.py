"""The scan for repositories and protected names below the working directory: walked once, then
kept up to date from inotify, at a cost that follows the changes, not the tree."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.trust import repositories
from dsh_core.trust.repositories import RepositoryScan


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path.resolve()


def names(root: Path, paths: tuple[Path, ...]) -> list[str]:
    return [str(path.relative_to(root)) for path in paths]


@pytest.fixture(params=["inotify", "walking"])
def scan(
    request: pytest.FixtureRequest, root: Path, monkeypatch: pytest.MonkeyPatch
) -> RepositoryScan:
    """A scan kept up to date by inotify, and one that walks again at each ask (where inotify
    is not to be had): both must see the same."""
    if request.param == "walking":
        monkeypatch.setattr(repositories._Inotify, "open", classmethod(lambda cls: None))
    return RepositoryScan(root)


def test_what_a_later_ask_sees(root: Path, scan: RepositoryScan) -> None:
    (root / ".git").mkdir()  # the top's own: not listed (looked at on every ask anyway)
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    (root / "node_modules" / "x").mkdir(parents=True)
    found = scan.found()
    assert names(root, found.repositories) == ["vendor/lib"]
    assert found.complete
    # Made after the first ask, as a command would: a repository in a new directory, one in
    # an old directory, a git directory by hand, a .dsh and an AGENTS.md.
    (root / "new" / "deep" / ".git").mkdir(parents=True)
    (root / "node_modules" / "x" / ".git").write_text("gitdir: ../../elsewhere\n")
    bare = root / "cache" / "g"
    for name in ("objects", "refs"):
        (bare / name).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "docs" / ".dsh").mkdir(parents=True)
    (root / "docs" / "AGENTS.md").write_text("x\n")
    (root / "AGENTS.md").write_text("the top's\n")
    found = scan.found()
    assert names(root, found.repositories) == ["new/deep", "node_modules/x", "vendor/lib"]
    assert names(root, found.git_directories) == ["cache/g"]
    assert names(root, found.protected) == ["docs/.dsh", "docs/AGENTS.md"]
    # Moved: seen where it went, forgotten where it was.
    (root / "vendor").rename(root / "third_party")
    assert names(root, scan.found().repositories) == [
        "new/deep",
        "node_modules/x",
        "third_party/lib",
    ]


def test_a_git_directory_completed_in_place_is_seen(root: Path, scan: RepositoryScan) -> None:
    store = root / "store"
    (store / "objects").mkdir(parents=True)
    (store / "refs").mkdir()
    assert scan.found().git_directories == ()
    (store / "HEAD").write_text("ref: refs/heads/main\n")  # the last of the three
    assert scan.found().git_directories == (store,)


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The directories the scan lists, in order."""
    seen: list[str] = []
    real = os.scandir

    def scandir(path: str) -> object:
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # (the scan's os is this os)
    yield seen


def test_catching_up_lists_only_what_is_new(root: Path, listed: list[str]) -> None:
    for n in range(50):
        (root / f"d{n}" / "sub").mkdir(parents=True)
    scan = RepositoryScan(root)
    scan.found()
    assert len(listed) == 101  # the first ask: the top and every directory
    listed.clear()
    (root / "d7" / "sub" / "made" / ".git").mkdir(parents=True)
    (root / "d9" / "file.txt").write_text("x\n")  # a file: nothing to list
    assert names(root, scan.found().repositories) == ["d7/sub/made"]
    assert listed == [str(root / "d7" / "sub" / "made")]
    listed.clear()
    scan.found()
    assert listed == []  # nothing happened: nothing listed


def test_lost_events_mean_a_walk(root: Path, listed: list[str]) -> None:
    many = root / "many"
    many.mkdir()
    scan = RepositoryScan(root)
    scan.found()  # many/ is watched now
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    pair = [str(many / "a"), str(many / "b")]
    Path(pair[0]).touch()
    for n in range(limit + 10):  # more events than the kernel queues: it says it dropped some
        os.rename(pair[n % 2], pair[1 - n % 2])  # a name moved in: one event each
    (root / "late" / ".git").mkdir(parents=True)
    listed.clear()
    assert names(root, scan.found().repositories) == ["late"]
    assert str(root) in listed  # walked from the top again


def test_the_scan_stops_at_its_budget(root: Path) -> None:
    for n in range(5):
        (root / f"d{n}").mkdir()
    assert not RepositoryScan(root, budget=3).found().complete
    assert RepositoryScan(root, budget=100).found().complete
    assert not RepositoryScan(Path("/")).found().complete  # the whole disk is never walked


def test_a_submodule_made_with_git_is_seen(root: Path) -> None:
    scan = RepositoryScan(root)
    scan.found()
    subprocess.run(["git", "init", "-q", str(root / "libs" / "evil")], check=True)
    assert names(root, scan.found().repositories) == ["libs/evil"]
