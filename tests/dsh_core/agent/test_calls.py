"""A step's calls: free reads side by side, anything else alone, results in the model's order.

In-process, over the scripted model: concurrency is proved by calls that each wait for the
others to have started (they could not all finish otherwise), never by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.calls import MAX_CONCURRENT, Nested, running_call
from dsh_core.agent.history import History
from dsh_core.agent.loop import LoopEvent, ToolFinished, ToolStarting
from dsh_core.errors import ABORTED, ABORTED_BEFORE_DISPATCH, TOOL_FAILED, TOOL_REFUSED
from dsh_core.model.seam import AssistantMessage, TextDelta, ToolMessage
from dsh_core.session import SessionLog
from dsh_core.session.events import ToolCallStarted, ToolResult, TurnEnd
from dsh_core.testing import ScriptedModel
from dsh_core.tools import Access, ToolError, ToolOutput
from tests.dsh_core.agent.test_loop_tools import (
    STOP,
    FakeTool,
    Recorder,
    asks,
    call,
    conversation_with,
    records,
    run,
)


def answered(log: SessionLog) -> list[tuple[str, str | None]]:
    """Each result in log order: its call id and its error code (None for a success)."""
    return [(r.call_id, r.error.code if r.error else None) for r in records(log, ToolResult)]


def test_free_calls_run_side_by_side_and_answer_in_the_models_order(
    model: ScriptedModel, log: SessionLog
) -> None:
    started: list[str] = []
    everyone = asyncio.Event()

    async def meet(arguments: Mapping[str, Any]) -> ToolOutput:
        started.append(arguments["text"])
        if len(started) == 3:
            everyone.set()
        await everyone.wait()  # only if all three run at once does any of them finish
        return ToolOutput(f"read {arguments['text']}")

    tool = FakeTool("read", work=meet)
    model.enqueue(
        asks(
            call(1, "read", '{"text": "a"}'),
            call(2, "read", '{"text": "b"}'),
            call(3, "read", '{"text": "c"}'),
        ),
        [TextDelta("done"), STOP],
    )
    recorder = Recorder()
    conversation = conversation_with(model, log, tool)
    assert run(conversation.run_turn("q", on_event=recorder)) == TurnEnd(1, "completed")
    assert answered(log) == [("call_1", None), ("call_2", None), ("call_3", None)]
    shown = [
        type(e).__name__ for e in recorder.events if isinstance(e, ToolStarting | ToolFinished)
    ]
    assert shown == ["ToolStarting"] * 3 + ["ToolFinished"] * 3
    # The next request carries the results in the model's order, right after the calls.
    messages = model.requests[1].messages
    assert isinstance(messages[-4], AssistantMessage) and len(messages[-4].tool_calls) == 3
    assert [m.tool_call_id for m in messages[-3:] if isinstance(m, ToolMessage)] == [
        "call_1",
        "call_2",
        "call_3",
    ]


def test_results_are_written_in_order_however_the_calls_finish(
    model: ScriptedModel, log: SessionLog
) -> None:
    gates = {name: asyncio.Event() for name in "abc"}
    finished: list[str] = []

    async def wait_for_gate(arguments: Mapping[str, Any]) -> ToolOutput:
        name = arguments["text"]
        if name == "c":  # the last call finishes first, then releases the others backwards
            gates["b"].set()
        elif name == "b":
            await gates["b"].wait()
            gates["a"].set()
        else:
            await gates["a"].wait()
        finished.append(name)
        return ToolOutput(name)

    tool = FakeTool("read", work=wait_for_gate)
    calls = [call(n, "read", f'{{"text": "{x}"}}') for n, x in enumerate("abc", 1)]
    model.enqueue(asks(*calls), [STOP])
    run(conversation_with(model, log, tool).run_turn("q"))
    assert finished == ["c", "b", "a"]
    assert [r.content for r in records(log, ToolResult)] == ["a", "b", "c"]


def test_a_call_that_needs_a_decision_waits_for_the_reads_and_runs_alone(
    model: ScriptedModel, log: SessionLog
) -> None:
    events: list[str] = []

    async def reading(arguments: Mapping[str, Any]) -> ToolOutput:
        events.append(f"read {arguments['text']} starts")
        await asyncio.sleep(0)
        events.append(f"read {arguments['text']} ends")
        return ToolOutput("ok")

    async def writing(arguments: Mapping[str, Any]) -> ToolOutput:
        events.append("write runs")
        return ToolOutput("written")

    reader = FakeTool("read", work=reading)
    writer = FakeTool("write", "write", work=writing)
    model.enqueue(
        asks(
            call(1, "read", '{"text": "a"}'),
            call(2, "read", '{"text": "b"}'),
            call(3, "write"),
            call(4, "read", '{"text": "c"}'),
        ),
        [STOP],
    )
    approval = ApprovalPolicy.granting(["write"])
    conversation = conversation_with(model, log, reader, writer, approval=approval)
    run(conversation.run_turn("q"))
    assert events.index("write runs") > max(
        events.index("read a ends"), events.index("read b ends")
    )
    assert events.index("read c starts") > events.index("write runs")
    assert [r.call_id for r in records(log, ToolResult)] == [f"call_{n}" for n in range(1, 5)]


def test_a_failing_call_leaves_the_others_answered(model: ScriptedModel, log: SessionLog) -> None:
    async def maybe_fail(arguments: Mapping[str, Any]) -> ToolOutput:
        if arguments["text"] == "missing":
            raise ToolError("cannot read missing: no such file")
        return ToolOutput(f"read {arguments['text']}")

    tool = FakeTool("read", work=maybe_fail)
    model.enqueue(
        asks(
            call(1, "read", '{"text": "a"}'),
            call(2, "read", '{"text": "missing"}'),
            call(3, "read", '{"text": "c"}'),
        ),
        [STOP],
    )
    run(conversation_with(model, log, tool).run_turn("q"))
    assert answered(log) == [("call_1", None), ("call_2", TOOL_FAILED), ("call_3", None)]
    assert records(log, ToolResult)[1].content == "Error: cannot read missing: no such file"


def test_a_refused_call_between_reads_leaves_every_call_answered(
    model: ScriptedModel, log: SessionLog
) -> None:
    class Outside(FakeTool):
        """A read that reaches outside the working directory: it needs a decision."""

        def prepare(self, arguments: Mapping[str, Any]) -> Any:
            invocation = super().prepare(arguments)
            if arguments.get("text") == "/etc/hosts":
                return type(invocation)(Access("read", ("/etc/hosts",)), "x", invocation.run)
            return invocation

    tool = Outside("read")
    model.enqueue(
        asks(
            call(1, "read", '{"text": "a"}'),
            call(2, "read", '{"text": "/etc/hosts"}'),
            call(3, "read", '{"text": "c"}'),
        ),
        [STOP],
    )
    run(conversation_with(model, log, tool).run_turn("q"))  # no asker: a pipe
    assert answered(log) == [("call_1", None), ("call_2", TOOL_REFUSED), ("call_3", None)]
    assert [a["text"] for a in tool.ran] == ["a", "c"]


def test_ctrl_c_while_reads_run_answers_every_call(model: ScriptedModel, log: SessionLog) -> None:
    first_done = asyncio.Event()
    running = asyncio.Event()

    async def slow(arguments: Mapping[str, Any]) -> ToolOutput:
        if arguments["text"] == "a":
            first_done.set()
            return ToolOutput("quick")
        running.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    tool = FakeTool("read", work=slow)
    model.enqueue(
        asks(
            call(1, "read", '{"text": "a"}'),
            call(2, "read", '{"text": "b"}'),
            call(3, "read", '{"text": "c"}'),
        )
    )
    conversation = conversation_with(model, log, tool)

    async def main() -> TurnEnd:
        turn = asyncio.create_task(conversation.run_turn("q"))
        await first_done.wait()
        await running.wait()
        conversation.cancel("user")
        return await turn

    assert run(main()) == TurnEnd(1, "aborted", reason="user")
    assert answered(log) == [("call_1", None), ("call_2", ABORTED), ("call_3", ABORTED)]
    # What the model is sent next is valid: every call has its result, in order.
    history = History()
    history.update(log.events)
    assert [m.tool_call_id for m in history.messages() if isinstance(m, ToolMessage)] == [
        "call_1",
        "call_2",
        "call_3",
    ]


def test_calls_waiting_for_a_slot_when_cancelled_were_never_started(
    model: ScriptedModel, log: SessionLog
) -> None:
    running = 0
    peak = 0
    full = asyncio.Event()

    async def hold(arguments: Mapping[str, Any]) -> ToolOutput:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == MAX_CONCURRENT:
            full.set()
        try:
            await asyncio.sleep(3600)
        finally:
            running -= 1
        raise AssertionError("not reached")

    tool = FakeTool("read", work=hold)
    count = MAX_CONCURRENT + 2
    model.enqueue(asks(*(call(n, "read") for n in range(1, count + 1))))
    conversation = conversation_with(model, log, tool)

    async def main() -> TurnEnd:
        turn = asyncio.create_task(conversation.run_turn("q"))
        await full.wait()
        for _ in range(3):  # a waiting call would have had its chance to start by now
            await asyncio.sleep(0)
        conversation.cancel("user")
        return await turn

    assert run(main()) == TurnEnd(1, "aborted", reason="user")
    assert peak == MAX_CONCURRENT
    codes = [code for _, code in answered(log)]
    assert codes == [ABORTED] * MAX_CONCURRENT + [ABORTED_BEFORE_DISPATCH] * 2
    assert len(records(log, ToolCallStarted)) == count


def test_a_tool_reports_nested_events_under_its_call(model: ScriptedModel, log: SessionLog) -> None:
    async def with_child(arguments: Mapping[str, Any]) -> ToolOutput:
        current = running_call()
        assert current is not None and current.call.id == "call_1"
        inner = call(9, "read", '{"text": "x"}')
        current.report(ToolStarting(inner, "x"))
        return ToolOutput("child said hi")

    tool = FakeTool("subagent", work=with_child)
    model.enqueue(asks(call(1, "subagent")), [STOP])
    seen: list[LoopEvent] = []
    run(conversation_with(model, log, tool).run_turn("q", on_event=seen.append))
    nested = [e for e in seen if isinstance(e, Nested)]
    assert len(nested) == 1 and nested[0].call.id == "call_1"
    assert isinstance(nested[0].event, ToolStarting) and nested[0].event.call.id == "call_9"
    assert running_call() is None
