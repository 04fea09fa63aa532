"""The file tools against the classic commands, on one generated tree.

    .venv/bin/python bench/tools.py [--rounds 7] [--files 10000] [--tree DIR] [--json]

Generates a tree of ``--files`` files (about 5 KiB each, 50 MB for 10,000; nested directories,
a ``.gitignore`` that ignores about 2% of them) in a temporary directory, or searches an existing
``--tree`` (a real one: the Python standard library, ``python3 -c 'import sysconfig;
print(sysconfig.get_paths()["stdlib"])'``), then times, round after round and interleaved (the
machine is shared and noisy, so only ratios in one run mean much), with the page cache warm:

- ``grep`` (the tool: prepare and run, as the loop calls it; RE2) against ``grep -rnE`` and
  ripgrep (``rg -n --no-require-git``, when installed) on the same tree, for each of
  :data:`PATTERNS`: literal starts, a character class, alternations, with matches and without
  (goal: at most 1.5x ``grep -rnE`` and 2x ``rg``);
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

PATTERNS = {
    "~100 matches": f"{NEEDLE}[0-9]+",
    "no match": "zq[xv]_absent",
    "class": "[Nn]EEDLE_4007",
    "alternation": f"{NEEDLE}1[0-9]+|quux_absent",
    "group of words": "(frobnicate|quuxify)_[a-z]+",
}
"""What each grep pattern stands for, and the pattern: none of them matches more than 250 lines
in the generated tree, so the tool never stops early where the commands read on."""


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
    parser.add_argument("--tree", type=Path, help="search this tree instead of a generated one")
    parser.add_argument("--reads", type=int, default=200, help="read calls per round")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    options = parser.parse_args()
    if shutil.which("grep") is None or shutil.which("find") is None:
        raise SystemExit("bench/tools.py needs grep and find on PATH")
    rg = shutil.which("rg")

    with tempfile.TemporaryDirectory(prefix="dsh-bench-tools-") as temporary:
        if options.tree is None:
            root = Path(temporary) / "tree"
            root.mkdir()
            make_tree(root, options.files)
            big = root / "fifty.txt"
            big.write_text(
                "".join(f"line {i} of a fifty KiB file, for read\n" for i in range(1400))
            )
        else:
            root = options.tree.resolve()
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

        shown = {
            label: _lines(tool("grep", pattern=pattern)()) for label, pattern in PATTERNS.items()
        }
        candidates: dict[str, Callable[[], object]] = {}
        pairs: dict[str, tuple[str, str]] = {}
        for label, pattern in PATTERNS.items():
            candidates[f"grep tool ({label})"] = tool("grep", pattern=pattern)
            candidates[f"grep -rnE ({label})"] = command("grep", "-rnE", pattern, str(root))
            pairs[f"vs grep -rnE ({label})"] = (f"grep tool ({label})", f"grep -rnE ({label})")
            if rg is not None:
                rg_argv = (rg, "-n", "--no-require-git", pattern, str(root))
                candidates[f"rg ({label})"] = command(*rg_argv)
                pairs[f"vs rg ({label})"] = (f"grep tool ({label})", f"rg ({label})")
        candidates["glob tool **/*.py"] = tool("glob", pattern="**/*.py")
        candidates["find -name *.py"] = command("find", str(root), "-name", "*.py", "-type", "f")
        pairs["glob vs find"] = ("glob tool **/*.py", "find -name *.py")
        read = None if options.tree is not None else tool("read", file_path="fifty.txt")
        times: dict[str, list[float]] = {name: [] for name in candidates}
        reads: list[float] = []
        for work in candidates.values():  # warm the page cache and the imports
            work()
        for _ in range(options.rounds):
            for name, work in candidates.items():
                times[name].append(timed(work))
            if read is not None:
                reads += [timed(read) for _ in range(options.reads)]
        loop.close()

    best = {name: min(values) for name, values in times.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    ratios = {name: median[tool] / median[command] for name, (tool, command) in pairs.items()}
    # Under load from other processes the medians wander; the best rounds much less.
    best_ratios = {name: best[tool] / best[command] for name, (tool, command) in pairs.items()}
    result: dict[str, object] = {
        "tree": {"root": str(root), "files": count, "bytes": total, "lines_shown": shown},
        "median_s": median,
        "best_s": best,
        "ratios_median": ratios,
        "ratios_best": best_ratios,
        "python": sys.version.split()[0],
    }
    if reads:
        read_ms = statistics.median(reads) * 1000
        p95 = sorted(reads)[int(len(reads) * 0.95)] * 1000
        result["read_50KiB_ms"] = {"median": read_ms, "p95": p95}
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"tree: {root}, {count:,} files, {total / 1e6:.1f} MB; {options.rounds} rounds, interleaved"
    )
    print("lines shown: " + ", ".join(f"{label} {lines}" for label, lines in shown.items()))
    print(f"{'candidate':34} {'median ms':>10} {'best ms':>10}")
    for name in candidates:
        print(f"{name:34} {median[name] * 1e3:10.1f} {best[name] * 1e3:10.1f}")
    print()
    for name, ratio in ratios.items():
        goal = "2x" if name.startswith(("glob", "vs rg")) else "1.5x"
        print(
            f"ratio {name:32} {ratio:5.2f}x median, {best_ratios[name]:5.2f}x best "
            f"(goal: within {goal})"
        )
    if reads:
        print(
            f"read of a 50 KiB file: {read_ms:.2f} ms median, {p95:.2f} ms p95 (goal: under 5 ms)"
        )


def _lines(result: str) -> int:
    """Lines of matches in a grep tool result (0 for "no matches ...")."""
    if result.startswith("no matches for "):
        return 0
    return sum(1 for line in result.splitlines() if not line.startswith("["))


if __name__ == "__main__":
    main()
