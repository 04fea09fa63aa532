"""Checkpoints against the bare walk and against git, on bench/tools.py's tree (SPEC 14).

    .venv/bin/python bench/checkpoints.py [--files 10000] [--rounds 7] [--turns 100]

Generates ``--files`` files (about 5 KiB each: 50 MB for 10,000), then, interleaved round after
round (only ratios in one run mean much on a shared machine):

- a checkpoint of the unchanged tree against a bare ``os.scandir`` + ``stat`` walk of it
  (goal: at most 1.5x);
- the first checkpoint into an empty store against ``git add -A`` into a fresh repository
  (no user configuration; goal: at most 1.5x);
- ``--turns`` turns each rewriting one file: the store's growth against the bytes changed
  (goal: at most 2x);
- an undo of a turn that changed 1,000 files (goal: under 1 s).

A benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import WORDS, make_tree  # bench/tools.py: the same tree its benchmark walks

from dsh_core.checkpoints.restore import apply_restore, plan_restore, root_identity
from dsh_core.checkpoints.snapshot import Snapshotter, diff
from dsh_core.checkpoints.store import CheckpointStore

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
}


def bare_walk(root: str) -> int:
    """What any checkpoint must do at least: list every directory, stat every entry."""
    count = 0
    pending = [root]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for entry in listing:
                status = entry.stat(follow_symlinks=False)
                count += 1
                if stat.S_ISDIR(status.st_mode):
                    pending.append(entry.path)
    return count


def timed(work: object) -> float:
    assert callable(work)
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def first_checkpoint(root: Path, scratch: Path) -> float:
    store = CheckpointStore.open(scratch / "first")
    try:
        return timed(lambda: Snapshotter(store, str(root)).take())
    finally:
        store.close()
        shutil.rmtree(scratch / "first")


def git_add(root: Path, scratch: Path) -> float:
    repository = scratch / "git"
    subprocess.run(["git", "init", "-q", str(repository)], check=True, env=GIT_ENV)
    git = [
        "git",
        f"--git-dir={repository}/.git",
        f"--work-tree={root}",
        "-c",
        "core.hooksPath=/dev/null",
    ]
    try:
        return timed(lambda: subprocess.run([*git, "add", "-A"], check=True, env=GIT_ENV))
    finally:
        shutil.rmtree(repository)


def text(rng: random.Random, lines: int) -> str:
    return "\n".join(" ".join(rng.choices(WORDS, k=9)) for _ in range(lines)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="dsh-bench-checkpoints-"))
    try:
        root = scratch / "tree"
        root.mkdir()
        make_tree(root, args.files)
        time.sleep(2.1)  # past the racy window: the stat cache may trust every file
        store = CheckpointStore.open(scratch / "home")
        snapshotter = Snapshotter(store, str(root))
        snapshotter.take()
        walks, checkpoints, firsts, gits = [], [], [], []
        for _ in range(args.rounds):
            walks.append(timed(lambda: bare_walk(str(root))))
            checkpoints.append(timed(snapshotter.take))
        for _ in range(max(1, args.rounds // 3)):
            firsts.append(first_checkpoint(root, scratch))
            gits.append(git_add(root, scratch))
        walk, unchanged = statistics.median(walks), statistics.median(checkpoints)
        first, git = statistics.median(firsts), statistics.median(gits)
        print(
            f"unchanged tree: checkpoint {unchanged * 1e3:.1f} ms, bare walk "
            f"{walk * 1e3:.1f} ms: {unchanged / walk:.2f}x (goal 1.5x)"
        )
        print(
            f"first checkpoint {first:.2f} s, git add -A {git:.2f} s: "
            f"{first / git:.2f}x (goal 1.5x)"
        )

        rng = random.Random(1)
        files = sorted(p for p in root.rglob("*.py") if "build" not in p.parts)
        grown_from, changed = store.size(), 0
        for _ in range(args.turns):
            before = snapshotter.take()
            content = text(rng, 90)
            rng.choice(files).write_text(content)
            changed += len(content.encode())
            snapshotter.take(rules_from=before)
        growth = store.size() - grown_from
        print(
            f"{args.turns} turns of one file: store grew {growth:,} bytes for {changed:,} "
            f"changed: {growth / changed:.2f}x (goal 2x)"
        )

        before = snapshotter.take()
        for path in files[:1000]:
            path.write_text(text(rng, 60))
        after = snapshotter.take(rules_from=before)
        changes = diff(store, before.root, after.root)
        identity = root_identity(str(root))
        undo = timed(
            lambda: apply_restore(
                store, plan_restore(str(root), identity, changes, towards="before")
            )
        )
        print(f"undo of a turn that changed {len(changes):,} files: {undo:.2f} s (goal under 1 s)")
        print(f"load: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
