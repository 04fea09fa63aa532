"""``grep`` over a walk divided between two processes (:mod:`dsh_core.tools.tree.divided`).

Every test here forks for real: :data:`FILES_FIRST` is lowered so that small trees divide, and
the result is compared with the one a single process gives on the same tree.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.tools.tree import divided
from tests.dsh_core.tools.test_builtin import Tools, tools

__all__ = ["tools"]

_FORKS: list[int] = []
_IN_CHILD: list[str] = []
"""What a forked child does first, for the test that sets it: ``die``, ``hang``, or nothing."""


_FORK_LOG: list[Path] = []
"""Where each forked child writes its parent's id, for the test that sets it."""


def _after_fork_in_child() -> None:
    if _FORK_LOG:
        with _FORK_LOG[0].open("a") as log:
            log.write(f"{os.getppid()}\n")
    if not _IN_CHILD:
        return
    if _IN_CHILD[0] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if _IN_CHILD[0].startswith("wait:"):  # the first child only, until its parent waits
        marker = Path(_IN_CHILD.pop()[5:])
        deadline = time.monotonic() + 60  # a bound for a broken test
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        return
    if _IN_CHILD[0].startswith("hang:"):
        Path(_IN_CHILD[0][5:]).write_text(str(os.getpid()))
        time.sleep(120)


os.register_at_fork(after_in_parent=lambda: _FORKS.append(1), after_in_child=_after_fork_in_child)


@pytest.fixture
def early(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Walks divide after their first file."""
    monkeypatch.setattr(divided, "FILES_FIRST", 1)
    yield
    _IN_CHILD.clear()


def plant(root: Path, seed: int, directories: int = 12) -> None:
    """A tree of ``directories`` top directories, nested, with matches, binary files, symlinks
    leading outside, an ignore file and (not as root) unreadable files."""
    rng = random.Random(seed)
    outside = root.parent / "outside.txt"
    outside.write_text("needle outside\n")
    for top in range(directories):
        for depth in range(rng.randint(1, 3)):
            directory = root / f"top{top}" / "/".join(f"d{n}" for n in range(depth))
            directory.mkdir(parents=True, exist_ok=True)
            for n in range(rng.randint(1, 6)):
                lines = [f"line {k} of {top}/{depth}/{n}" for k in range(rng.randint(1, 30))]
                for _ in range(rng.randint(0, 3)):
                    lines[rng.randrange(len(lines))] += f" needle {rng.randint(0, 99)}"
                path = directory / f"f{n}.txt"
                path.write_text("\n".join(lines) + "\n")
                roll = rng.random()
                if roll < 0.1:
                    path.write_bytes(b"needle\0binary\n")
                elif roll < 0.15:
                    (directory / f"out{n}.txt").symlink_to(outside)
                elif roll < 0.2 and os.geteuid() != 0:
                    path.chmod(0)
            if rng.random() < 0.3:
                (directory / ".gitignore").write_text("f1.txt\n")


def both(tools: Tools, monkeypatch: pytest.MonkeyPatch, **arguments: str) -> tuple[str, str]:
    """The result divided (it must fork) and the result of one process (it must not)."""
    monkeypatch.setattr(divided, "FILES_FIRST", 1)
    forks = len(_FORKS)
    shared = tools.run("grep", **arguments)
    assert len(_FORKS) > forks, "the walk did not divide"
    monkeypatch.setattr(divided, "FILES_FIRST", 10**9)
    forks = len(_FORKS)
    alone = tools.run("grep", **arguments)
    assert len(_FORKS) == forks
    return shared, alone


def divided_twice(
    tools: Tools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **arguments: str
) -> str:
    """The result of a walk whose first child, held until its parent waits for it, divides
    its part again (it must)."""
    marker = tmp_path / "parent-waits"
    me = os.getpid()
    say_idle = divided.Division._say_idle

    def said(self: divided.Division) -> None:
        say_idle(self)
        if os.getpid() == me:
            marker.touch()

    monkeypatch.setattr(divided.Division, "_say_idle", said)
    monkeypatch.setattr(divided, "FILES_FIRST", 1)
    _IN_CHILD.append(f"wait:{marker}")
    _FORK_LOG.append(tmp_path / "forks")
    try:
        result = tools.run("grep", **arguments)
    finally:
        _FORK_LOG.clear()
        _IN_CHILD.clear()
    parents = (tmp_path / "forks").read_text().split()
    assert str(me) in parents and len(set(parents)) >= 2, "the child did not divide"
    return result


@pytest.mark.parametrize("seed", range(6))
def test_a_divided_search_shows_what_one_process_shows(
    tools: Tools, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    plant(tools.root, seed)
    for arguments in ({"pattern": "needle [0-9]+"}, {"pattern": "needle 7", "glob": "*.txt"}):
        shared, alone = both(tools, monkeypatch, **arguments)
        assert shared == alone
    assert "needle" in alone and "[skipped:" in alone


@pytest.mark.parametrize("twice", [False, True])
def test_a_search_stopped_at_the_cap_in_a_childs_part_counts_as_one_process_would(
    tools: Tools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, twice: bool
) -> None:
    # Few matches first; the last top directories (the child's, and its child's) hold far more
    # than the cap, with binary files and symlinks on both sides of where one process stops.
    (tools.root / "a.txt").write_text("hit\n")
    (tools.root.parent / "outside.txt").write_text("hit\n")
    for top in range(10):
        for sub in range(4):
            directory = tools.root / f"top{top}" / f"sub{sub}"
            directory.mkdir(parents=True)
            hits = 1 if top < 5 else 15
            for n in range(hits):
                (directory / f"f{n:02}.txt").write_text("hit\n")
                (directory / f"g{n:02}.bin").write_bytes(b"hit\0")
                (directory / f"h{n:02}.txt").symlink_to(tools.root.parent / "outside.txt")
    shared, alone = both(tools, monkeypatch, pattern="hit")
    assert shared == alone
    assert "[stopped at 250 matches" in alone and "binary files" in alone
    if twice:
        assert divided_twice(tools, monkeypatch, tmp_path, pattern="hit") == alone


def test_a_child_divides_its_part_again_once_its_parent_waits(
    tools: Tools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The parent's part is small, the child's large: the parent, done, says it is idle, and
    # the child (held until then) gives half of its part to a child of its own.
    (tools.root / "a.txt").write_text("needle at the top\n")
    for top in range(4):
        for sub in range(8):
            directory = tools.root / f"top{top}" / f"sub{sub}"
            directory.mkdir(parents=True)
            for n in range(3):
                (directory / f"f{n}.txt").write_text(f"x\nneedle {top} {sub} {n}\n")
    alone = both(tools, monkeypatch, pattern="needle")[1]
    assert divided_twice(tools, monkeypatch, tmp_path, pattern="needle") == alone
    assert alone.count("\n") == 4 * 8 * 3


@pytest.mark.parametrize("fate", ["die", "report fails"])
def test_a_child_that_fails_has_its_part_searched_by_the_parent(
    tools: Tools, monkeypatch: pytest.MonkeyPatch, early: None, fate: str
) -> None:
    plant(tools.root, 1)
    expected = both(tools, monkeypatch, pattern="needle")[1]
    monkeypatch.setattr(divided, "FILES_FIRST", 1)
    if fate == "die":
        _IN_CHILD.append("die")
    else:

        def broken(fd: int, data: bytes) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(divided, "_write_all", broken)
    forks = len(_FORKS)
    assert tools.run("grep", pattern="needle") == expected
    assert len(_FORKS) > forks


def test_a_child_that_hangs_is_killed_and_its_part_searched_by_the_parent(
    tools: Tools, monkeypatch: pytest.MonkeyPatch, early: None, tmp_path: Path
) -> None:
    plant(tools.root, 2)
    expected = both(tools, monkeypatch, pattern="needle")[1]
    monkeypatch.setattr(divided, "FILES_FIRST", 1)
    monkeypatch.setattr(divided, "_patience", lambda took: 0.2)
    _IN_CHILD.append(f"hang:{tmp_path / 'child'}")
    assert tools.run("grep", pattern="needle") == expected
    _assert_reaped(int((tmp_path / "child").read_text()))


def test_a_cancelled_divided_search_leaves_no_process_behind(
    tools: Tools, early: None, tmp_path: Path
) -> None:
    plant(tools.root, 3)
    pid_file = tmp_path / "child"
    _IN_CHILD.append(f"hang:{pid_file}")
    invocation = tools.prepare("grep", pattern="needle")

    async def main() -> None:
        task = asyncio.ensure_future(invocation.run())
        await asyncio.to_thread(_wait_for, pid_file)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    for worker in [thread for thread in threading.enumerate() if thread.name == "dsh-search"]:
        worker.join()
    _assert_reaped(int(pid_file.read_text()))


def _wait_for(path: Path) -> None:
    while not path.exists() or not path.read_text():
        time.sleep(0.01)


def _assert_reaped(pid: int) -> None:
    with pytest.raises(ChildProcessError):  # not a child any more: killed and waited for
        os.waitpid(pid, os.WNOHANG)


def test_walks_that_can_reach_proc_are_never_divided() -> None:
    assert not divided._worth_dividing("/")
    assert not divided._worth_dividing("/proc")
    assert not divided._worth_dividing("/proc/1")
    assert divided._worth_dividing("/procfs") == (len(os.sched_getaffinity(0)) >= 2)
