"""Crash runs: SIGKILL the real ``dsh`` at random moments, again and again; check the log each time.

    .venv/bin/python bench/crash_runs.py [--kills 200] [--signals 20] [--early 40] [--seed N]
                                         [--max-delay 0.5] [--json]

Three parts, all against the loopback stub server, all with the real ``dsh`` on real pipes:

- **Kills.** Each round starts ``dsh --continue`` (every tenth round a fresh session instead, so
  the history stays well inside the context window) and SIGKILLs it in one of four phases. The
  phases are dealt out evenly and shuffled, so that even a short run kills in each of them
  whatever the machine's speed. Each phase waits for an event it can see, then kills at a random
  moment after it:

  - ``startup``: a random moment in [0, ``--max-delay``) after the start, lines fed as answers
    come: start-up, the load that repairs what the last kill left, or the first turns;
  - ``turn_start``: after 1-2 answers, one more line, and the kill a random [0, 0.1 s) after
    writing it: while dsh reads it, makes ``turn/start`` durable, sends the request, or answers;
  - ``mid_answer``: after 0-2 answers, a line whose answer is text and then a long silence, and
    the kill a random [0, 0.3 s) after the first bytes of that text are on stdout: always before
    the answer can end, so the turn must be left open, its user message on disk;
  - ``between_turns``: after 1-3 answers and no more input, the kill a random [0, 0.05 s) after
    the last answer's newline, just after dsh acknowledged that turn.

  A turn counts as *completed* once its answer's final newline is on stdout, which dsh writes
  only after ``turn/end`` is fsynced; stdout is read to its end after the kill, so every answer
  dsh managed to print counts. After every kill an independent reader (not ``dsh_core.session``)
  checks every log: gapless ``seq``, turns in order, nothing outside a turn, at most a torn last
  line and one open last turn, every completed turn present with its exact answer, and every
  turn closed earlier unchanged. The next ``dsh --continue`` must load it. At the end every
  session is resumed once more and must come out whole, and every turn a kill left open must
  have been closed as ``interrupted``.
- **Signals.** SIGTERM or SIGINT in the middle of a turn, while text streams (after 1-6 words of
  a minute-long answer) or while the server is silent (a random [0, 1 s) into a minute of
  keep-alives); the four cases are dealt out evenly. Exit status 143 or 130, ``[turn aborted]
  shutdown|user`` last on stdout, that ``turn/end`` in the log, and the text shown before it
  stored as the interrupted answer.
- **Early signals** (a probe): SIGTERM or SIGINT at a random moment of start-up, with input
  arriving right after. It reports outcomes; a traceback or an exit status other than the
  signal's own is listed as an anomaly (known bugs; see docs/notes/2026-11-30-reliability.md).

No verdict depends on how fast the machine is: every check is on what was observed, and every
wait for an event is bounded only by :data:`EVENT_WAIT`, a guard against a hang.
Prints a summary (``--json``: one JSON object) and exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import collections
import enum
import itertools
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support

from dsh_core.testing import Answer, KeepAlives, SlowStream, Stall, StubServer
from tests.support import CANARY_KEY, DSH, TurnRecord, child_env, scan_log

__all__ = ["Phase", "main"]

INTERRUPTED_LINE = b"[turn interrupted by a previous process exit]\n"
ROTATE_EVERY = 10
"""Rounds per session before a fresh one starts (the history must stay inside the window)."""
EVENT_WAIT = 20.0
"""Seconds to wait for an event (an answer, its first bytes, a request, an exit). Each takes well
under a second even on a loaded machine: this only stops a hung dsh from hanging the run."""
SILENCE = 60.0
"""Seconds a scripted answer keeps the server silent (or still streaming): far longer than any
kill or signal takes to land after the event it waits for, so where it lands is by construction."""
TURN_WINDOW = 0.1
"""``turn_start``: the kill comes a random moment in [0, this) after the line was written."""
MID_ANSWER_WINDOW = 0.3
"""``mid_answer``: the kill comes a random moment in [0, this) after the answer's first bytes."""
BETWEEN_WINDOW = 0.05
"""``between_turns``: the kill comes a random moment in [0, this) after the last answer."""
PARTIAL = "Partial answer, then silence: "
"""How a ``mid_answer`` answer starts. No echo answer contains its first piece (``Part``): the
stub streams four characters per delta, so those bytes on stdout mean the answer has begun."""

T = TypeVar("T")


class Phase(enum.Enum):
    """Where in a process's life a kill lands (see the module docstring)."""

    STARTUP = "startup"
    """A random moment after the start; whatever it hits."""
    TURN_START = "turn_start"
    """Just after a line was written."""
    MID_ANSWER = "mid_answer"
    """After the answer's first bytes, before it can end."""
    BETWEEN_TURNS = "between_turns"
    """Just after an answer, with no more input."""


def deal(items: Sequence[T], count: int, rng: random.Random) -> list[T]:
    """``count`` items, each of ``items`` as often as the others (give or take one), shuffled."""
    dealt = [items[i % len(items)] for i in range(count)]
    rng.shuffle(dealt)
    return dealt


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

    def finish(self) -> bytes:
        """Everything the pipe delivered, once it is closed (the writer is dead)."""
        self._thread.join(timeout=EVENT_WAIT)
        with self._cond:
            return bytes(self.data)


class Child:
    """One ``dsh`` on unbuffered pipes: the lines written to it, and its output as it comes."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out, self.err = Pump(self.proc.stdout), Pump(self.proc.stderr)
        self.written: list[str] = []

    def send(self, text: str) -> int:
        """Write ``text`` as one line: the stdout offset its answer follows; -1 if dsh is gone."""
        assert self.proc.stdin is not None
        start = self.out.size()
        try:
            self.proc.stdin.write(f"{text}\n".encode())
        except BrokenPipeError:
            return -1
        self.written.append(text)
        return start

    def wait_for(self, marker: bytes, start: int, deadline: float | None = None) -> bool:
        """Whether ``marker`` shows on stdout after ``start`` (by ``deadline``, else EVENT_WAIT)."""
        until = time.monotonic() + EVENT_WAIT if deadline is None else deadline
        return self.out.wait_for(marker, start, until) != -1

    def ask(self, text: str, deadline: float | None = None) -> bool:
        """Send ``text`` and wait for the final newline of its answer (``You said: <text>``)."""
        start = self.send(text)
        return start != -1 and self.wait_for(f"{text}\n".encode(), start, deadline)

    def end(self, sig: signal.Signals) -> int | None:
        """Send ``sig`` unless dsh has exited, and reap it: its exit status, or None when it was
        still running EVENT_WAIT later (it is then killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code: int | None = self.proc.wait(timeout=EVENT_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return code

    def output(self) -> tuple[bytes, str]:
        """All of stdout and stderr, after :meth:`end`."""
        stdout, stderr = self.out.finish(), self.err.finish()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        return stdout, stderr.decode("utf-8", "replace")


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut down to about ``limit`` characters, its head and tail kept, for a report."""
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...({len(text) - limit} more)...{text[-limit // 2 :]}"


def answered(stdout: bytes, written: list[str]) -> list[tuple[str, str]]:
    """The (line, answer) pairs of ``written`` whose answer's final newline is in ``stdout``."""
    pairs: list[tuple[str, str]] = []
    at = len(INTERRUPTED_LINE) if stdout.startswith(INTERRUPTED_LINE) else 0
    for text in written:
        marker = f"{text}\n".encode()
        found = stdout.find(marker, at)
        if found == -1:
            break
        end = found + len(marker)
        pairs.append((text, stdout[at : end - 1].decode("utf-8")))
        at = end
    return pairs


# Logs are read by tests.support.scan_log, not dsh_core.session: the checks do not trust the
# code they check.


def session_logs(home: Path) -> list[Path]:
    return sorted(home.rglob("session.jsonl"))


# Kills.


@dataclass
class KillStats:
    kills: int = 0
    phases: collections.Counter[str] = field(default_factory=collections.Counter)
    """Kills per :class:`Phase` value."""
    before_first_answer: int = 0
    """Kills of a process that had printed no answer yet."""
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
    left_open: set[tuple[Path, int]] = field(default_factory=set)
    """Every turn seen open after a kill: the next load must close it as ``interrupted``."""


def _line(rng: random.Random, round_no: int, k: int) -> str:
    # No trigger word of the stub (TRIGGERS) can appear: only digits, hex and 'p'.
    text = f"line {round_no}-{k} {secrets.token_hex(4)}"
    if rng.random() < 0.1:
        text += " " + "p" * rng.randint(500, 4000)  # a longer answer: more time mid-stream
    return text


def drive(
    child: Child,
    stub: StubServer,
    phase: Phase,
    rng: random.Random,
    round_no: int,
    max_delay: float,
) -> str | None:
    """Bring ``child`` to the phase's event and wait a random moment after it, ready for the kill.

    Returns what never happened (within EVENT_WAIT), else None.
    """
    lines = (_line(rng, round_no, k) for k in itertools.count())
    if phase is Phase.STARTUP:
        deadline = time.monotonic() + rng.uniform(0.0, max_delay)
        # Whatever the deadline hits is fine: only what is seen printed counts.
        while time.monotonic() < deadline and child.ask(next(lines), deadline):
            time.sleep(min(rng.uniform(0.0, 0.02), max(0.0, deadline - time.monotonic())))
        return None
    # Answers first: 0-2 before a mid-answer kill, 1-2 before a kill at a turn's start (so that
    # dsh is past start-up), 1-3 before a kill between turns.
    before = {Phase.TURN_START: (1, 2), Phase.MID_ANSWER: (0, 2), Phase.BETWEEN_TURNS: (1, 3)}
    for _ in range(rng.randint(*before[phase])):
        text = next(lines)
        if not child.ask(text):
            return f"no answer to {text[:40]!r}"
    if phase is Phase.TURN_START:
        child.send(next(lines))
        time.sleep(rng.uniform(0.0, TURN_WINDOW))
    elif phase is Phase.MID_ANSWER:
        # The answer's text, then SILENCE: the kill comes long before the answer could end.
        stub.enqueue(Stall(SILENCE, PARTIAL + "p" * rng.randint(0, 4000)))
        start = child.send(next(lines))
        if start == -1 or not child.wait_for(PARTIAL[:4].encode(), start):
            return "the first bytes of the mid-answer never came"
        time.sleep(rng.uniform(0.0, MID_ANSWER_WINDOW))
    else:
        time.sleep(rng.uniform(0.0, BETWEEN_WINDOW))
    return None


def run_kills(
    kills: int,
    home: Path,
    cwd: Path,
    env: dict[str, str],
    stub: StubServer,
    rng: random.Random,
    max_delay: float,
) -> KillStats:
    stats = KillStats()
    for round_no, phase in enumerate(deal(list(Phase), kills, rng)):
        fresh = round_no % ROTATE_EVERY == 0
        child = Child(DSH if fresh else [*DSH, "--continue"], cwd, env)
        missed = drive(child, stub, phase, rng, round_no, max_delay)
        code = child.end(signal.SIGKILL)
        stdout, stderr = child.output()
        when = f"after kill {round_no} ({phase.value})"
        stats.kills += 1
        stats.phases[phase.value] += 1
        completed = answered(stdout, child.written)
        stats.before_first_answer += not completed
        if code != -signal.SIGKILL:
            stats.problems.append(f"{when}: dsh was not running at the kill (exit {code})")
        for failure in ("startup failed", "Traceback", "internal error"):
            if failure in stderr:
                stats.startup_failures.append(f"round {round_no}: {clip(stderr.strip(), 500)}")
        stats.interrupted_closed += stderr.count("closed it as interrupted")
        stats.torn_repaired += stderr.count("truncated a torn last line")
        stats.damaged_moved += stderr.count("was damaged")
        stats.expected.update(completed)
        stats.completed_observed += len(completed)
        found = _check_logs(home, stats, when)
        if missed is not None:
            stats.problems.append(f"{when}: {missed}; stderr {clip(repr(stderr.strip()))}")
            break  # dsh hangs or died: every later round would wait the same way
        if phase is Phase.MID_ANSWER:
            # Its request left, so turn/start and the user message were durable before it did.
            record = found.get(child.written[-1])
            if record is None or record.end is not None:
                stats.problems.append(
                    f"{when}: its turn is not open in the log: {clip(str(record))}"
                )
    return stats


def _check_logs(
    home: Path, stats: KillStats, when: str, *, final: bool = False
) -> dict[str, TurnRecord]:
    """Check every log against what was seen so far; returns each logged turn by its line."""
    found: dict[str, TurnRecord] = {}
    for path in session_logs(home):
        scan = scan_log(path)
        stats.problems.extend(f"{when}: {problem}" for problem in scan.problems)
        if final:
            stats.problems.extend(f"{when}: {problem}" for problem in scan.unfinished())
            for opened_path, turn in sorted(stats.left_open):
                end = scan.turns[turn].end if turn in scan.turns else None
                if opened_path == path and end != {"kind": "interrupted"}:
                    stats.problems.append(f"{when}: {path} turn {turn} left open, then {end}")
        elif scan.open_turn is not None:
            stats.left_open.add((path, scan.open_turn))
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
            stats.lost.setdefault(text, clip(f"{when}: {text!r} ({seen})", 400))
    return found


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

SIGNAL_CASES = [
    (sig, streaming) for sig in (signal.SIGTERM, signal.SIGINT) for streaming in (True, False)
]
"""(signal, whether text is streaming when it comes): dealt out evenly over the runs."""


@dataclass
class SignalStats:
    runs: int = 0
    ok: int = 0
    during_text: int = 0
    before_text: int = 0
    failures: list[str] = field(default_factory=list)


def signal_run(
    home: Path,
    cwd: Path,
    rng: random.Random,
    case: tuple[signal.Signals, bool],
    stats: SignalStats,
) -> None:
    """One signal in the middle of a turn, checked. Each run has a stub server of its own, so a
    run that goes wrong cannot leave its scripted answer to the next."""
    sig, streaming = case
    status, reason = (143, "shutdown") if sig == signal.SIGTERM else (130, "user")
    token = secrets.token_hex(4)
    problems: list[str] = []
    with StubServer() as stub:
        # Both answers last SILENCE: the signal lands while text streams, or while the server
        # is silent, whatever the machine's speed.
        if streaming:
            words = round(SILENCE / 0.1)
            stub.enqueue(SlowStream(" ".join(f"word{i}" for i in range(words)) + ".", 0.1))
        else:
            stub.enqueue(KeepAlives(round(SILENCE / 0.25), 0.25, Answer("Thanks for waiting.")))
        child = Child(DSH, cwd, child_env(stub.url, home))
        child.send(f"signal {token}")
        if streaming:
            shown = rng.randint(1, 6)  # the answer is "word0 word1 ...", a word each 0.1 s
            if not child.wait_for(f"word{shown - 1} ".encode(), 0):
                problems.append(f"word{shown - 1} never came")
            stats.during_text += 1
        else:
            deadline = time.monotonic() + EVENT_WAIT
            while not stub.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            if not stub.requests:
                problems.append("the request never came")
            time.sleep(rng.uniform(0.0, 1.0))  # keep-alive comments only: nothing shown yet
            stats.before_text += 1
        code = child.end(sig)
    stdout_bytes, stderr = child.output()
    stdout = stdout_bytes.decode("utf-8", "replace")
    stats.runs += 1
    if code != status:
        problems.append(f"exit status {code}, not {status}")
    line = f"[turn aborted] {reason}\n"
    if not stdout.endswith(line) or "Traceback" in stderr:
        problems.append(f"stdout {clip(repr(stdout))}, stderr {clip(repr(stderr))}")
    shown_text = stdout[: -len(line)].removesuffix("\n")
    logs = [p for p in session_logs(home) if token.encode() in p.read_bytes()]
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
            if streaming and (record.answer != shown_text or not record.interrupted):
                problems.append(
                    f"stored {clip(repr(record.answer))}, shown {clip(repr(shown_text))}"
                )
            if not streaming and (record.answer is not None or shown_text):
                shown_both = f"{clip(repr(record.answer))} / {clip(repr(shown_text))}"
                problems.append(f"nothing was shown, yet {shown_both}")
    if problems:
        kind = "while text streamed" if streaming else "while the server was silent"
        stats.failures.append(f"{sig.name} {kind}: " + "; ".join(problems))
    else:
        stats.ok += 1


# Signals during start-up: a probe that reports.


def early_run(
    env: dict[str, str], cwd: Path, rng: random.Random, outcomes: collections.Counter[str]
) -> str | None:
    """One early signal; returns a description when the outcome is an anomaly."""
    sig = rng.choice([signal.SIGTERM, signal.SIGINT])
    delay = rng.uniform(0.0, 0.3)
    proc = subprocess.Popen(
        DSH, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
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
    parser.add_argument(
        "--max-delay", type=float, default=0.5, help="the startup phase's window (default 0.5 s)"
    )
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
        kills = run_kills(args.kills, home, cwd, env, stub, rng, args.max_delay)
        finish_kills(home, cwd, env, kills)
        kill_seconds = time.monotonic() - started

        signals = SignalStats()
        for case in deal(SIGNAL_CASES, args.signals, rng):
            signal_run(root / "signal-home", cwd, rng, case, signals)

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
        "kills_per_phase": {phase.value: kills.phases[phase.value] for phase in Phase},
        "kills_before_first_answer": kills.before_first_answer,
        "sessions": kills.sessions,
        "turns": kills.turns,
        "completed_observed": kills.completed_observed,
        "lost": len(kills.lost),
        "changed": len(kills.changed),
        "turns_left_open": len(kills.left_open),
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
        or kills.kills < args.kills
    )
    if args.json:
        print(json.dumps(summary))
    else:
        phases = ", ".join(f"{n} {name}" for name, n in summary["kills_per_phase"].items())
        print(f"seed {seed} (DSH_CRASH_SEED or --seed repeats it)")
        print(
            f"kills: {summary['kills']} ({phases}; {summary['kills_before_first_answer']} before "
            f"the process's first answer), {summary['turns']} turns in {summary['sessions']} "
            f"sessions, {summary['completed_observed']} completed turns seen, "
            f"{summary['lost']} lost, {summary['changed']} changed"
        )
        print(
            f"repairs on load: {summary['turns_left_open']} turns left open by kills, "
            f"{summary['open_turns_closed']} reported closed as interrupted, "
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
