"""The file tools against the classic commands, on one generated tree.

    .venv/bin/python bench/tools.py [--rounds 7] [--files 10000] [--json]

Generates a tree of ``--files`` files (about 5 KiB each, 50 MB for 10,000; nested directories,
a ``.gitignore`` that ignores about 2% of them) in a temporary directory, then times, round
after round and interleaved (the machine is shared and noisy, so only ratios in one run mean
much), with the page cache warm:

- ``grep`` (the tool: prepare and run, as the loop calls it; RE2) against ``grep -rnE`` on the
  same tree, for a pattern with about 100 matching lines and for one with none (goal: at
  most 1.5x);
- ``glob **/*.py`` against ``find -name '*.py' -type f`` (goal: at most 2x);
- ``read`` of a 50 KiB file, per call.

The commands also search the ignored files (2% more work); the tools also sort, stat and skip.
A benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_core.model.seam import ToolCall
from dsh_core.tools import Toolbox, builtin_tools
from dsh_core.trust.workspace import Workspace

_VOCABULARY = """
def return import class self value result data item index count total error path file line text
name list dict for while if else elif try except raise with as lambda yield async await None True
False print open read write close config option parser handler
"""
WORDS = tuple(_VOCABULARY.split())
NEEDLE = "needle_"
"""Planted in 100 lines across the tree."""


def make_tree(root: Path, files: int, seed: int = 7) -> None:
    """``files`` files of word lines (about 5 KiB each) under ``root``, deterministic."""
    rng = random.Random(seed)
    (root / ".gitignore").write_text("build/\n*.tmp\n")
    needles = set(rng.sample(range(files), 100))
    for n in range(files):
        top, mid = n % 20, (n // 20) % 25
        if n % 50 == 0:
            directory = root / "build" / f"b{top}"
        else:
            directory = root / f"pkg{top}" / f"mod{mid}" / ("deep" if n % 3 == 0 else "")
        directory.mkdir(parents=True, exist_ok=True)
        suffix = (".py", ".txt", ".md", ".py", ".tmp" if n % 97 == 0 else ".js")[n % 5]
        lines = []
        size = 0
        while size < 5000:
            line = " ".join(rng.choices(WORDS, k=rng.randint(4, 14)))
            lines.append(line)
            size += len(line) + 1
        if n in needles:
            lines[rng.randrange(len(lines))] += f" {NEEDLE}{n}"
        (directory / f"file{n}{suffix}").write_text("\n".join(lines) + "\n")


def tree_size(root: Path) -> tuple[int, int]:
    count = total = 0
    for directory, _, names in os.walk(root):
        for name in names:
            count += 1
            total += os.path.getsize(os.path.join(directory, name))
    return count, total


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=200, help="read calls per round")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    options = parser.parse_args()
    if shutil.which("grep") is None or shutil.which("find") is None:
        raise SystemExit("bench/tools.py needs grep and find on PATH")

    with tempfile.TemporaryDirectory(prefix="dsh-bench-tools-") as temporary:
        root = Path(temporary) / "tree"
        root.mkdir()
        make_tree(root, options.files)
        big = root / "fifty.txt"
        big.write_text("".join(f"line {i} of a fifty KiB file, for read\n" for i in range(1400)))
        count, total = tree_size(root)
        workspace = Workspace.at(root, Path(temporary) / "out")
        toolbox = Toolbox(builtin_tools(workspace))
        loop = asyncio.new_event_loop()

        def tool(name: str, **arguments: object) -> Callable[[], str]:
            call = ToolCall("bench", name, json.dumps(arguments))

            def run() -> str:
                return loop.run_until_complete(toolbox.prepare(call).run()).content

            return run

        def command(*argv: str) -> Callable[[], object]:
            return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)

        found = tool("grep", pattern=f"{NEEDLE}[0-9]+")().count("\n") + 1
        candidates: dict[str, Callable[[], object]] = {
            "grep tool (~100 matches)": tool("grep", pattern=f"{NEEDLE}[0-9]+"),
            "grep -rnE (~100 matches)": command("grep", "-rnE", f"{NEEDLE}[0-9]+", str(root)),
            "grep tool (no match)": tool("grep", pattern="zq[xv]_absent"),
            "grep -rnE (no match)": command("grep", "-rnE", "zq[xv]_absent", str(root)),
            "glob tool **/*.py": tool("glob", pattern="**/*.py"),
            "find -name *.py": command("find", str(root), "-name", "*.py", "-type", "f"),
        }
        read = tool("read", file_path="fifty.txt")
        times: dict[str, list[float]] = {name: [] for name in candidates}
        reads: list[float] = []
        for work in candidates.values():  # warm the page cache and the imports
            work()
        for _ in range(options.rounds):
            for name, work in candidates.items():
                times[name].append(timed(work))
            reads += [timed(read) for _ in range(options.reads)]
        loop.close()

    best = {name: min(values) for name, values in times.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    pairs = {
        "grep (~100 matches)": ("grep tool (~100 matches)", "grep -rnE (~100 matches)"),
        "grep (no match)": ("grep tool (no match)", "grep -rnE (no match)"),
        "glob vs find": ("glob tool **/*.py", "find -name *.py"),
    }
    ratios = {name: median[tool] / median[command] for name, (tool, command) in pairs.items()}
    # Under load from other processes the medians wander; the best rounds much less.
    best_ratios = {name: best[tool] / best[command] for name, (tool, command) in pairs.items()}
    read_ms = statistics.median(reads) * 1000
    p95 = sorted(reads)[int(len(reads) * 0.95)] * 1000
    result = {
        "tree": {"files": count, "bytes": total, "grep_matches_shown": found},
        "median_s": median,
        "best_s": best,
        "ratios_median": ratios,
        "ratios_best": best_ratios,
        "read_50KiB_ms": {"median": read_ms, "p95": p95},
        "python": sys.version.split()[0],
    }
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(f"tree: {count:,} files, {total / 1e6:.1f} MB; {options.rounds} rounds, interleaved")
    print(f"{'candidate':28} {'median ms':>10} {'best ms':>10}")
    for name in candidates:
        print(f"{name:28} {median[name] * 1e3:10.1f} {best[name] * 1e3:10.1f}")
    print()
    for name, ratio in ratios.items():
        goal = "2x" if name.startswith("glob") else "1.5x"
        print(
            f"ratio {name:22} {ratio:5.2f}x median, {best_ratios[name]:5.2f}x best "
            f"(goal: within {goal})"
        )
    print(f"read of a 50 KiB file: {read_ms:.2f} ms median, {p95:.2f} ms p95 (goal: under 5 ms)")


if __name__ == "__main__":
    main()
