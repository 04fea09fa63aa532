"""``dsh --sessions`` benchmark: listing 1,000 sessions, some of them large (SPEC section 9).

    .venv/bin/python bench/sessions.py [--dir DIR] [--sessions N]

Builds N sessions (default 1,000) in one working directory, written the way the loop writes
them: most have 1-20 short turns; 2% are long (2,000 turns, about 3.5 MB); 2% end in an open
turn of 40 tool results of 30,000 characters (about 1.2 MB after the last turn/start, the
worst case for the tail scan); 2% start with a 32 KiB system prompt and a 200 KiB first
message. Then it lists them: in-process (best of 5, with the bytes read from /proc/self/io),
and as a whole process (interpreter start included), through ``python -c`` and, once the front
door has the flag, ``dsh --sessions``. The target is under a second for the listing. It
reports; nothing here asserts a time. The page cache is warm: the files were just written.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
from dsh_stdio.commands.sessions import print_listing

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


def read_bytes() -> int:
    """Bytes this process has read through read/pread so far (``rchar``)."""
    with open("/proc/self/io") as status:
        for line in status:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def best_listing(store: SessionStore, repeat: int = 5) -> tuple[float, int, int]:
    best, lines, read = float("inf"), 0, 0
    for _ in range(repeat):
        out, err = io.StringIO(), io.StringIO()
        before = read_bytes()
        started = time.perf_counter()
        print_listing(store, CWD, all_directories=False, out=out, err=err)
        best = min(best, time.perf_counter() - started)
        read = read_bytes() - before
        lines = out.getvalue().count("\n")
    return best, lines, read


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        home = Path(temp) / "home"
        started = time.perf_counter()
        written = build(home, args.sessions)
        print(
            f"built {args.sessions:,} sessions, {written / 1e6:.1f} MB, "
            f"in {time.perf_counter() - started:.1f} s"
        )
        store = SessionStore(home)
        seconds, lines, read = best_listing(store)
        print(
            f"print_listing, in process: {seconds * 1000:.0f} ms for {lines:,} lines "
            f"(best of 5), {read / 1e6:.2f} MB read of {written / 1e6:.1f} MB"
        )
        root = str(Path(__file__).resolve().parents[1])
        code = (
            f"import sys, pathlib; sys.path.insert(0, {root!r}); "
            "from dsh_core.session import SessionStore; "
            "from dsh_stdio.commands.sessions import print_listing; "
            f"sys.exit(print_listing(SessionStore(pathlib.Path({str(home)!r})), "
            f"pathlib.Path({str(CWD)!r}), all_directories=False, out=sys.stdout, err=sys.stderr))"
        )
        seconds, status, what = process_seconds([sys.executable, "-c", code])
        print(f"python -c print_listing, whole process: {seconds * 1000:.0f} ms ({what})")
        # The CLI lists the directory it runs in, and /bench/project need not exist: --all.
        command = [sys.executable, "-m", "dsh_stdio", "--sessions", "--all", "--home", str(home)]
        seconds, status, what = process_seconds(command)
        if status == 0:
            print(f"dsh --sessions --all, whole process: {seconds * 1000:.0f} ms ({what})")
        else:
            print(f"dsh --sessions --all: not available yet (exit {status}: {what})")


if __name__ == "__main__":
    main()
