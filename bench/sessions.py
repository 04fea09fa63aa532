"""``dsh --sessions`` and ``-r ID`` / ``--show ID``: listing and finding sessions, each against
its floor, in one run (SPEC section 9, issue 32).

    .venv/bin/python bench/sessions.py [--dir DIR] [--sessions N] [--rounds 5] [--baseline REV]

Builds N sessions (default 1,000) in one working directory, written the way the loop writes
them: most have 1-20 short turns; 2% are long (2,000 turns, about 3.5 MB); 2% end in an open
turn of 40 tool results of 30,000 characters (about 1.2 MB after the last turn/start, the
worst case for the tail scan); 2% start with a 32 KiB system prompt and a 200 KiB first
message. Then, in a fresh process per candidate (this checkout, and with ``--baseline`` the
code of commit ``REV``, by ``git archive``), round after round:

- the listing, ``print_listing`` (what ``dsh --sessions`` runs), against its floor: a plain
  walk that opens each log, reads the same head and tail (16 KiB, then on in chunks growing
  four times, as far as the first user message and back to the last turn line),
  ``json.loads`` the three lines a listing shows (a long message: its first 4 KiB), sorts;
- resolving an id as ``--show ID`` and ``-r ID`` do (``session_id``, then ``find``), with 10
  and with 10,000 sessions stored (over 50 working directories), for a whole id and for a
  prefix of one; the floor is one ``stat`` of the log whose path is known.

Each process reports its own ratios, so the machine's speed cancels out; the median of the
rounds counts. Then the listing as a whole process, interpreter start included. It reports;
nothing here asserts a time. The page cache is warm: the files were just written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dsh_core.model.seam import ToolCall, Usage
from dsh_core.session import SessionStore
from dsh_core.session.events import (
    AssistantStep,
    Record,
    StepUsage,
    SystemPrompt,
    ToolOutput,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserText,
)

CWD = Path("/bench/project")
USER = "Please look at this function and tell me why it is slow. " * 3
ANSWER = "The loop re-reads the whole file on every iteration, so the cost grows. " * 20


def turn(number: int, user: str = USER) -> list[Record]:
    return [
        TurnStart(number, "deepseek-v4-flash"),
        UserText(number, f"{number}: {user}"),
        AssistantStep(number, 1, ANSWER),
        StepUsage(number, 1, Usage(1000 + number, 300, 900, 0)),
        TurnEnd(number, "completed"),
    ]


def open_tool_turn(number: int) -> list[Record]:
    calls = tuple(ToolCall(f"call_{n}", "bash", '{"command": "make test"}') for n in range(40))
    return [
        TurnStart(number, "deepseek-v4-flash"),
        UserText(number, "run the tests"),
        AssistantStep(number, 1, "Running them.", tool_calls=calls),
        *(ToolResult(number, 1, call.id, ToolOutput("x" * 30_000, exit_code=0)) for call in calls),
    ]


def build(home: Path, count: int) -> int:
    """``count`` sessions under ``home``; returns the bytes written."""
    rng = random.Random(12)
    clock = (datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=n) for n in range(10**9))
    ids = (f"20261101-{n:06d}-{rng.randrange(16**6):06x}" for n in range(10**9))
    store = SessionStore(home, clock=lambda: next(clock), new_id=lambda: next(ids))
    total = 0
    for index in range(count):
        kind = index % 50
        records: list[Record] = []
        if kind == 0:
            records = [r for n in range(1, 2_001) for r in turn(n)]
        elif kind == 1:
            records = [*turn(1), *open_tool_turn(2)]
        elif kind == 2:
            records = [SystemPrompt("p" * 32 * 1024), *turn(1, "diff " * 40_000), *turn(2)]
        else:
            records = [r for n in range(1, rng.randint(1, 20) + 1) for r in turn(n)]
        with store.create(CWD) as log:
            for record in records:
                log.append(record)
        total += log.path.stat().st_size
        os.utime(log.path, (1_700_000_000 + index, 1_700_000_000 + index))
    return total


CHILD = r"""
import io, json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from dsh_core.session import SessionStore
from dsh_stdio.commands.sessions import print_listing, session_id
listed_home, cwd, places = Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4])
HEAD = TAIL = 1 << 14

def best(run, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)

def line_at(data, start):
    end = data.find(b"\n", start)
    if start < 0 or end < 0:
        return None
    return json.loads(data[start:end]) if end - start < 4096 else data[start : start + 4096]

USER, TURN = b'\n{"type":"user/message",', b'\n{"type":"turn/'

def first_line(fd, head, size):
    # Reads on from the head in growing chunks, as far as the first user message.
    data, chunk = head, HEAD * 4
    while (at := data.find(USER)) < 0 and len(data) < min(size, 1 << 20):
        data += os.pread(fd, chunk, len(data))
        chunk *= 4
    if at >= 0 and data.find(b"\n", at + 1) < 0:
        data += os.pread(fd, 4096, len(data))
    return line_at(data, at + 1) if at >= 0 else None

def last_line(fd, size):
    # Reads back from the end in growing chunks, as far as the last turn line.
    data, chunk = b"", TAIL
    while (at := data.rfind(TURN)) < 0 and len(data) < size:
        start = max(0, size - len(data) - chunk)
        data = os.pread(fd, size - len(data) - start, start) + data
        chunk = min(chunk * 4, 1 << 20)
    return line_at(data, at + 1) if at >= 0 else None

def walk():
    # The floor: what any listing must do, plainly: find the logs, read the same head and
    # tail (as far as the first user message and back to the last turn line), json.loads the
    # three lines it shows (the header, that message, that turn line), sort by modification
    # time.
    found = []
    for key in os.scandir(listed_home / "sessions"):
        if key.name.startswith("."):
            continue
        for session in os.scandir(key.path):
            fd = os.open(os.path.join(session.path, "session.jsonl"), os.O_RDONLY)
            try:
                status = os.fstat(fd)
                head = os.pread(fd, HEAD, 0)
                header = line_at(head, 0)
                user = first_line(fd, head, status.st_size)
                turn = last_line(fd, status.st_size)
            finally:
                os.close(fd)
            found.append((status.st_mtime_ns, session.name, header, user, turn))
    found.sort(key=lambda item: item[:2], reverse=True)

def listing():
    out, err = io.StringIO(), io.StringIO()
    print_listing(SessionStore(listed_home), cwd, all_directories=False, out=out, err=err)

figures = {"walk": best(walk, 5), "listing": best(listing, 5)}
for name, (home, sid, log) in places.items():
    store = SessionStore(Path(home))
    figures[f"{name}/stat"] = best(lambda: os.stat(log), 200)  # one look: the floor
    figures[f"{name}/id"] = best(lambda: store.find(session_id(store, sid)), 20)
    figures[f"{name}/prefix"] = best(lambda: store.find(session_id(store, sid[:-3])), 5)
print(json.dumps(figures))
"""


def build_many(home: Path, count: int, keys: int = 50) -> tuple[str, Path]:
    """``count`` one-turn sessions over ``keys`` working directories, written as files (the
    store's fsyncs would make 10,000 take minutes, and building is not what is measured), with
    their index entries; the id and log of one in the middle."""
    from dsh_core.session.ids import note
    from dsh_core.session.lines import encode_line
    from dsh_core.session.store import cwd_key

    rng = random.Random(7)
    root = home / "sessions"
    body = b"".join(encode_line(event.to_json()) for event in _events([*turn(1)]))
    chosen: tuple[str, Path] | None = None
    for index in range(count):
        cwd = f"/bench/project-{index % keys}"
        session_id = f"20261101-{index:06d}-{rng.randrange(16**6):06x}"
        directory = root / cwd_key(cwd) / session_id
        directory.mkdir(parents=True)
        header = {"type": "session", "version": 1, "id": session_id, "created": "t", "cwd": cwd}
        log = directory / "session.jsonl"
        log.write_bytes(encode_line(header) + body)
        note(root, session_id, log)
        if index == count // 2:
            chosen = session_id, log
    assert chosen is not None
    return chosen


def _events(records: list[Record]) -> list[Any]:
    from dsh_core.session.events import SessionEvent

    return [SessionEvent(n, "2026-11-01T00:00:00.000Z", r) for n, r in enumerate(records)]


def baseline_source(rev: str, into: Path) -> Path:
    """The packages at commit ``rev``, unpacked from ``git archive``."""
    archive = into.with_suffix(".tar")
    root = Path(__file__).resolve().parents[1]
    command = ["git", "-C", str(root), "archive", "-o", str(archive), rev, "dsh_core", "dsh_stdio"]
    subprocess.run(command, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def child(source: Path, home: Path, places: dict[str, Any]) -> dict[str, float]:
    command = [sys.executable, "-c", CHILD, str(source), str(home), str(CWD), json.dumps(places)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(done.stderr)
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def process_seconds(command: list[str], repeat: int = 3) -> tuple[float, int, str]:
    best, status, lines = float("inf"), 0, ""
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        best = min(best, time.perf_counter() - started)
        status, lines = done.returncode, f"{done.stdout.count(chr(10))} lines"
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return best, status, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, help="where to build the sessions (default: a temp dir)"
    )
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", metavar="REV", help="also measure the code at this commit")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        home = Path(temp) / "home"
        started = time.perf_counter()
        written = build(home, args.sessions)
        places: dict[str, Any] = {}
        for count in (10, 10_000):
            many = Path(temp) / f"many-{count}"
            sid, log = build_many(many, count)
            places[f"{count:,} sessions"] = (str(many), sid, str(log))
        print(
            f"built {args.sessions:,} sessions to list ({written / 1e6:.1f} MB) and 10 and "
            f"10,000 to look up, in {time.perf_counter() - started:.1f} s"
        )
        candidates = {"now": root}
        if args.baseline:
            candidates[args.baseline] = baseline_source(args.baseline, Path(temp) / "base")
        found: dict[str, list[dict[str, float]]] = {name: [] for name in candidates}
        for _ in range(args.rounds):
            for name, source in candidates.items():
                found[name].append(child(source, home, places))
        for name, rounds in found.items():
            listing = statistics.median(r["listing"] for r in rounds)
            ratio = statistics.median(r["listing"] / r["walk"] for r in rounds)
            print(
                f"  {name:>8}: --sessions ({args.sessions:,}) {listing * 1000:6.1f} ms = "
                f"{ratio:.2f}x a plain walk reading the same head and tail   (goal <= 1.5x)"
            )
            for place in places:
                for what in ("id", "prefix"):
                    seconds = statistics.median(r[f"{place}/{what}"] for r in rounds)
                    versus = statistics.median(
                        r[f"{place}/{what}"] / r[f"{place}/stat"] for r in rounds
                    )
                    print(
                        f"  {name:>8}: {'whole id' if what == 'id' else 'id prefix':>9}, "
                        f"{place:>16}: {seconds * 1e6:8.0f} us = {versus:7.1f}x one stat"
                    )
        code = (
            f"import sys, pathlib; sys.path.insert(0, {str(root)!r}); "
            "from dsh_core.session import SessionStore; "
            "from dsh_stdio.commands.sessions import print_listing; "
            f"sys.exit(print_listing(SessionStore(pathlib.Path({str(home)!r})), "
            f"pathlib.Path({str(CWD)!r}), all_directories=False, out=sys.stdout, err=sys.stderr))"
        )
        seconds, _, what = process_seconds([sys.executable, "-c", code])
        print(f"python -c print_listing, whole process: {seconds * 1000:.0f} ms ({what})")


if __name__ == "__main__":
    main()
