"""Load run: one pipe session of many turns against the stub, and what it costs as it grows.

    .venv/bin/python bench/load.py [--turns 1000] [--json]

Runs the real ``dsh`` on a pipe and feeds it one line per turn, each after the previous answer
is back, timing every turn from the line written to its answer read. It reports:

- connections the stub accepted (keep-alive: should be 1 for the whole session);
- open file descriptors and resident memory of the dsh process after turn 10 and after the
  last turn (``/proc/<pid>/fd`` and ``VmRSS``/``VmHWM`` in ``/proc/<pid>/status``), next to
  the size of the conversation itself (its session log);
- time per turn, early against late: every turn sends the whole history, so some growth is the
  history's own; the request body sizes are printed beside the times.

A benchmark reports; only clear breakage (a failed turn, a non-zero exit) makes it exit 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support

from dsh_core.testing import StubServer
from tests.support import DSH, child_env, proc_status


def line_for(turn: int) -> str:
    return f"turn {turn:04d}: please answer in one short sentence"


def run(turns: int, window: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dsh-load-") as tmp, StubServer() as stub:
        home = Path(tmp) / "home"
        env = child_env(stub.url, home)
        with open(Path(tmp) / "stderr", "wb") as stderr:
            proc = subprocess.Popen(
                DSH, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
            )
            assert proc.stdin is not None and proc.stdout is not None
            times: list[float] = []
            samples: dict[int, dict[str, int]] = {}
            failures: list[str] = []
            started = time.monotonic()
            for turn in range(1, turns + 1):
                text = line_for(turn)
                begin = time.perf_counter()
                proc.stdin.write(f"{text}\n".encode())
                proc.stdin.flush()
                answer = proc.stdout.readline().decode()
                times.append(time.perf_counter() - begin)
                if answer != f"You said: {text}\n":
                    failures.append(f"turn {turn}: {answer[:200]!r}")
                    break
                if turn in (10, turns):
                    samples[turn] = proc_status(proc.pid)
            total = time.monotonic() - started
            proc.stdin.close()
            status = proc.wait(timeout=60)
            proc.stdout.close()
        (log,) = home.rglob("session.jsonl")
        requests = stub.requests
        first = times[1 : 1 + window]  # turn 1 also pays for connecting and lazy imports
        last = times[-window:]
        return {
            "turns": len(times),
            "exit_status": status,
            "failures": failures,
            "connections_opened": stub.connections_opened,
            "fds_at_10": samples.get(10, {}).get("fds"),
            "fds_at_end": samples.get(turns, {}).get("fds"),
            "rss_kb_at_10": samples.get(10, {}).get("VmRSS"),
            "rss_kb_at_end": samples.get(turns, {}).get("VmRSS"),
            "peak_rss_kb_at_end": samples.get(turns, {}).get("VmHWM"),
            "log_bytes": log.stat().st_size,
            "request_bytes_first": len(json.dumps(requests[0])) if requests else 0,
            "request_bytes_last": len(json.dumps(requests[-1])) if requests else 0,
            "window": window,
            "ms_per_turn_first_window": round(statistics.median(first) * 1000, 2),
            "ms_per_turn_last_window": round(statistics.median(last) * 1000, 2),
            "ms_per_turn_p95": round(statistics.quantiles(times, n=20)[-1] * 1000, 2),
            "ms_turn_1": round(times[0] * 1000, 2),
            "seconds": round(total, 2),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One long pipe session against the stub.")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=None, help="turns per timing window")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    window = args.window or max(10, args.turns // 10)
    result = run(args.turns, window)
    if args.json:
        print(json.dumps(result))
    else:
        end = result["turns"]
        print(f"{end} turns in {result['seconds']} s, exit status {result['exit_status']}")
        print(f"connections opened: {result['connections_opened']}")
        print(f"open fds: turn 10 {result['fds_at_10']}, turn {end} {result['fds_at_end']}")
        print(
            f"RSS: turn 10 {result['rss_kb_at_10']} kB, turn {end} {result['rss_kb_at_end']} kB "
            f"(peak {result['peak_rss_kb_at_end']} kB); session log {result['log_bytes']} bytes"
        )
        print(
            f"ms per turn (median of {window}): first {result['ms_per_turn_first_window']}, "
            f"last {result['ms_per_turn_last_window']}; p95 {result['ms_per_turn_p95']}; "
            f"turn 1 {result['ms_turn_1']}"
        )
        print(
            f"request body: first {result['request_bytes_first']} bytes, "
            f"last {result['request_bytes_last']} bytes"
        )
        for failure in result["failures"]:
            print(f"  {failure}")
    return 1 if result["failures"] or result["exit_status"] != 0 else 0


if __name__ == "__main__":
    raise SystemExit(main())
