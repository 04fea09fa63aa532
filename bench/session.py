"""Session log benchmark: load time and peak memory against size, and fsyncs per turn.

    .venv/bin/python bench/session.py [--dir DIR]

Builds sessions of 1,000 and 10,000 turns (about 1.7 KB of text per turn), loads each one with
``SessionStore.open`` (best of 3, without tracing), then once more under ``tracemalloc`` for
the peak. The 10k/1k ratios should be near 10: loading is linear. Then it runs turns through
the real loop against a scripted model, with ``os.fsync`` wrapped to count calls. It reports;
nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_core.agent.loop import Conversation
from dsh_core.model.seam import Finish, TextDelta, Usage
from dsh_core.session import SessionStore
from dsh_core.session.events import AssistantStep, StepUsage, TurnEnd, TurnStart, UserText
from dsh_core.testing import ScriptedModel

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

SIZES = (1_000, 10_000)
CWD = Path("/bench/project")
USER = "Please look at this function and tell me why it is slow. " * 4
ANSWER = "The loop re-reads the whole file on every iteration, so the cost grows. " * 20


def build(store: SessionStore, turns: int) -> str:
    """A closed session of ``turns`` completed turns, written the way the loop writes them."""
    with store.create(CWD) as log:
        for turn in range(1, turns + 1):
            log.append(TurnStart(turn, "deepseek-v4-flash"))
            log.append(UserText(turn, f"{turn}: {USER}"))
            log.append(AssistantStep(turn, 1, ANSWER))
            log.append(StepUsage(turn, 1, Usage(1000 + turn, 300, 900, 0)))
            log.append(TurnEnd(turn, "completed"))
        return log.id


def load_seconds(store: SessionStore, session_id: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        log, _ = store.open(session_id)
        best = min(best, time.perf_counter() - started)
        log.close()
    return best


def load_peak_bytes(store: SessionStore, session_id: str) -> int:
    tracemalloc.start()
    try:
        log, _ = store.open(session_id)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    log.close()
    return peak


class FsyncCounter:
    """Wraps ``os.fsync`` for the benchmark only; ``calls`` counts since the last reset."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = os.fsync

    def __enter__(self) -> FsyncCounter:
        def counting(fd: FileDescriptorLike) -> None:
            self.calls += 1
            self._real(fd)

        os.fsync = counting
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real


async def run_turns(conversation: Conversation, model: ScriptedModel, turns: int) -> None:
    for n in range(turns):
        model.enqueue([TextDelta("Sure. "), TextDelta(ANSWER), Usage(100, 300), Finish("stop")])
        await conversation.run_turn(f"question {n}")


def fsyncs(home: Path, turns: int = 200) -> dict[str, float]:
    store = SessionStore(home)
    with FsyncCounter() as counter:
        log = store.create(CWD)
        created = counter.calls
        counter.calls = 0
        model = ScriptedModel()
        conversation = Conversation(model, log, model_name="deepseek-v4-flash")
        started = time.perf_counter()
        asyncio.run(run_turns(conversation, model, turns))
        seconds = time.perf_counter() - started
        per_turn = counter.calls / turns
        counter.calls = 0
        conversation.reject_oversized(10 * 1024 * 1024)
        rejected = counter.calls
        log.close()
    return {
        "create": created,
        "per turn": per_turn,
        "per rejected turn": rejected,
        "ms per turn": seconds * 1000 / turns,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        home = Path(scratch)
        store = SessionStore(home / "load")
        results: dict[int, tuple[float, int, int]] = {}
        for turns in SIZES:
            session_id = build(store, turns)
            size = store.open(session_id)[0]
            path, events = size.path, len(size.events)
            size.close()
            seconds = load_seconds(store, session_id)
            peak = load_peak_bytes(store, session_id)
            results[turns] = (seconds, peak, path.stat().st_size)
            print(
                f"load {turns:>6,} turns ({events:,} events, {path.stat().st_size / 1e6:5.1f} MB): "
                f"{seconds * 1000:7.1f} ms, peak {peak / 1e6:6.1f} MB (tracemalloc)"
            )
        small, large = (results[n] for n in SIZES)
        print(
            f"ratio {SIZES[1] // SIZES[0]}x turns: load time {large[0] / small[0]:.1f}x, "
            f"peak memory {large[1] / small[1]:.1f}x, file size {large[2] / small[2]:.1f}x"
        )
        counts = fsyncs(home / "fsync")
        print(
            f"fsyncs: {counts['per turn']:g} per turn, {counts['per rejected turn']:g} per "
            f"rejected turn, {counts['create']:g} to create a session "
            f"(file + each new directory's parent); {counts['ms per turn']:.2f} ms per "
            "scripted turn including them"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
