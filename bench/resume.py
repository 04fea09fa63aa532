"""Resuming a long session: ``SessionStore.open`` against ``json.loads`` of the same lines.

    .venv/bin/python bench/resume.py [--rounds 5] [--baseline main]

Writes sessions of 1,000 and 10,000 turns of the kind a working session has (a prompt, a step
that calls ``read``, its call and result, the answer, two usage lines, the end: 8 lines, about
2.4 KB a turn), then, round after round, in a fresh process per candidate:

- the floor, twice: ``json.loads`` of each line (decoded first, as the store does), the values
  dropped as they come (``dropped``) and kept in a list as a loader keeps its events (``kept``);
- ``SessionStore.open``, which reads, checks and decodes every line into events;
- with ``--baseline REV``: the same three in a process running the code of commit ``REV``
  (``git archive``), on the same files.

Each process reports its own ratios (load / floor), so the machine's speed cancels out; the
median of the rounds counts. Then the peak memory of one load (tracemalloc) and the time to fold
the events into the loop's ``History`` (what ``dsh -r`` does next, before its prompt: its own
figure, since the fold is the loop's, not the store's). The third session is the 10,000 turns
again with a compaction every 1,000 turns (each keeping its last two turns): its peak shows
whether the load still holds what the compactions replaced. A benchmark reports; no test
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = ((1_000, 0), (10_000, 0), (10_000, 1_000))
"""(turns, a compaction every so many turns; 0: none)."""
CWD = Path("/bench/project")
USER = "Please look at this function and tell me why it is slow. " * 3
RESULT = "".join(f"{n:6}\tdef step_{n}(x):  # é\n" for n in range(40))
ANSWER = "The loop re-reads the whole file on every iteration, so the cost grows. " * 8

CHILD = r"""
import gc, json, sys, time, tracemalloc
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from dsh_core.session import SessionStore
store, path, sid = SessionStore(Path(sys.argv[2])), Path(sys.argv[3]), sys.argv[4]

def dropped():
    started = time.perf_counter()
    with open(path, "rb") as file:
        for line in file:
            json.loads(line.decode("utf-8"))
    return time.perf_counter() - started

def kept():
    started = time.perf_counter()
    with open(path, "rb") as file:
        values = [json.loads(line.decode("utf-8")) for line in file]
    seconds = time.perf_counter() - started
    del values
    return seconds

def load():
    started = time.perf_counter()
    log, _ = store.open(sid)
    seconds = time.perf_counter() - started
    log.close()
    return seconds

figures = {}
for name, run in (("dropped", dropped), ("kept", kept), ("load", load)):
    gc.collect()
    figures[name] = min(run() for _ in range(3))
if "--peak" in sys.argv:
    gc.collect()
    tracemalloc.start()
    with open(path, "rb") as file:
        values = [json.loads(line.decode("utf-8")) for line in file]
    figures["peak_kept"] = tracemalloc.get_traced_memory()[1]
    del values
    tracemalloc.stop()
    gc.collect()
    tracemalloc.start()
    log, _ = store.open(sid)
    figures["peak"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    from dsh_core.agent.history import History
    history = History()
    started = time.perf_counter()
    history.update(log.events)
    figures["history"] = time.perf_counter() - started
    log.close()
print(json.dumps(figures))
"""


def build(home: Path, turns: int, compact_every: int = 0) -> tuple[str, Path]:
    """A closed session of ``turns`` working turns, written through the log; with
    ``compact_every``, a ``/compact`` after every so many turns that keeps the last two."""
    from dsh_core.model.seam import ToolCall, Usage
    from dsh_core.session import SessionStore
    from dsh_core.session.events import (
        AssistantStep,
        CompactionEnd,
        CompactionStart,
        CompactionSummary,
        StepUsage,
        ToolCallStarted,
        ToolOutput,
        ToolResult,
        TurnEnd,
        TurnStart,
        UserText,
    )

    store = SessionStore(home)
    with store.create(CWD) as log:
        for turn in range(1, turns + 1):
            call = ToolCall(f"call_{turn}", "read", json.dumps({"file_path": f"src/m{turn}.py"}))
            log.extend(
                [
                    TurnStart(turn, "deepseek-v4-flash"),
                    UserText(turn, f"{turn}: {USER}"),
                    AssistantStep(turn, 1, "Reading it.", "I should read.", (call,)),
                    ToolCallStarted(turn, 1, call.id, call.name, call.arguments),
                    ToolResult(turn, 1, call.id, ToolOutput(RESULT)),
                    StepUsage(turn, 1, Usage(1000 + turn, 30, 900, 10)),
                    AssistantStep(turn, 2, ANSWER),
                    StepUsage(turn, 2, Usage(1600 + turn, 300, 1000, 0)),
                    TurnEnd(turn, "completed"),
                ]
            )
            if compact_every and turn % compact_every == 0:
                through = len(log.events) - 2 * 9 - 1  # the last two turns are kept
                log.append(CompactionStart(None, "manual", 900_000))
                log.append(CompactionSummary(None, ANSWER * 4, through, 900_000, 60_000))
                log.append(CompactionEnd(None))
        return log.id, log.path


def baseline_source(rev: str, into: Path) -> Path:
    """The package at commit ``rev``, unpacked from ``git archive``."""
    archive = into.with_suffix(".tar")
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "-o", str(archive), rev, "dsh_core"], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def child(source: Path, home: Path, path: Path, sid: str, *, peak: bool = False) -> Any:
    command = [sys.executable, "-c", CHILD, str(source), str(home), str(path), sid]
    done = subprocess.run([*command, *(["--peak"] if peak else [])], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", metavar="REV", help="also measure the code at this commit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-resume-") as scratch:
        home = Path(scratch) / "sessions"
        candidates = {"now": ROOT}
        if args.baseline:
            candidates[args.baseline] = baseline_source(args.baseline, Path(scratch) / "base")
        for turns, compact_every in SIZES:
            sid, path = build(home, turns, compact_every)
            lines = sum(1 for _ in path.open("rb"))
            compacted = f", a compaction every {compact_every:,} turns" if compact_every else ""
            print(
                f"{turns:,} turns{compacted}: {lines:,} lines, {path.stat().st_size / 1e6:.1f} MB"
            )
            found: dict[str, list[Any]] = {name: [] for name in candidates}
            for _ in range(args.rounds):
                for name, source in candidates.items():
                    found[name].append(child(source, home, path, sid))
            for name, rounds in found.items():
                load = statistics.median(r["load"] for r in rounds) * 1000
                versus = {
                    floor: statistics.median(r["load"] / r[floor] for r in rounds)
                    for floor in ("dropped", "kept")
                }
                print(
                    f"  {name:>8}: open {load:7.1f} ms = {versus['dropped']:.2f}x json.loads "
                    f"(values dropped), {versus['kept']:.2f}x (values kept)   (goal <= 1.5x)"
                )
            for name, source in candidates.items():
                extra = child(source, home, path, sid, peak=True)
                print(
                    f"  {name:>8}: peak {extra['peak'] / 1e6:.1f} MB for "
                    f"{path.stat().st_size / 1e6:.1f} MB of log (json.loads, kept: "
                    f"{extra['peak_kept'] / 1e6:.1f} MB); then History.update "
                    f"{extra['history'] * 1000:.1f} ms = "
                    f"{extra['history'] / extra['dropped']:.2f}x "
                    "json.loads (values dropped)"
                )


if __name__ == "__main__":
    main()
