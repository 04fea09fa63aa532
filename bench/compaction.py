"""A long session under a small window: what compaction costs, validity, memory, the cache prefix.

    .venv/bin/python bench/compaction.py [--steps 2000] [--window 20000] [--baseline main] [--json]

The real ``dsh`` process runs on a pipe against the stub server (in this process, keeping no
request bodies), with ``--context-window`` and the stub refusing above the same window. Each
line is a ``toolfiles`` turn: three steps that each ``read`` one of 50 files of 2-20 KB (sizes
drawn once, seeded), then the answer, four requests a turn, until ``--steps`` requests were
answered (summary requests not counted). ``--baseline REF`` runs the same session, interleaved
in the same run, with the dsh of git ``REF`` (its packages by ``git archive`` in a temporary
directory, put first on ``PYTHONPATH``; the stub is this checkout's for both). A thread follows the
session log as it is written and reads dsh's resident memory (``VmRSS``) each time a
``compaction/end`` or ``compaction/prune`` appears. Reported, for each build:

- compaction's cost: summary requests, and the tokens they spent (prompt and completion, from
  the log's ``compaction/summary`` usage), prunes (which cost no request);

- requests: answered, refused for breaking DeepSeek's history rules (must be 0), refused as
  too long (then compacted and retried), summary requests;
- the prefix: the share of answered requests whose messages begin, byte for byte, with the
  previous answered request's (the stub checks it on the raw bodies), all of them and all but
  the first after each compaction or prune (target: 100%), and the cache-hit share of all
  prompt tokens and of the normal steps' (summary requests left out);
- dsh's RSS after each compaction or prune: the first, the last, the largest, and the growth
  from the first to the last, beside the size of the session log;
- the size's error: replaying the log, dsh's reckoning of each request's size (the last
  ``prompt_tokens`` and the estimate of what came since) against the stub's count of it, for
  requests after a measured one and for the first after a compaction (the estimate alone).

A benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

import itertools
import random

from dsh_core.agent.compaction import conversation_size, tools_tokens
from dsh_core.agent.history import History
from dsh_core.session import read_log
from dsh_core.session.events import (
    AssistantStep,
    CompactionEnd,
    CompactionPrune,
    CompactionSummary,
    StepUsage,
)
from dsh_core.testing import StubServer
from dsh_core.tools import Toolbox, Workspace, builtin_tools
from tests.support import DSH, child_env, proc_status

STEPS_PER_TURN = 4
"""``toolfiles`` of three files: three steps that call ``read``, then the answer."""
FILES = 50
SEED = 29


def write_files(work: Path) -> list[str]:
    """``FILES`` text files of 2-20 KB (80-character lines, so ``read`` shows them whole)."""
    sizes = random.Random(SEED)
    names = []
    for index in range(FILES):
        name = f"f-{index:02d}.txt"
        size = sizes.randint(2_000, 20_000)
        line = f"{name} line of text, the quick brown fox jumps over the lazy dog {index:04d}.\n"
        (work / name).write_text((line * (size // len(line) + 1))[:size])
        names.append(name)
    return names


def turn_lines(turns: int, names: list[str]) -> bytes:
    picks = random.Random(SEED + 1)
    return "".join(
        f"turn {n} toolfiles {' '.join(picks.sample(names, 3))}\n" for n in range(turns)
    ).encode()


class LogFollower(threading.Thread):
    """Reads the session log as dsh writes it; samples dsh's RSS at each ``compaction/end``."""

    def __init__(self, home: Path, pid: int) -> None:
        super().__init__(name="log-follower", daemon=True)
        self.home = home
        self.pid = pid
        self.rss_kb: list[int] = []
        self.log_bytes: list[int] = []
        self.turn_ends = 0
        self.prunes = 0
        self.done = threading.Event()

    def run(self) -> None:
        path: Path | None = None
        offset, pending = 0, b""
        while not self.done.is_set():
            if path is None:
                found = list(self.home.rglob("session.jsonl"))
                path = found[0] if found else None
            if path is not None:
                with open(path, "rb") as file:
                    file.seek(offset)
                    data = file.read()
                offset += len(data)
                *lines, pending = (pending + data).split(b"\n")
                for line in lines:
                    kind = json.loads(line).get("type")
                    if kind in ("compaction/end", "compaction/prune"):
                        try:
                            self.rss_kb.append(proc_status(self.pid)["VmRSS"])
                        except FileNotFoundError:
                            return
                        self.log_bytes.append(offset)
                    elif kind == "turn/end":
                        self.turn_ends += 1
                    if kind == "compaction/prune":
                        self.prunes += 1
            time.sleep(0.01)  # how soon a line is noticed, not a measure of anything


def size_errors(log: Path, work: Path) -> dict[str, list[float]]:
    """Replay ``log``: dsh's size before each request against the prompt_tokens it reported,
    as a share of the latter; apart for requests with no measured one since the last
    compaction (the estimate alone)."""
    tools = tools_tokens(Toolbox(builtin_tools(Workspace.at(work, output_dir=work))).specs)
    events = read_log(log).events
    history = History()
    errors: dict[str, list[float]] = {"measured": [], "estimated": []}
    guess, kind = 0, "estimated"
    for index, event in enumerate(events):
        if isinstance(event.record, AssistantStep):
            history.update(events[:index])
            guess = conversation_size(history, tools)
            kind = "estimated" if history.measure is None else "measured"
        elif isinstance(event.record, StepUsage) and guess:
            actual = event.record.usage.prompt_tokens
            errors[kind].append((guess - actual) / actual)
            guess = 0
        elif isinstance(event.record, CompactionEnd | CompactionPrune):
            guess = 0
    return errors


def compaction_tokens(log: Path) -> int:
    """Tokens the summary requests spent, prompt and completion, as the log recorded them."""
    return sum(
        e.record.usage.prompt_tokens + e.record.usage.completion_tokens
        for e in read_log(log).events
        if isinstance(e.record, CompactionSummary)
    )


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    low, high = ordered[len(ordered) // 20], ordered[-1 - len(ordered) // 20]
    return f"median {median:+.1%}, 90% within {low:+.1%} .. {high:+.1%} (n={len(values)})"


def measure(steps: int, window: int, build: Path | None = None) -> dict[str, Any]:
    """One session of ``steps`` answered requests; ``build``: the checkout whose dsh runs
    (None: this one)."""
    turns = -(-steps // STEPS_PER_TURN)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-compaction-") as scratch:
        work, home = Path(scratch) / "work", Path(scratch) / "home"
        work.mkdir()
        names = write_files(work)
        with StubServer(context_window=window, record=False) as stub:
            env = child_env(stub.url, home)
            if build is not None:
                env["PYTHONPATH"] = str(build)
            lines = turn_lines(turns, names)
            started = time.perf_counter()
            proc = subprocess.Popen(
                [*DSH, "--context-window", str(window), "--quiet"],
                cwd=work,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            follower = LogFollower(home, proc.pid)
            follower.start()
            _, stderr = proc.communicate(lines)
            seconds = time.perf_counter() - started
            follower.done.set()
            follower.join()
            served = stub.served
        log = next(home.rglob("session.jsonl"))
        errors = size_errors(log, work)
        spent = compaction_tokens(log)
    answered = [s for s in served if not s.refused]
    steps_answered = [s for s in answered if not s.summary]
    too_long = [s for s in served if s.refused and "maximum context length" in s.refused]
    broken = [s for s in served if s.refused and s not in too_long]
    pairs = list(itertools.pairwise(answered))
    extends = [now.prompt.extends_previous for _, now in pairs]
    breaks = sum(1 for _, now in pairs if not now.prompt.extends_previous)
    rss = follower.rss_kb
    return {
        "exit_status": proc.returncode,
        "stderr_tail": stderr.decode("utf-8", "replace")[-500:] if proc.returncode else "",
        "seconds": seconds,
        "window": window,
        "turns": follower.turn_ends,
        "steps_answered": len(steps_answered),
        "summary_requests": sum(s.summary for s in answered),
        "refused_as_too_long": len(too_long),
        "refused_for_history_rules": len(broken),
        "compactions": len(rss) - follower.prunes,
        "prunes": follower.prunes,
        "compaction_tokens": spent,
        "prefix_share_all": sum(map(bool, extends)) / max(len(extends), 1),
        "prefix_breaks": breaks,
        "prefix_breaks_allowed": len(rss),
        "max_prompt_tokens": max(s.prompt.tokens for s in answered),
        "cache_hit_share": sum(s.prompt.cache_hit for s in answered)
        / max(sum(s.prompt.tokens for s in answered), 1),
        "step_prompt_tokens": sum(s.prompt.tokens for s in steps_answered),
        "step_cache_hit_share": sum(s.prompt.cache_hit for s in steps_answered)
        / max(sum(s.prompt.tokens for s in steps_answered), 1),
        "rss_kb_after_compactions": rss,
        "log_bytes_at_compactions": follower.log_bytes,
        "size_error_measured": _spread(errors["measured"]),
        "size_error_estimate_alone": _spread(errors["estimated"]),
    }


def baseline_checkout(ref: str, into: Path) -> Path:
    """The packages of git ``ref``, unpacked under ``into`` by ``git archive`` (no worktree:
    the repository's list of worktrees is left as it was), to be put first on ``PYTHONPATH``."""
    root = Path(__file__).resolve().parents[1]
    path = into / "baseline"
    path.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", ref, "dsh_core", "dsh_stdio"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return path


def report(name: str, figures: dict[str, Any]) -> None:
    rss = figures["rss_kb_after_compactions"]
    logs = figures["log_bytes_at_compactions"]
    print(
        f"{name}: {figures['steps_answered']} steps in {figures['turns']} turns under a "
        f"{figures['window']:,}-token window, {figures['seconds']:.1f} s, exit status "
        f"{figures['exit_status']} {figures['stderr_tail']}"
    )
    print(
        f"  compaction: {figures['summary_requests']} summary requests spending "
        f"{figures['compaction_tokens']:,} tokens, {figures['prunes']} prunes; "
        f"{figures['refused_as_too_long']} refused as too long (compacted, retried), "
        f"{figures['refused_for_history_rules']} refused for DeepSeek's history rules; "
        f"largest prompt {figures['max_prompt_tokens']:,} tokens"
    )
    print(
        f"  prefix: {figures['prefix_share_all']:.1%} of answered requests begin with the "
        f"previous one's messages; {figures['prefix_breaks']} breaks for "
        f"{figures['prefix_breaks_allowed']} compactions and prunes (target: no more); cache "
        f"hits {figures['cache_hit_share']:.1%} of prompt tokens "
        f"({figures['step_cache_hit_share']:.1%} "
        f"on the {figures['step_prompt_tokens']:,} prompt tokens of normal steps)"
    )
    print(
        f"  size, dsh's reckoning against the stub's count: after a measured request "
        f"{figures['size_error_measured']}; the first after a compaction (estimate alone) "
        f"{figures['size_error_estimate_alone']}"
    )
    if rss:
        growth = (rss[-1] - rss[0]) / 1024
        print(
            f"  RSS after each of {len(rss)} compactions and prunes: first {rss[0] / 1024:.1f} "
            f"MB, last {rss[-1] / 1024:.1f} MB, largest {max(rss) / 1024:.1f} MB "
            f"(+{growth:.1f} MB; the session log grew from {logs[0] / 1e6:.1f} to "
            f"{logs[-1] / 1e6:.1f} MB meanwhile)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20_000)
    parser.add_argument("--baseline", metavar="REF", help="also run the dsh of this git ref")
    parser.add_argument("--runs", type=int, default=1, help="sessions per build, interleaved")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {"this": [], args.baseline or "": []}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-baseline-") as scratch:
        build = baseline_checkout(args.baseline, Path(scratch)) if args.baseline else None
        for _ in range(args.runs):
            results["this"].append(measure(args.steps, args.window))
            if build is not None:
                results[args.baseline].append(measure(args.steps, args.window, build))
    if args.json:
        print(json.dumps({name: runs for name, runs in results.items() if runs}))
        return
    for name, runs in results.items():
        for figures in runs:
            report(name, figures)
    if build is not None:
        for key in ("summary_requests", "compaction_tokens", "step_prompt_tokens"):
            this = sum(f[key] for f in results["this"])
            old = sum(f[key] for f in results[args.baseline])
            print(f"{key}: this build / {args.baseline} = {this / max(old, 1):.2f}")


if __name__ == "__main__":
    main()
