"""What the sandbox adds to a command: bwrap with its seccomp filter against no sandbox.

    .venv/bin/python bench/sandbox.py [--rounds 40] [--json]

Runs ``bash {"command": "true"}`` through the ``bash`` tool (prepare and run, as the loop calls
it), round after round and interleaved (the machine is shared and noisy, so only figures from
one run compare), in a working directory under ``/var/tmp`` that is a git repository with a
nested one and a ``.venv``-like directory of dsh's (so the confinement has something to keep):

- unsandboxed: ``bash -c true`` as it is;
- sandboxed: under bubblewrap as dsh runs it, seccomp filter, confinement and all;
- sandboxed without the filter: the same, to show what the filter costs;
- bare bwrap: bwrap with the namespaces and no mounts but ``/``, the floor under which no
  bubblewrap sandbox goes on this machine.

Reports the median per command, the sandbox's added milliseconds (target: under 15 ms) and the
ratio; and the CPU time the command's processes used (user and system, from ``wait4``) and
dsh's own (the confinement, the look afterwards), which a loaded machine disturbs less than the
wall clock. A benchmark reports; no test asserts a time.

Then what the repository scan costs on a big tree (``--tree``, 50,000 entries by default: the
scan's budget), since it is asked before and after every command: the first ask (a walk, and a
watch per directory), an ask when nothing changed, one after a command made a repository, and,
for comparison, walking the tree again at each ask (what it does where inotify is not to be
had).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from dsh_core.tools.shell import BashTool
from dsh_core.trust.launchers import UNSANDBOXED, Launch, Launcher
from dsh_core.trust.repositories import RepositoryScan
from dsh_core.trust.sandbox import Bwrap, choose_launcher, probe_bwrap
from dsh_core.trust.workspace import Workspace


@dataclasses.dataclass(frozen=True)
class BareBwrap:
    """bwrap with the sandbox's namespaces and nothing else: the floor, for comparison."""

    program: str
    note: str = "(bare bwrap)"

    def launch(self, argv: Sequence[str]) -> contextlib.AbstractContextManager[Launch]:
        options = ["--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent"]
        return contextlib.nullcontext(Launch([self.program, *options, "--", *argv]))


def make_project(root: Path) -> None:
    """A repository with one commit, a nested repository and a ``.venv`` directory."""
    for repository in (root, root / "vendor" / "lib"):
        repository.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repository)], check=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "src").mkdir()
    for n in range(50):
        (root / "src" / f"module{n}.py").write_text(f"VALUE = {n}\n")


def scan_costs(base: Path, entries: int, rounds: int) -> dict[str, float]:
    """Milliseconds per ask of a :class:`RepositoryScan` on a tree of ``entries`` entries (20
    files a directory), medians of ``rounds``."""
    root = base / "tree"
    for n in range(entries // 21):
        directory = root / f"d{n // 50}" / f"e{n % 50}"
        directory.mkdir(parents=True)
        for m in range(20):
            (directory / f"f{m}.txt").touch()

    def timed(call: Callable[[], object]) -> float:
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3

    scan = RepositoryScan(root)
    first = timed(scan.found)
    unchanged, changed, walked = [], [], []
    for n in range(rounds):
        unchanged.append(timed(scan.found))
        (root / f"d{n}" / "made" / ".git").mkdir(parents=True)
        changed.append(timed(scan.found))
        assert (root / f"d{n}" / "made") in scan.found().repositories
        walked.append(timed(RepositoryScan(root)._walk_all))
    return {
        "first_ask_ms": first,
        "unchanged_ms": statistics.median(unchanged),
        "after_a_new_repository_ms": statistics.median(changed),
        "walking_again_ms": statistics.median(walked),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--tree", type=int, default=50_000, help="entries of the scan's tree")
    options = parser.parse_args()
    problem = probe_bwrap()
    if problem is not None:
        raise SystemExit(f"bench/sandbox.py needs a working bubblewrap: {problem}")
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="dsh-bench-sandbox-", dir="/var/tmp")))
    try:
        root = base / "work"
        make_project(root)
        workspace = Workspace.at(root, base / "out")
        sandboxed = choose_launcher("on", workspace=workspace)
        assert isinstance(sandboxed, Bwrap)
        candidates: dict[str, Launcher] = {
            "unsandboxed": UNSANDBOXED,
            "sandboxed": sandboxed,
            "sandboxed, no seccomp filter": dataclasses.replace(sandboxed, seccomp=None),
            "bare bwrap": BareBwrap(sandboxed.program),
        }
        tools = {
            name: BashTool(workspace, launcher=launcher) for name, launcher in candidates.items()
        }
        times: dict[str, list[float]] = {name: [] for name in candidates}
        cpu: dict[str, list[float]] = {name: [] for name in candidates}
        own: dict[str, list[float]] = {name: [] for name in candidates}

        async def run(tool: BashTool) -> tuple[float, float, float]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            own = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            output = await tool.prepare({"command": "true"}).run()
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            own_after = resource.getrusage(resource.RUSAGE_SELF)
            assert output.exit_code == 0, output.content
            used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            dsh = own_after.ru_utime - own.ru_utime + own_after.ru_stime - own.ru_stime
            return elapsed, used, dsh

        async def rounds() -> None:
            for tool in tools.values():  # warm: imports, the repository scan, the page cache
                await run(tool)
            for _ in range(options.rounds):
                for name, tool in tools.items():
                    elapsed, used, dsh = await run(tool)
                    times[name].append(elapsed)
                    cpu[name].append(used)
                    own[name].append(dsh)

        asyncio.run(rounds())
        plan = sandboxed.confinement()
        scan = scan_costs(base, options.tree, 20)
    finally:
        shutil.rmtree(base)
    median = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    cpu_ms = {name: statistics.mean(values) * 1e3 for name, values in cpu.items()}
    own_ms = {name: statistics.mean(values) * 1e3 for name, values in own.items()}
    added = median["sandboxed"] - median["unsandboxed"]
    result = {
        "rounds": options.rounds,
        "median_ms": median,
        "cpu_ms": cpu_ms,
        "dsh_cpu_ms": own_ms,
        "added_ms": added,
        "ratio": median["sandboxed"] / median["unsandboxed"],
        "filter_ms": median["sandboxed"] - median["sandboxed, no seccomp filter"],
        "above_bare_bwrap_ms": median["sandboxed"] - median["bare bwrap"],
        "mounts": {
            "read_only": len(plan.read_only),
            "pinned": len(plan.pinned),
            "tripwires": len(plan.tripwires),
            "hidden": len(plan.hidden_dirs) + len(plan.hidden_files),
        },
        "scan": {"entries": options.tree, **scan},
        "python": sys.version.split()[0],
    }
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(f"bash -c true through the bash tool; {options.rounds} rounds, interleaved")
    print(f"{'candidate':30} {'median ms':>10} {'cpu ms':>8} {'dsh cpu ms':>11}")
    for name in candidates:
        print(f"{name:30} {median[name]:10.2f} {cpu_ms[name]:8.2f} {own_ms[name]:11.2f}")
    print()
    print(
        f"the sandbox adds {added:.2f} ms per command (target: under 15 ms), {result['ratio']:.2f}x"
    )
    print(f"of which the seccomp filter: {result['filter_ms']:.2f} ms")
    print(f"above bare bwrap: {result['above_bare_bwrap_ms']:.2f} ms")
    print(f"load average: {os.getloadavg()[0]:.2f} (other work on this machine)")
    print(f"mounts kept for this project: {result['mounts']}")
    print()
    print(f"the repository scan on a tree of {options.tree:,} entries, ms per ask:")
    for name, value in scan.items():
        print(f"  {name.removesuffix('_ms').replace('_', ' '):28} {value:8.2f}")


if __name__ == "__main__":
    main()
