"""Crash runs: kill the real ``dsh`` at random moments, again and again; check the log each time.

    .venv/bin/python bench/crash_runs.py [--kills 200] [--signals 20] [--early 40] [--seed N]
                                         [--max-delay 0.5] [--json]

Three parts, all against the loopback stub server, all with the real ``dsh`` on real pipes:

- **Kills.** Each round starts ``dsh --continue`` (every tenth round a fresh session instead, so
  the history stays well inside the context window), feeds it lines one at a time, and
  SIGKILLs it at a moment drawn uniformly from [0, ``--max-delay``) after it was started: during
  start-up and the load that repairs what the last kill left, while a turn streams, while the
  log is written, between turns. A turn counts as *completed* once its answer's final newline
  is on stdout, which dsh writes only after ``turn/end`` is fsynced. After every kill an
  independent reader (not ``dsh_core.session``) checks every log: gapless ``seq``, turns in
  order, nothing outside a turn, at most a torn last line and one open last turn, every
  completed turn present with its exact answer, and every turn closed earlier unchanged. The
  next ``dsh --continue`` must load it. At the end every session is resumed once more and must
  come out whole.
- **Signals.** SIGTERM or SIGINT in the middle of a turn, while text streams or while the
  server is still silent: exit status 143 or 130, ``[turn aborted] shutdown|user`` last on
  stdout, that ``turn/end`` in the log, and the text shown before it stored as the interrupted
  answer.
- **Early signals** (a probe): SIGTERM or SIGINT at a random moment of start-up, with input
  arriving right after. It reports outcomes; a traceback or an exit status other than the
  signal's own is listed as an anomaly (known bugs; see docs/notes/2026-11-30-reliability.md).

Prints a summary (``--json``: one JSON object) and exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support

from dsh_core.stub_server import StubServer
from tests.support import CANARY_KEY, DSH, TurnRecord, child_env, scan_log

INTERRUPTED_LINE = b"[turn interrupted by a previous process exit]\n"
ROTATE_EVERY = 10
"""Rounds per session before a fresh one starts (the history must stay inside the window)."""


class Pump:
    """Collects what a pipe delivers on a thread; :meth:`wait_for` waits for a marker."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.data = bytearray()
        self.closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(pipe.fileno(),), daemon=True)
        self._thread.start()

    def _run(self, fd: int) -> None:
        while True:
            try:
                piece = os.read(fd, 65536)
            except OSError:
                piece = b""
            with self._cond:
                if not piece:
                    self.closed = True
                    self._cond.notify_all()
                    return
                self.data += piece
                self._cond.notify_all()

    def size(self) -> int:
        with self._cond:
            return len(self.data)

    def wait_for(self, marker: bytes, start: int, deadline: float) -> int:
        """The offset of ``marker`` at or after ``start``, or -1 at the deadline or EOF."""
        with self._cond:
            while True:
                found = self.data.find(marker, start)
                if found != -1:
                    return found
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0:
                    return -1
                self._cond.wait(remaining)

    def slice(self, start: int, end: int) -> bytes:
        with self._cond:
            return bytes(self.data[start:end])

    def text(self) -> str:
        self._thread.join(timeout=10)
        with self._cond:
            return bytes(self.data).decode("utf-8", "replace")


def spawn(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start dsh with its stdin, stdout and stderr on unbuffered pipes."""
    return subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )


# Logs are read by tests.support.scan_log, not dsh_core.session: the checks do not trust the
# code they check.


def session_logs(home: Path) -> list[Path]:
    return sorted(home.rglob("session.jsonl"))


# Kills.


@dataclass
class KillStats:
    kills: int = 0
    during_startup: int = 0
    """Kills before the round's first answer had arrived."""
    completed_observed: int = 0
    lost: dict[str, str] = field(default_factory=dict)
    """Completed turns missing or altered in a log: line -> where it was found wrong first."""
    changed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    startup_failures: list[str] = field(default_factory=list)
    interrupted_closed: int = 0
    torn_repaired: int = 0
    damaged_moved: int = 0
    sessions: int = 0
    turns: int = 0
    expected: dict[str, str] = field(default_factory=dict)
    """Line -> answer for every turn seen completed."""
    closed: dict[Path, dict[int, TurnRecord]] = field(default_factory=dict)
    """Every turn seen closed, per log: it must never change."""


def _line(rng: random.Random, round_no: int, k: int) -> str:
    # No trigger word of the stub (TRIGGERS) can appear: only digits, hex and 'p'.
    text = f"line {round_no}-{k} {secrets.token_hex(4)}"
    if rng.random() < 0.1:
        text += " " + "p" * rng.randint(500, 4000)  # a longer answer: more time mid-stream
    return text


def kill_round(
    env: dict[str, str], cwd: Path, rng: random.Random, round_no: int, fresh: bool, delay: float
) -> tuple[list[tuple[str, str]], str, bool]:
    """One process life: (completed (line, answer) pairs, its stderr, killed before any answer)."""
    proc = spawn(DSH if fresh else [*DSH, "--continue"], cwd, env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = Pump(proc.stdout), Pump(proc.stderr)
    deadline = time.monotonic() + delay
    completed: list[tuple[str, str]] = []
    k = 0
    try:
        while time.monotonic() < deadline:
            text = _line(rng, round_no, k)
            k += 1
            start = out.size()
            try:
                proc.stdin.write(f"{text}\n".encode())
            except BrokenPipeError:
                break
            marker = f"{text}\n".encode()
            found = out.wait_for(marker, start, deadline)
            if found == -1:
                break
            segment = out.slice(start, found + len(marker))
            if segment.startswith(INTERRUPTED_LINE):
                segment = segment[len(INTERRUPTED_LINE) :]
            completed.append((text, segment[:-1].decode("utf-8")))
            time.sleep(min(rng.uniform(0.0, 0.02), max(0.0, deadline - time.monotonic())))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdin.close()
    stderr = err.text()
    out.text()
    proc.stdout.close()
    proc.stderr.close()
    return completed, stderr, not completed


def run_kills(
    kills: int, home: Path, cwd: Path, env: dict[str, str], rng: random.Random, max_delay: float
) -> KillStats:
    stats = KillStats()
    for round_no in range(kills):
        fresh = round_no % ROTATE_EVERY == 0
        completed, stderr, early = kill_round(
            env, cwd, rng, round_no, fresh, rng.uniform(0.0, max_delay)
        )
        stats.kills += 1
        stats.during_startup += early
        for failure in ("startup failed", "Traceback", "internal error"):
            if failure in stderr:
                stats.startup_failures.append(f"round {round_no}: {stderr.strip()[-500:]}")
        stats.interrupted_closed += stderr.count("closed it as interrupted")
        stats.torn_repaired += stderr.count("truncated a torn last line")
        stats.damaged_moved += stderr.count("was damaged")
        stats.expected.update(completed)
        stats.completed_observed += len(completed)
        _check_logs(home, stats, f"after kill {round_no}")
    return stats


def _check_logs(home: Path, stats: KillStats, when: str, *, final: bool = False) -> None:
    found: dict[str, TurnRecord] = {}
    for path in session_logs(home):
        scan = scan_log(path)
        stats.problems.extend(f"{when}: {problem}" for problem in scan.problems)
        if final:
            stats.problems.extend(f"{when}: {problem}" for problem in scan.unfinished())
        earlier = stats.closed.setdefault(path, {})
        for turn, record in scan.turns.items():
            if record.user is not None:
                found[record.user] = record
            if turn in earlier and earlier[turn] != record:
                stats.changed.append(f"{when}: {path} turn {turn} changed")
            if record.end is not None:
                earlier[turn] = record
    for text, answer in stats.expected.items():
        seen = found.get(text)
        if seen is None or seen.end != {"kind": "completed"} or seen.answer != answer:
            stats.lost.setdefault(text, f"{when}: {text!r} ({seen})")


def finish_kills(home: Path, cwd: Path, env: dict[str, str], stats: KillStats) -> None:
    """Resume every session once more (repairing its tail); then every log must be whole."""
    for path in session_logs(home):
        session_id = path.parent.name
        result = subprocess.run(
            [*DSH, "--resume", session_id],
            cwd=cwd,
            env=env,
            input=b"",
            capture_output=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0 or b"Traceback" in result.stderr:
            stats.startup_failures.append(f"final resume {session_id}: {result.stderr[-500:]!r}")
        stats.interrupted_closed += result.stderr.count(b"closed it as interrupted")
        stats.torn_repaired += result.stderr.count(b"truncated a torn last line")
    _check_logs(home, stats, "after the final resumes", final=True)
    stats.sessions = len(session_logs(home))
    stats.turns = sum(len(scan_log(path).turns) for path in session_logs(home))
    for path in home.rglob("*"):
        if path.is_file() and CANARY_KEY.encode() in path.read_bytes():
            stats.problems.append(f"the API key is in {path}")


# Signals in the middle of a turn.


@dataclass
class SignalStats:
    runs: int = 0
    ok: int = 0
    during_text: int = 0
    before_text: int = 0
    failures: list[str] = field(default_factory=list)


def signal_run(
    stub: StubServer, env: dict[str, str], cwd: Path, rng: random.Random, stats: SignalStats
) -> None:
    sig = rng.choice([signal.SIGTERM, signal.SIGINT])
    status, reason = (143, "shutdown") if sig == signal.SIGTERM else (130, "user")
    streaming = rng.random() < 0.6
    token = secrets.token_hex(4)
    text = f"slow please {token}" if streaming else f"busy now {token}"
    proc = spawn(DSH, cwd, env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = Pump(proc.stdout), Pump(proc.stderr)
    requests = len(stub.requests)
    proc.stdin.write(f"{text}\n".encode())
    if streaming:
        words = rng.randint(1, 6)  # the slow answer is "word0 word1 ...", 0.1 s apart
        out.wait_for(f"word{words - 1}".encode(), 0, time.monotonic() + 20)
        stats.during_text += 1
    else:
        deadline = time.monotonic() + 20
        while len(stub.requests) == requests and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 1.0))  # keep-alive comments only: nothing shown yet
        stats.before_text += 1
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    stdout, stderr = out.text(), err.text()
    proc.stdout.close()
    proc.stderr.close()
    stats.runs += 1
    problems: list[str] = []
    if code != status:
        problems.append(f"exit status {code}, not {status}")
    line = f"[turn aborted] {reason}\n"
    if not stdout.endswith(line) or "Traceback" in stderr:
        problems.append(f"stdout {stdout[-200:]!r}, stderr {stderr[-300:]!r}")
    shown = stdout[: -len(line)].removesuffix("\n")
    logs = [p for p in session_logs(Path(env["DSH_HOME"])) if token.encode() in p.read_bytes()]
    if len(logs) != 1:
        problems.append(f"{len(logs)} logs hold the turn")
    else:
        scan = scan_log(logs[0])
        record = scan.turns.get(1)
        if scan.problems or scan.torn or record is None:
            problems.append(f"log {logs[0]}: {scan.problems}")
        else:
            if record.end != {"kind": "aborted", "reason": reason}:
                problems.append(f"turn/end {record.end}")
            if streaming and (record.answer != shown or not record.interrupted):
                problems.append(f"stored answer {record.answer!r}, shown {shown!r}")
            if not streaming and (record.answer is not None or shown):
                problems.append(f"nothing was shown, yet {record.answer!r} / {shown!r}")
    if problems:
        stats.failures.append(f"{signal.Signals(sig).name} {text!r}: " + "; ".join(problems))
    else:
        stats.ok += 1


# Signals during start-up: a probe that reports.


def early_run(
    env: dict[str, str], cwd: Path, rng: random.Random, outcomes: collections.Counter[str]
) -> str | None:
    """One early signal; returns a description when the outcome is an anomaly."""
    sig = rng.choice([signal.SIGTERM, signal.SIGINT])
    delay = rng.uniform(0.0, 0.3)
    proc = spawn(DSH, cwd, env)
    time.sleep(delay)
    proc.send_signal(sig)
    try:
        _, stderr = proc.communicate(f"hello {secrets.token_hex(4)}\n".encode(), timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    name = signal.Signals(sig).name
    traceback = b"Traceback" in stderr
    outcomes[f"{name} -> {proc.returncode}{' + traceback' if traceback else ''}"] += 1
    # Dying of the signal itself (-15, -2) is what a shell shows as 143 or 130: fine.
    fine = {signal.SIGTERM: (143, -15), signal.SIGINT: (130, -2)}[sig]
    if traceback or proc.returncode not in fine:
        lines = stderr.decode("utf-8", "replace").strip().splitlines() or [""]
        said = lines[0] if lines[0] == lines[-1] else f"{lines[0]} ... {lines[-1]}"
        return f"{name} at {delay * 1000:.0f} ms: exit {proc.returncode}, {said[:160]}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--signals", type=int, default=20)
    parser.add_argument("--early", type=int, default=40)
    parser.add_argument("--max-delay", type=float, default=0.5, help="seconds (default 0.5)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    # The stub keeps writing for a moment to connections whose dsh was just killed; asyncio
    # then logs "socket.send() raised exception." for each write. That is the stub's noise.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    seed = (
        args.seed
        if args.seed is not None
        else int(os.environ.get("DSH_CRASH_SEED", time.time_ns() % 1_000_000))
    )
    rng = random.Random(seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dsh-crash-") as tmp, StubServer() as stub:
        root = Path(tmp)
        cwd = root / "project"
        cwd.mkdir()
        home = root / "home"
        env = child_env(stub.url, home)
        kills = run_kills(args.kills, home, cwd, env, rng, args.max_delay)
        finish_kills(home, cwd, env, kills)
        kill_seconds = time.monotonic() - started

        signal_env = dict(env, DSH_HOME=str(root / "signal-home"))
        signals = SignalStats()
        for _ in range(args.signals):
            signal_run(stub, signal_env, cwd, rng, signals)

        early_env = dict(env, DSH_HOME=str(root / "early-home"))
        outcomes: collections.Counter[str] = collections.Counter()
        anomalies = [
            anomaly
            for _ in range(args.early)
            if (anomaly := early_run(early_env, cwd, rng, outcomes)) is not None
        ]

    summary: dict[str, Any] = {
        "seed": seed,
        "kills": kills.kills,
        "kills_before_first_answer": kills.during_startup,
        "sessions": kills.sessions,
        "turns": kills.turns,
        "completed_observed": kills.completed_observed,
        "lost": len(kills.lost),
        "changed": len(kills.changed),
        "open_turns_closed": kills.interrupted_closed,
        "torn_lines_repaired": kills.torn_repaired,
        "damaged_tails_moved": kills.damaged_moved,
        "problems": kills.problems[:20] + list(kills.lost.values())[:20] + kills.changed[:20],
        "startup_failures": kills.startup_failures[:20],
        "kill_seconds": round(kill_seconds, 1),
        "signals": {
            "runs": signals.runs,
            "ok": signals.ok,
            "while_text_streamed": signals.during_text,
            "before_any_text": signals.before_text,
            "failures": signals.failures,
        },
        "early": {
            "runs": args.early,
            "outcomes": dict(sorted(outcomes.items())),
            "anomalies": len(anomalies),
            "examples": anomalies[:5],
        },
        "seconds": round(time.monotonic() - started, 1),
    }
    failed = bool(
        kills.problems
        or kills.lost
        or kills.changed
        or kills.startup_failures
        or signals.failures
        or kills.turns < kills.kills
    )
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"seed {seed} (DSH_CRASH_SEED or --seed repeats it)")
        print(
            f"kills: {summary['kills']} ({summary['kills_before_first_answer']} before the "
            f"round's first answer), {summary['turns']} turns in {summary['sessions']} "
            f"sessions, {summary['completed_observed']} completed turns seen, "
            f"{summary['lost']} lost, {summary['changed']} changed"
        )
        print(
            f"repairs on load: {summary['open_turns_closed']} open turns closed as interrupted, "
            f"{summary['torn_lines_repaired']} torn lines truncated, "
            f"{summary['damaged_tails_moved']} damaged tails moved"
        )
        print(
            f"signals mid-turn: {signals.ok}/{signals.runs} as specified "
            f"({signals.during_text} while text streamed, {signals.before_text} before any)"
        )
        print(f"early signals: {dict(sorted(outcomes.items()))}; anomalies {len(anomalies)}")
        for line in [*anomalies[:5], *summary["problems"], *summary["startup_failures"]]:
            print(f"  {line}")
        for line in signals.failures:
            print(f"  {line}")
        print(f"{summary['seconds']} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
