"""The loop of steps: tool calls run, answered in pairs, approved, cancelled, repaired."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import pytest

from dsh_core.agent.approval import Answer, ApprovalPolicy, Choice, Question
from dsh_core.agent.loop import Conversation, LoopEvent, ToolFinished, ToolStarting
from dsh_core.errors import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    CONTEXT_WINDOW_EXCEEDED,
    TOOL_FAILED,
    TOOL_NOT_RUN,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_REFUSED,
    FailureRecord,
    LlmError,
)
from dsh_core.model.seam import (
    AssistantMessage,
    Event,
    Finish,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from dsh_core.session import SessionLog, SessionStore
from dsh_core.session.events import (
    AssistantStep,
    ToolCallStarted,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserText,
)
from dsh_core.testing import ScriptedModel
from dsh_core.tools import Access, AccessKind, Invocation, Toolbox, ToolError, ToolOutput
from tests.dsh_core.session.test_session import count_fsyncs

T = TypeVar("T")
STOP = Finish("stop")
CALLS = Finish("tool-calls")


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


class FakeTool:
    """A tool for tests: what it needs, what it answers, and a hook to run while it works."""

    def __init__(
        self,
        name: str = "echo",
        kind: AccessKind = "read",
        *,
        work: Callable[[Mapping[str, Any]], Awaitable[ToolOutput]] | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.work = work
        self.ran: list[Mapping[str, Any]] = []

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, f"the {self.name} tool", {"type": "object"})

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return json.dumps(dict(arguments), sort_keys=True)

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        if "bad" in arguments:
            raise ToolError("bad is not an argument of this tool")

        async def run() -> ToolOutput:
            self.ran.append(arguments)
            if self.work is not None:
                return await self.work(arguments)
            return ToolOutput(f"echo {arguments.get('text', '')}")

        return Invocation(Access(self.kind), self.describe(arguments), run)


def call(n: int, name: str = "echo", arguments: str = '{"text": "hi"}') -> ToolCall:
    return ToolCall(f"call_{n}", name, arguments)


def asks(*calls: ToolCall, text: str = "", finish: Finish = CALLS) -> list[Event | BaseException]:
    events: list[Event | BaseException] = [TextDelta(text)] if text else []
    events += [ToolCallRequest(c) for c in calls]
    events += [Usage(10, 5), finish]
    return events


def conversation_with(
    model: ScriptedModel, log: SessionLog, *tools: FakeTool, **options: Any
) -> Conversation:
    return Conversation(
        model, log, model_name="m", toolbox=Toolbox(tools or (FakeTool(),)), **options
    )


def records(log: SessionLog, kind: type[T]) -> list[T]:
    return [event.record for event in log.events if isinstance(event.record, kind)]


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def __call__(self, event: LoopEvent) -> None:
        self.events.append(event)


def assert_pairs(messages: tuple[Any, ...] | list[Any]) -> None:
    """The rule the stub server and DeepSeek enforce: calls answered at once, in order."""
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answers = messages[index + 1 : index + 1 + len(message.tool_calls)]
            assert [m.tool_call_id for m in answers if isinstance(m, ToolMessage)] == [
                c.id for c in message.tool_calls
            ], messages


# --- steps --------------------------------------------------------------------------------------


def test_a_call_then_an_answer(model: ScriptedModel, log: SessionLog) -> None:
    model.enqueue(
        asks(call(1), text="Let me look."), [TextDelta("It says hi."), Usage(20, 4), STOP]
    )
    seen = Recorder()
    end = run(conversation_with(model, log).run_turn("what does it say?", on_event=seen))
    assert end == TurnEnd(1, "completed")
    assert [event.type for event in log.events] == [
        "turn/start",
        "user/message",
        "assistant/message",
        "usage",
        "tool/call",
        "tool/result",
        "assistant/message",
        "usage",
        "turn/end",
    ]
    assert records(log, AssistantStep)[0] == AssistantStep(
        1, 1, "Let me look.", tool_calls=(call(1),)
    )
    assert records(log, ToolResult) == [ToolResult(1, 1, "call_1", ToolOutput("echo hi"))]
    second = model.requests[1]
    assert second.messages == (
        UserMessage("what does it say?"),
        AssistantMessage("Let me look.", None, (call(1),)),
        ToolMessage("call_1", "echo hi"),
    )
    assert second.tools == (ToolSpec("echo", "the echo tool", {"type": "object"}),)
    started = [e for e in seen.events if isinstance(e, ToolStarting | ToolFinished)]
    assert started == [
        ToolStarting(call(1), '{"text": "hi"}'),
        ToolFinished(call(1), records(log, ToolResult)[0]),
    ]


def test_several_calls_run_in_the_models_order(model: ScriptedModel, log: SessionLog) -> None:
    tool = FakeTool()
    calls = [call(n, arguments=json.dumps({"text": str(n)})) for n in range(1, 101)]
    model.enqueue(asks(*calls), [TextDelta("done"), STOP])
    assert run(conversation_with(model, log, tool).run_turn("go")).kind == "completed"
    assert [a["text"] for a in tool.ran] == [str(n) for n in range(1, 101)]
    messages = model.requests[1].messages
    assert [m.tool_call_id for m in messages if isinstance(m, ToolMessage)] == [c.id for c in calls]
    assert_pairs(messages)


def test_a_chain_of_steps_keeps_every_pair(model: ScriptedModel, log: SessionLog) -> None:
    model.enqueue(asks(call(1)), asks(call(2)), asks(call(3)), [TextDelta("end"), STOP])
    conversation = conversation_with(model, log)
    assert run(conversation.run_turn("go")).kind == "completed"
    assert [r.step for r in records(log, AssistantStep)] == [1, 2, 3, 4]
    assert len(model.requests) == 4
    assert_pairs(model.requests[-1].messages)
    model.enqueue([TextDelta("next"), STOP])
    run(conversation.run_turn("and now?"))
    assert_pairs(model.requests[-1].messages)
    assert model.requests[-1].messages[-1] == UserMessage("and now?")


def test_failures_are_results_and_the_turn_goes_on(model: ScriptedModel, log: SessionLog) -> None:
    async def boom(arguments: Mapping[str, Any]) -> ToolOutput:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as exc:
            raise RuntimeError("could not reach the thing") from exc

    model.enqueue(
        asks(
            call(1, "nope"),
            call(2, arguments='{"text": "unterminated'),
            call(3, arguments="[1, 2]"),
            call(4, arguments='{"bad": 1}'),
            call(5, "boom"),
        ),
        [TextDelta("I see."), STOP],
    )
    conversation = conversation_with(model, log, FakeTool(), FakeTool("boom", work=boom))
    assert run(conversation.run_turn("try")).kind == "completed"
    contents = [r.content for r in records(log, ToolResult)]
    assert contents[0] == 'Error: unknown tool "nope"; the tools are: echo, boom'
    assert contents[1].startswith("Error: invalid arguments: not valid JSON (Unterminated")
    assert contents[2] == "Error: invalid arguments: a JSON list, not an object"
    assert contents[3] == "Error: bad is not an argument of this tool"
    assert contents[4] == "Error: could not reach the thing: [Errno 111] Connection refused"
    assert all(r.is_error for r in records(log, ToolResult))
    assert records(log, ToolResult)[4].error == FailureRecord(
        TOOL_FAILED, "could not reach the thing: [Errno 111] Connection refused"
    )
    # Calls that could not even be prepared never started.
    assert [r.call_id for r in records(log, ToolCallStarted)] == ["call_5"]


def test_empty_output_is_sent_as_no_output(model: ScriptedModel, log: SessionLog) -> None:
    async def silent(arguments: Mapping[str, Any]) -> ToolOutput:
        return ToolOutput("")

    model.enqueue(asks(call(1)), [TextDelta("ok"), STOP])
    run(conversation_with(model, log, FakeTool(work=silent)).run_turn("q"))
    assert model.requests[1].messages[-1] == ToolMessage("call_1", "(no output)")


def test_reasoning_of_a_calling_step_is_sent_back(model: ScriptedModel, log: SessionLog) -> None:
    model.enqueue(
        [ReasoningDelta("I should look."), *asks(call(1))],
        asks(call(2)),
        [ReasoningDelta("Done thinking."), TextDelta("ok"), STOP],
    )
    conversation = conversation_with(model, log)
    run(conversation.run_turn("q"))
    model.enqueue([TextDelta("sure"), STOP])
    run(conversation.run_turn("again"))
    assistants = [m for m in model.requests[-1].messages if isinstance(m, AssistantMessage)]
    assert [(m.reasoning, bool(m.tool_calls)) for m in assistants] == [
        ("I should look.", True),
        (None, True),  # the adapter sends "" for it: thinking mode wants the field
        (None, False),  # an answer's reasoning is not sent back
    ]


def test_length_with_calls_pending_answers_them_not_run(
    model: ScriptedModel, log: SessionLog
) -> None:
    tool = FakeTool()
    model.enqueue(asks(call(1), call(2), finish=Finish("max-tokens")))
    conversation = conversation_with(model, log, tool)
    assert run(conversation.run_turn("q")) == TurnEnd(1, "max-tokens")
    assert tool.ran == []
    results = records(log, ToolResult)
    assert [r.content for r in results] == [
        "Error: not run: the output token limit was reached"
    ] * 2
    assert {r.error.code for r in results if r.error} == {TOOL_NOT_RUN}
    assert_pairs(conversation.history)


def test_the_step_limit(model: ScriptedModel, log: SessionLog) -> None:
    model.enqueue(*(asks(call(n)) for n in range(1, 4)))
    conversation = conversation_with(model, log, max_steps=3)
    assert run(conversation.run_turn("loop")) == TurnEnd(1, "max-steps")
    assert len(model.requests) == 3  # the fourth request was never sent
    assert len(records(log, ToolResult)) == 3
    model.enqueue([TextDelta("ok"), STOP])
    run(conversation.run_turn("stop looping"))
    assert_pairs(model.requests[-1].messages)


def test_a_failed_later_step_keeps_the_earlier_ones(model: ScriptedModel, log: SessionLog) -> None:
    model.enqueue(asks(call(1)), LlmError("overloaded", "SERVER", status=503))
    conversation = conversation_with(model, log)
    end = run(conversation.run_turn("q"))
    assert end.kind == "error" and end.failure is not None
    assert end.failure.code == "SERVER"
    # The turn ran a tool, so it stays in what the model sees, pairs whole.
    history = conversation.history
    assert history[:3] == [
        UserMessage("q"),
        AssistantMessage("", None, (call(1),)),
        ToolMessage("call_1", "echo hi"),
    ]


def test_the_context_window_is_checked_per_step(model: ScriptedModel, log: SessionLog) -> None:
    async def huge(arguments: Mapping[str, Any]) -> ToolOutput:
        return ToolOutput("x" * 10_000)

    model.enqueue(asks(call(1)))
    conversation = conversation_with(
        model, log, FakeTool(work=huge), context_window=2_000, auto_compact=False
    )
    end = run(conversation.run_turn("q"))
    assert end.kind == "error" and end.failure is not None
    assert end.failure.code == CONTEXT_WINDOW_EXCEEDED
    assert "no longer fits" in end.failure.message
    assert len(model.requests) == 1


def test_fsyncs_per_step_are_constant(
    model: ScriptedModel, log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.enqueue(*(asks(call(n)) for n in range(1, 11)), [TextDelta("ok"), STOP])
    writer = FakeTool("writer", "write")
    policy = ApprovalPolicy.granting(["write"])
    conversation = conversation_with(model, log, FakeTool(), writer, approval=policy)
    calls = count_fsyncs(monkeypatch)
    run(conversation.run_turn("q"))
    # user/message, one tool/result per read-only call, turn/end.
    assert len(calls) == 1 + 10 + 1
    calls.clear()
    model.enqueue(asks(call(1, "writer")), [TextDelta("ok"), STOP])
    run(conversation.run_turn("q"))
    # A call that can change anything: its tool/call is on disk before it runs.
    assert len(calls) == 1 + 2 + 1


# --- approval -----------------------------------------------------------------------------------


def asker(
    *answers: Answer | Choice,
) -> tuple[Callable[[Question], Awaitable[Answer]], list[Question]]:
    """Answers the questions in turn (a bare choice is that answer without a reason)."""
    asked: list[Question] = []
    queue = [answer if isinstance(answer, Answer) else Answer(answer) for answer in answers]

    async def ask(question: Question) -> Answer:
        asked.append(question)
        return queue.pop(0)

    return ask, asked


def test_without_a_terminal_a_change_is_refused_with_the_way_out(
    model: ScriptedModel, log: SessionLog
) -> None:
    writer = FakeTool("writer", "write")
    model.enqueue(asks(call(1, "writer")), [TextDelta("ok"), STOP])
    run(conversation_with(model, log, writer).run_turn("q"))
    assert writer.ran == []
    (result,) = records(log, ToolResult)
    assert result.content == (
        'Error: tool "writer" needs approval and stdin is not a terminal; run with --allow write'
    )
    assert result.error is not None and result.error.code == TOOL_REFUSED
    assert [e.data for e in log.events if e.type == "approval/decided"] == [
        {"turn": 1, "call_id": "call_1", "outcome": "unavailable"}
    ]
    assert records(log, ToolCallStarted) == []


def test_a_grant_runs_without_asking(model: ScriptedModel, log: SessionLog) -> None:
    shell = FakeTool("shell", "shell")
    model.enqueue(asks(call(1, "shell")), [TextDelta("ok"), STOP])
    policy = ApprovalPolicy.granting(["shell"])
    run(conversation_with(model, log, shell, approval=policy).run_turn("q"))
    assert len(shell.ran) == 1
    assert [e.data["outcome"] for e in log.events if e.type == "approval/decided"] == [
        "granted-by-flag"
    ]


def test_yes_no_always(model: ScriptedModel, log: SessionLog) -> None:
    shell = FakeTool("shell", "shell")
    ask, asked = asker("yes", "no", "always")
    model.enqueue(
        asks(call(1, "shell"), call(2, "shell"), call(3, "shell"), call(4, "shell")),
        [TextDelta("ok"), STOP],
    )
    policy = ApprovalPolicy(asker=ask)
    run(conversation_with(model, log, shell, approval=policy).run_turn("q"))
    assert len(asked) == 3  # the fourth call is allowed by "always"
    assert asked[0].invocation.summary == '{"text": "hi"}'
    assert [e.data["outcome"] for e in log.events if e.type == "approval/decided"] == [
        "allowed",
        "rejected",
        "allowed-always",
        "allowed-always",
    ]
    assert [r.content for r in records(log, ToolResult)] == [
        "echo hi",
        'Error: the user rejected tool "shell"',
        "echo hi",
        "echo hi",
    ]


def test_a_no_with_a_reason_is_told_to_the_model_and_logged(
    model: ScriptedModel, log: SessionLog
) -> None:
    shell = FakeTool("shell", "shell")
    ask, _ = asker(Answer("no", "use uv instead"), "no")
    model.enqueue(asks(call(1, "shell"), call(2, "shell")), [TextDelta("ok"), STOP])
    run(conversation_with(model, log, shell, approval=ApprovalPolicy(asker=ask)).run_turn("q"))
    assert [r.content for r in records(log, ToolResult)] == [
        'Error: the user rejected tool "shell": use uv instead',
        'Error: the user rejected tool "shell"',
    ]
    assert [e.data for e in log.events if e.type == "approval/decided"] == [
        {"turn": 1, "call_id": "call_1", "outcome": "rejected", "reason": "use uv instead"},
        {"turn": 1, "call_id": "call_2", "outcome": "rejected"},
    ]
    assert shell.ran == []


class ScopedTool(FakeTool):
    """A command-like tool: an "always" covers the calls with the same ``word`` argument, and
    none when the call has no word (as ``bash`` does for a command that is not simple)."""

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        invocation = super().prepare(arguments)
        access = Access(self.kind, scope=arguments.get("word"))
        return Invocation(access, invocation.summary, invocation.run)


def test_always_covers_only_the_calls_of_the_same_scope(
    model: ScriptedModel, log: SessionLog
) -> None:
    tool = ScopedTool("cmd", "shell")
    pytest_call = '{"word": "pytest"}'
    ask, asked = asker("always", "yes", "no", "always")
    model.enqueue(
        asks(
            call(1, "cmd", pytest_call),  # asked: always, for "pytest"
            call(2, "cmd", pytest_call),  # covered
            call(3, "cmd", '{"word": "ls"}'),  # another word: asked
            call(4, "cmd", "{}"),  # no word: asked (no)
            call(5, "cmd", "{}"),  # asked again: "always" is only a yes for it
            call(6, "cmd", pytest_call),  # still covered
        ),
        [TextDelta("ok"), STOP],
    )
    run(conversation_with(model, log, tool, approval=ApprovalPolicy(asker=ask)).run_turn("q"))
    assert [q.call.id for q in asked] == ["call_1", "call_3", "call_4", "call_5"]
    assert [e.data["outcome"] for e in log.events if e.type == "approval/decided"] == [
        "allowed-always",
        "allowed-always",
        "allowed",
        "rejected",
        "allowed",
        "allowed-always",
    ]


# --- cancellation -------------------------------------------------------------------------------


def test_cancel_while_a_tool_runs(model: ScriptedModel, log: SessionLog) -> None:
    started = asyncio.Event()
    stopped: list[str] = []

    async def hang(arguments: Mapping[str, Any]) -> ToolOutput:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            stopped.append("cancelled")
            raise
        raise AssertionError("not reached")

    model.enqueue(asks(call(1, "hang"), call(2, "hang")))
    conversation = conversation_with(model, log, FakeTool("hang", "write", work=hang))
    conversation.approval = ApprovalPolicy.granting(["write"])

    async def main() -> tuple[TurnEnd, int]:
        turn = asyncio.create_task(conversation.run_turn("q"))
        await started.wait()
        conversation.cancel("user")
        end = await turn
        current = asyncio.current_task()
        assert current is not None
        return end, current.cancelling()

    end, cancelling = run(main())
    assert (end, cancelling) == (TurnEnd(1, "aborted", reason="user"), 0)
    assert stopped == ["cancelled"]
    results = records(log, ToolResult)
    assert [(r.call_id, r.error.code if r.error else None) for r in results] == [
        ("call_1", ABORTED),
        ("call_2", ABORTED_BEFORE_DISPATCH),
    ]
    assert results[0].content == "Error: cancelled while running (user)"
    assert_pairs(conversation.history)


def test_a_tool_that_stops_itself_keeps_its_partial_output(
    model: ScriptedModel, log: SessionLog
) -> None:
    started = asyncio.Event()

    async def partial(arguments: Mapping[str, Any]) -> ToolOutput:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            error = ToolError("the command was stopped (SIGINT)", ABORTED)
            return ToolOutput.failed(error, content_after="line 1\nline 2")
        raise AssertionError("not reached")

    model.enqueue(asks(call(1, "partial")))
    conversation = conversation_with(model, log, FakeTool("partial", work=partial))

    async def main() -> TurnEnd:
        turn = asyncio.create_task(conversation.run_turn("q"))
        await started.wait()
        conversation.cancel("shutdown")
        return await turn

    assert run(main()) == TurnEnd(1, "aborted", reason="shutdown")
    (result,) = records(log, ToolResult)
    assert result.content == "Error: the command was stopped (SIGINT)\nline 1\nline 2"


def test_ctrl_c_at_the_question(model: ScriptedModel, log: SessionLog) -> None:
    asking = asyncio.Event()

    async def ask(question: Question) -> Answer:
        asking.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    shell = FakeTool("shell", "shell")
    model.enqueue(asks(call(1, "shell")))
    conversation = conversation_with(model, log, shell, approval=ApprovalPolicy(asker=ask))

    async def main() -> TurnEnd:
        turn = asyncio.create_task(conversation.run_turn("q"))
        await asking.wait()
        conversation.cancel("user")
        return await turn

    assert run(main()) == TurnEnd(1, "aborted", reason="user")
    assert shell.ran == []
    assert [e.data["outcome"] for e in log.events if e.type == "approval/decided"] == ["cancelled"]
    (result,) = records(log, ToolResult)
    assert result.error is not None and result.error.code == ABORTED_BEFORE_DISPATCH


def test_an_observer_that_cancels_between_calls(model: ScriptedModel, log: SessionLog) -> None:
    tool = FakeTool(kind="write")  # one at a time: reads would run side by side
    model.enqueue(asks(call(1), call(2), call(3)))
    approval = ApprovalPolicy.granting(["write"])
    conversation = conversation_with(model, log, tool, approval=approval)

    def cancel_after_first(event: LoopEvent) -> None:
        if isinstance(event, ToolFinished):
            conversation.cancel("user")

    end = run(conversation.run_turn("q", on_event=cancel_after_first))
    assert end == TurnEnd(1, "aborted", reason="user")
    assert len(tool.ran) == 1
    assert [r.error.code if r.error else None for r in records(log, ToolResult)] == [
        None,
        ABORTED_BEFORE_DISPATCH,
        ABORTED_BEFORE_DISPATCH,
    ]


# --- crash repair -------------------------------------------------------------------------------


def test_load_answers_what_a_dead_process_left(store: SessionStore, log: SessionLog) -> None:
    calls = (call(1), call(2), call(3))
    log.append(TurnStart(1, "m"))
    log.append(UserText(1, "q"))
    log.append(AssistantStep(1, 1, "", tool_calls=calls))
    log.append(ToolCallStarted(1, 1, "call_1", "echo", "{}"))
    log.append(ToolResult(1, 1, "call_1", ToolOutput("echo")))
    log.append(ToolCallStarted(1, 1, "call_2", "echo", "{}"), durable=True)
    log.close()  # killed while call_2 ran; call_3 never started
    loaded, report = store.open(log.id)
    with loaded:
        assert report.interrupted_turn == 1
        assert "answered its 2 unfinished tool call(s)" in report.notices[0]
        results = [e.record for e in loaded.events if isinstance(e.record, ToolResult)]
        assert [(r.call_id, r.error.code if r.error else None) for r in results] == [
            ("call_1", None),
            ("call_2", TOOL_OUTCOME_UNKNOWN),
            ("call_3", TOOL_NOT_STARTED),
        ]
        assert results[1].content == (
            'Error: tool "echo" was running when the process running dsh exited: '
            "its outcome is unknown; do not retry blindly"
        )
        assert loaded.events[-1].record == TurnEnd(1, "interrupted")
        model = ScriptedModel()
        model.enqueue([TextDelta("ok"), STOP])
        conversation = Conversation(model, loaded, model_name="m", toolbox=Toolbox([FakeTool()]))
        run(conversation.run_turn("what happened?"))
        messages = model.requests[0].messages
        assert_pairs(messages)
        assert messages[-1] == UserMessage("what happened?")
    assert os.path.exists(log.path)


def test_a_retry_starts_the_step_over(model: ScriptedModel, log: SessionLog) -> None:
    # On a pipe, reasoning is hidden: a stream cut after reasoning only is retried, and the
    # failed attempt's reasoning is neither stored nor sent back.
    notice = RetryNotice(1, 4, 0.0, LlmError("cut", "STREAM_CLOSED"))
    model.enqueue(
        [ReasoningDelta("first try"), notice, ReasoningDelta("second try"), *asks(call(1))],
        [TextDelta("ok"), STOP],
    )
    run(conversation_with(model, log).run_turn("q"))
    assert records(log, AssistantStep)[0].reasoning == "second try"
    assert model.requests[1].messages[1] == AssistantMessage("", "second try", (call(1),))


def test_a_cancel_from_outside_ends_the_turn_even_when_the_tool_absorbs_it(
    model: ScriptedModel, log: SessionLog
) -> None:
    started = asyncio.Event()

    async def absorbing(arguments: Mapping[str, Any]) -> ToolOutput:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return ToolOutput.failed(ToolError("stopped", ABORTED))
        raise AssertionError("not reached")

    tool = FakeTool("absorbing", "write", work=absorbing)  # one at a time, as a write runs
    model.enqueue(asks(call(1, "absorbing"), call(2, "absorbing")))
    approval = ApprovalPolicy.granting(["write"])
    conversation = conversation_with(model, log, tool, approval=approval)

    async def main() -> None:
        turn = asyncio.create_task(conversation.run_turn("q"))
        await started.wait()
        turn.cancel()  # asyncio.run shutting down, say: not Conversation.cancel
        with pytest.raises(asyncio.CancelledError):
            await turn

    run(main())
    assert len(tool.ran) == 1
    assert log.events[-1].record == TurnEnd(1, "aborted", reason="cancelled")
    assert [r.error.code if r.error else None for r in records(log, ToolResult)] == [
        ABORTED,
        ABORTED_BEFORE_DISPATCH,
    ]


def test_a_tool_that_cannot_be_set_up_is_a_result_not_the_turn(
    model: ScriptedModel, log: SessionLog
) -> None:
    class Broken(FakeTool):
        def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
            try:
                os.mkdir("/proc/no-such-place")
            except OSError as exc:
                raise RuntimeError("the sandbox probe could not start") from exc
            raise AssertionError("not reached")

    model.enqueue(asks(call(1, "broken")), [TextDelta("I see."), STOP])
    end = run(conversation_with(model, log, Broken("broken")).run_turn("q"))
    assert end == TurnEnd(1, "completed")
    (result,) = records(log, ToolResult)
    assert result.content.startswith("Error: the sandbox probe could not start: [Errno ")
    assert result.error is not None and result.error.code == TOOL_FAILED
