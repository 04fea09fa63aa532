"""Loading a long session lets go of what its compactions replaced, and nothing else.

The check is the one that matters: the history a resumed conversation folds from the loaded
events is the history folded from every event in the file (its messages, its usage, its todo
list, its cut marks), on logs written by the real loop and on many generated ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.agent.history import History
from dsh_core.model.seam import ToolCall, Usage
from dsh_core.session import SessionEvent, SessionLog, SessionStore, read_log
from dsh_core.session.events import (
    FORGOTTEN,
    AssistantStep,
    CompactionEnd,
    CompactionStart,
    CompactionSummary,
    Record,
    StepUsage,
    Todo,
    TodoWrite,
    ToolCallStarted,
    ToolOutput,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserText,
)
from dsh_core.session.replaced import REPLACED_CONTENT
from dsh_core.testing import StubServer
from tests.dsh_core.agent.test_compaction import talk, turns
from tests.dsh_core.session.test_session import CWD, numbered, ticking


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def folded(events: Sequence[SessionEvent]) -> dict[str, Any]:
    """Everything a conversation takes from a history folded from ``events``."""
    history = History()
    history.update(events)
    return {
        "messages": history.messages(),
        "tokens": (history.tokens, history.open_tokens, history.system_tokens),
        "marks": history.marks(),
        "measure": history.measure,
        "compacted": history.compacted,
        "usage": history.usage,
        "todos": history.todos,
    }


def let_go_through(events: Sequence[SessionEvent]) -> tuple[int, int]:
    """The last seq a load may let go of: what the compactions in force replaced, but not the
    turn one ran in (-1: none, also when one keeps what an earlier one replaced); and the seq
    of the latest user request among those, which a checkpoint carries verbatim (-1: none)."""
    through, start, summary, turn_start, request = -1, None, None, None, -1
    for event in events:
        record = event.record
        if isinstance(record, TurnStart):
            turn_start = event.seq
        elif isinstance(record, TurnEnd):
            turn_start = None
        elif isinstance(record, CompactionStart):
            start, summary = event.seq, None
        elif isinstance(record, CompactionSummary) and start is not None:
            summary = record
        elif isinstance(record, CompactionEnd):
            if start is not None and summary is not None and summary.replaces_through < start:
                bound = summary.replaces_through
                if bound < through:
                    return -1, -1
                through = max(through, bound if turn_start is None else min(bound, turn_start - 1))
                requests = [e.seq for e in events[: through + 1] if isinstance(e.record, UserText)]
                request = requests[-1] if requests else -1
            start = summary = None
    return through, request


def check_loaded(store: SessionStore, session_id: str) -> list[SessionEvent]:
    """Load the session and check its events against the file's; the loaded events."""
    with store.open(session_id)[0] as loaded:
        events = list(loaded.events)
        path = loaded.path
    on_disk = list(read_log(path).events)
    through, request = let_go_through(on_disk)
    assert len(events) == len(on_disk)
    for index, (kept, whole) in enumerate(zip(events, on_disk, strict=True)):
        if index <= through and index != request and type(whole.record) in REPLACED_CONTENT:
            assert kept is FORGOTTEN, (index, whole)
        else:
            assert kept == whole, index
    assert folded(events) == folded(on_disk)
    return events


def test_a_resumed_session_holds_none_of_what_its_compactions_replaced(
    server: StubServer, store: SessionStore, log: SessionLog
) -> None:
    conversation = talk(server, log, context_window=5_000)
    turns(conversation, *[f"turn {n} toolchain" for n in range(12)])
    run_compactions = sum(isinstance(e.record, CompactionEnd) for e in read_log(log.path).events)
    assert run_compactions >= 2
    log.close()
    events = check_loaded(store, log.id)
    # Since wave 4 a prune comes first, so summaries replace fewer and later events: a quarter
    # of this log is what two of them replaced (check_loaded has checked exactly which).
    assert sum(event is FORGOTTEN for event in events) > len(events) // 4
    # The first turn's words are gone from memory; its usage still counts.
    assert not any(isinstance(e.record, UserText) and "turn 0 " in e.record.text for e in events)


def test_a_session_without_a_compaction_loads_whole(
    server: StubServer, store: SessionStore, log: SessionLog
) -> None:
    conversation = talk(server, log)
    turns(conversation, "one toolread", "two")
    log.close()
    assert FORGOTTEN not in check_loaded(store, log.id)


def test_a_compaction_without_its_end_lets_go_of_nothing(
    store: SessionStore, log: SessionLog
) -> None:
    log.extend([*working_turn(1, tool=True), *working_turn(2, tool=False)])
    log.append(CompactionStart(None, "manual", 900))
    log.append(CompactionSummary(None, "what happened", 8, 900, 100))
    log.close()  # a crash before compaction/end: the summary never took effect
    assert FORGOTTEN not in check_loaded(store, log.id)


def working_turn(turn: int, *, tool: bool, todo: bool = False) -> list[Record]:
    """One turn as the loop writes it: a prompt, maybe a call and its result, the answer."""
    records: list[Record] = [TurnStart(turn, "deepseek-v4-flash"), UserText(turn, f"ask {turn}")]
    if tool:
        call = ToolCall(f"call_{turn}", "read", '{"file_path": "a.py"}')
        records += [
            AssistantStep(turn, 1, "", "reading", (call,)),
            StepUsage(turn, 1, Usage(100 * turn, 10, 50 * turn, 0)),
            ToolCallStarted(turn, 1, call.id, call.name, call.arguments),
            ToolResult(turn, 1, call.id, ToolOutput(f"contents {turn}")),
        ]
    if todo:
        records.append(TodoWrite(turn, (Todo(f"step {turn}", "in_progress"),)))
    step = 2 if tool else 1
    records += [
        AssistantStep(turn, step, f"answer {turn}"),
        StepUsage(turn, step, Usage(120 * turn, 20, 60 * turn, 0)),
        TurnEnd(turn, "completed"),
    ]
    return records


turn_shape = st.tuples(
    st.booleans(),  # a tool call
    st.booleans(),  # a todo list
    st.sampled_from(["none", "between", "inside", "unfinished"]),  # a compaction before its end
    st.floats(0, 1),  # how much of the log before it the compaction replaces
)


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(turn_shape, min_size=1, max_size=12))
def test_generated_sessions_fold_to_the_same_history(
    tmp_path_factory: pytest.TempPathFactory, shapes: list[tuple[bool, bool, str, float]]
) -> None:
    home: Path = tmp_path_factory.mktemp("home")
    store = SessionStore(home, clock=ticking(), new_id=numbered())
    with store.create(CWD) as log:
        for turn, (tool, todo, compaction, share) in enumerate(shapes, 1):
            records = working_turn(turn, tool=tool, todo=todo)
            log.extend(records[:-3])
            if compaction != "none":
                inside = compaction == "inside"
                if not inside:  # between turns: after the end of this one
                    log.extend(records[-3:])
                start = len(log.events)
                through = int(share * (start + 1)) - 1  # from -1 to start - 1
                on = turn if inside else None
                log.append(CompactionStart(on, "pressure", 1000))
                log.append(CompactionSummary(on, f"summary {turn}", through, 1000, 200))
                if compaction != "unfinished":
                    log.append(CompactionEnd(on))
                if inside:
                    log.extend(records[-3:])
            else:
                log.extend(records[-3:])
    check_loaded(store, log.id)
