"""What the sandbox adds to a command: bwrap with its seccomp filter against no sandbox.

    .venv/bin/python bench/sandbox.py [--rounds 40] [--json] [--baseline main]

Runs ``bash {"command": "true"}`` through the ``bash`` tool (prepare and run, as the loop calls
it), round after round and interleaved (the machine is shared and noisy, so only figures from
one run compare), in a working directory under ``/var/tmp`` that is a git repository with a
nested one and a ``.venv``-like directory of dsh's (so the confinement has something to keep):

- unsandboxed: ``bash -c true`` as it is;
- sandboxed: under bubblewrap as dsh runs it, seccomp filter, confinement and all;
- sandboxed without the filter: the same, to show what the filter costs;
- bare bwrap: bwrap with the namespaces and no mounts but ``/``, the floor under which no
  bubblewrap sandbox goes on this machine.

``--baseline REV`` adds the sandboxed command of dsh at commit REV (``git archive``, imported
in a worker process of its own, in a project of its own built the same way), one of its rounds
after each of ours, and the ratio of the two.

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


async def timed_run(tool: BashTool) -> tuple[float, float, float]:
    """One ``bash -c true``: wall seconds, the command's CPU seconds, dsh's own CPU seconds."""
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


def serve_rounds(root: Path) -> None:
    """``--worker``: the sandboxed command of whatever dsh_core this process imports (the
    baseline's, by ``PYTHONPATH``), one round per line read, one JSON line back each."""
    import dsh_core

    workspace = Workspace.at(root, root.parent / "out-baseline")
    tool = BashTool(workspace, launcher=choose_launcher("on", workspace=workspace))
    print(json.dumps({"dsh_core": dsh_core.__file__}), flush=True)
    for _ in sys.stdin:
        elapsed, used, dsh = asyncio.run(timed_run(tool))
        print(json.dumps([elapsed, used, dsh]), flush=True)


_REPOSITORY = Path(__file__).resolve().parent.parent
"""The checkout this bench is in: ``git archive`` from a subdirectory would take only that."""


class Baseline:
    """dsh at another commit, in a worker process: :meth:`run` is one round of it."""

    def __init__(self, rev: str, base: Path) -> None:
        source = base / "baseline-source"
        source.mkdir()
        archive = subprocess.run(
            ["git", "archive", rev], check=True, capture_output=True, cwd=_REPOSITORY
        )
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", rev],
            check=True,
            capture_output=True,
            text=True,
            cwd=_REPOSITORY,
        )
        self.name = f"sandboxed at {rev} ({commit.stdout.strip()})"
        root = base / "work-baseline"
        make_project(root)
        env = {**os.environ, "PYTHONPATH": str(source)}
        self.worker = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(root)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.worker.stdout is not None
        imported = json.loads(self.worker.stdout.readline())["dsh_core"]
        assert imported.startswith(str(source)), f"the worker imported {imported}"

    def run(self) -> tuple[float, float, float]:
        assert self.worker.stdin is not None and self.worker.stdout is not None
        self.worker.stdin.write("run\n")
        self.worker.stdin.flush()
        elapsed, used, dsh = json.loads(self.worker.stdout.readline())
        return float(elapsed), float(used), float(dsh)

    def close(self) -> None:
        if self.worker.stdin is not None:
            self.worker.stdin.close()
        self.worker.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--tree", type=int, default=50_000, help="entries of the scan's tree")
    parser.add_argument("--baseline", metavar="REV", help="also dsh's sandbox at this commit")
    parser.add_argument("--worker", metavar="ROOT", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        serve_rounds(Path(options.worker))
        return
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
        baseline = Baseline(options.baseline, base) if options.baseline else None
        names = [*candidates, *([baseline.name] if baseline is not None else [])]
        times: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        own: dict[str, list[float]] = {name: [] for name in names}

        def record(name: str, figures: tuple[float, float, float]) -> None:
            times[name].append(figures[0])
            cpu[name].append(figures[1])
            own[name].append(figures[2])

        async def rounds() -> None:
            for tool in tools.values():  # warm: imports, the repository scan, the page cache
                await timed_run(tool)
            if baseline is not None:
                baseline.run()
            for _ in range(options.rounds):
                for name, tool in tools.items():
                    record(name, await timed_run(tool))
                if baseline is not None:
                    record(baseline.name, baseline.run())

        try:
            asyncio.run(rounds())
        finally:
            if baseline is not None:
                baseline.close()
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
        "load_average": os.getloadavg()[0],
    }
    if options.baseline:
        prior = next(name for name in names if name.startswith("sandboxed at "))
        result["baseline"] = {
            "name": prior,
            "ratio": median["sandboxed"] / median[prior],
            "added_ms_then": median[prior] - median["unsandboxed"],
            "dsh_cpu_ratio": own_ms["sandboxed"] / own_ms[prior],
        }
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(f"bash -c true through the bash tool; {options.rounds} rounds, interleaved")
    print(f"{'candidate':30} {'median ms':>10} {'cpu ms':>8} {'dsh cpu ms':>11}")
    for name in names:
        print(f"{name:30} {median[name]:10.2f} {cpu_ms[name]:8.2f} {own_ms[name]:11.2f}")
    print()
    print(
        f"the sandbox adds {added:.2f} ms per command (target: under 15 ms), {result['ratio']:.2f}x"
    )
    print(f"of which the seccomp filter: {result['filter_ms']:.2f} ms")
    print(f"above bare bwrap: {result['above_bare_bwrap_ms']:.2f} ms")
    print(f"load average: {os.getloadavg()[0]:.2f} (other work on this machine)")
    print(f"mounts kept for this project: {result['mounts']}")
    if options.baseline:
        then = result["baseline"]
        print(
            f"sandboxed now / {then['name']}: {then['ratio']:.2f}x wall, "
            f"{then['dsh_cpu_ratio']:.2f}x dsh's CPU (then it added {then['added_ms_then']:.2f} ms)"
        )
    print()
    print(f"the repository scan on a tree of {options.tree:,} entries, ms per ask:")
    for name, value in scan.items():
        print(f"  {name.removesuffix('_ms').replace('_', ' '):28} {value:8.2f}")


if __name__ == "__main__":
    main()
