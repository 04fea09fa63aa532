"""Crash test: a child process runs turns and is SIGKILLed at random moments, again and again.

Every child resumes the session its predecessor was killed in, so each load meets whatever the
last kill left: a turn open mid-stream, a torn line, a repair cut short. After each kill the
parent loads the log and checks it: gapless ``seq``, every turn closed, every completed turn
and its answer still there, and the open turn closed as ``interrupted``.

Most kills land at random moments. In every fifth round the child stalls a turn mid-stream by
construction and says so on stdout, and the kill waits for that line: those kills always leave
a turn open, whatever the machine's speed, so the test always meets the repair.

Run the child by hand to watch it: ``python -m tests.dsh_core.session.test_crash HOME ID SEED
[stall]`` (ID ``-`` creates the session).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_core.agent.loop import Conversation, LoopEvent
from dsh_core.errors import LlmError
from dsh_core.model.seam import ChatRequest, Event, Finish, TextDelta, Usage
from dsh_core.session import LoadReport, SessionEvent, SessionLog, SessionStore
from dsh_core.testing import ScriptedModel

REPO = Path(__file__).resolve().parents[3]
KILLS = 32
CWD = Path("/crash/project")
STALLED = "stalled in turn"
"""What a stalling child prints, then the turn's number, once its turn is open mid-stream."""


def user_text(turn: int) -> str:
    """What the user sends in ``turn``; now and then large, so a kill can tear its write."""
    size = 200_000 if turn % 7 == 3 else 40
    seed = hashlib.sha256(str(turn).encode()).hexdigest()
    return f"question {turn} {seed} " + "q" * size


def answer_text(turn: int) -> str:
    return f"answer {turn}: " + "lorem ipsum " * (turn % 5 + 1)


def child_main(home: str, session_id: str, seed: int, stall: bool = False) -> None:
    """Run turns forever in one session (created when ``session_id`` is "-").

    With ``stall``, one of the first three turns hangs after its first delta, and the child
    prints :data:`STALLED` and its number.
    """
    store = SessionStore(Path(home))
    if session_id == "-":
        log = store.create(CWD)
    else:
        log, _ = store.open(session_id)
    print(log.id, flush=True)  # the parent waits for this line: loading is done
    asyncio.run(_run_turns(log, random.Random(seed), stall))


@dataclass
class StallingModel(ScriptedModel):
    """A ScriptedModel whose next stream can be told to hang after its first event."""

    stall_next: bool = False

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        stall, self.stall_next = self.stall_next, False
        async for event in super().stream(request):
            yield event
            if stall:
                await asyncio.Event().wait()  # until the parent's SIGKILL


async def _run_turns(log: SessionLog, rng: random.Random, stall: bool) -> None:
    model = StallingModel(delay=0.001)
    # The large messages would soon fill a real window; this test is about the log.
    conversation = Conversation(model, log, model_name="crash-model", context_window=10**9)
    first = conversation.last_turn_end()
    stall_at = (first.turn if first is not None else 0) + rng.randint(1, 3) if stall else None
    while True:
        last = conversation.last_turn_end()
        turn = (last.turn if last is not None else 0) + 1
        answer = answer_text(turn)
        pieces = [TextDelta(answer[i : i + 8]) for i in range(0, len(answer), 8)]
        roll = rng.random()
        observer = None
        script: list[Event | BaseException]
        if turn == stall_at:
            script = [*pieces, Finish("stop")]
            model.stall_next = True

            def observer(event: LoopEvent) -> None:
                if isinstance(event, TextDelta):  # the turn is open, and stays so
                    print(f"{STALLED} {stall_at}", flush=True)
        elif roll < 0.1:
            script = [*pieces[:2], LlmError("cut", "STREAM_CLOSED")]
        elif roll < 0.2:
            script = [*pieces, Finish("max-tokens")]
        elif roll < 0.3:
            script = [*pieces, Finish("stop")]

            def observer(event: LoopEvent) -> None:
                conversation.cancel("user")
        else:
            script = [*pieces, Usage(10, len(pieces)), Finish("stop")]
        model.scripts.clear()
        model.enqueue(script)
        await conversation.run_turn(user_text(turn), on_event=observer)


def _turns(events: list[SessionEvent]) -> dict[int, dict[str, Any]]:
    """Each turn's events by type, checking that turns open and close in order."""
    turns: dict[int, dict[str, Any]] = {}
    open_turn: int | None = None
    for event in events:
        if event.type == "turn/start":
            assert open_turn is None, f"turn {event.data['turn']} started inside {open_turn}"
            open_turn = event.data["turn"]
            assert open_turn not in turns
            turns[open_turn] = {}
        else:
            assert open_turn is not None, f"{event.type} outside a turn"
            assert event.data["turn"] == open_turn
            turns[open_turn][event.type] = event.data
            if event.type == "turn/end":
                open_turn = None
    assert open_turn is None, f"turn {open_turn} left open after loading"
    return turns


def check(log: SessionLog, report: LoadReport) -> dict[int, dict[str, Any]]:
    """The invariants every load must give, whatever the kill interrupted."""
    assert [event.seq for event in log.events] == list(range(len(log.events)))
    turns = _turns(log.events)
    assert sorted(turns) == list(range(1, len(turns) + 1))
    for turn, events in turns.items():
        kind = events["turn/end"]["reason"]["kind"]
        if "user/message" in events:
            assert events["user/message"]["text"] == user_text(turn)
        if kind in ("completed", "max-tokens"):
            assert events["assistant/message"] == {
                "turn": turn,
                "step": 1,
                "text": answer_text(turn),
            }
        if kind in ("error", "aborted"):
            assert events.get("assistant/message", {"interrupted": True})["interrupted"] is True
    if report.interrupted_turn is not None:
        assert log.events[-1].data == {
            "turn": report.interrupted_turn,
            "reason": {"kind": "interrupted"},
        }
        assert any("closed it as interrupted" in notice for notice in report.notices)
    return turns


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    seed = int(os.environ.get("DSH_CRASH_SEED", time.time_ns() % 1_000_000))
    print(f"crash test seed {seed} (set DSH_CRASH_SEED to repeat)")
    rng = random.Random(seed)
    home = tmp_path / "home"
    session_id = "-"
    previous: dict[int, dict[str, Any]] = {}
    interrupted = repaired = stalled_kills = 0
    for kill in range(KILLS):
        stalled = kill % 5 == 1  # this child stalls a turn, and the kill waits for it
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.dsh_core.session.test_crash",
                str(home),
                session_id,
                str(kill),
                *(["stall"] if stalled else []),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        stalled_turn: int | None = None
        try:
            assert child.stdout is not None
            if kill % 5 == 4 and session_id != "-":
                time.sleep(rng.uniform(0.0, 0.15))  # may land while the child loads or repairs
            else:
                session_id = child.stdout.readline().strip()
                assert session_id, f"child {kill} died before it was ready"
                if stalled:
                    line = child.stdout.readline()
                    assert line.startswith(STALLED), f"child {kill} did not stall: {line!r}"
                    stalled_turn = int(line.split()[-1])
                else:
                    time.sleep(rng.uniform(0.0, 0.25))
            assert child.poll() is None, f"child {kill} exited on its own: {child.returncode}"
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
        assert child.returncode == -signal.SIGKILL

        log, report = SessionStore(home).open(session_id)
        with log:
            turns = check(log, report)
        if stalled_turn is not None:
            # Killed inside an open turn: this load must have found and closed it.
            assert report.interrupted_turn == stalled_turn, (kill, report)
            stalled_kills += 1
        interrupted += report.interrupted_turn is not None
        repaired += any("torn" in n or "damaged" in n for n in report.notices)
        # Append-only: nothing a later load repaired may change an earlier turn.
        for turn, events in previous.items():
            assert turns[turn] == events, f"turn {turn} changed after kill {kill}"
        previous = turns
    print(
        f"{KILLS} kills, {len(previous)} turns, {interrupted} open turns closed "
        f"({stalled_kills} by construction), {repaired} torn or damaged tails repaired"
    )
    assert stalled_kills > 0
    assert interrupted >= stalled_kills


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:] == ["stall"])
