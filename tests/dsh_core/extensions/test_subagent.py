"""The ``subagent`` tool in-process: a child conversation with its own linked session log."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.calls import Nested
from dsh_core.agent.loop import Conversation, LoopEvent, ToolFinished, ToolStarting
from dsh_core.errors import SERVER, SUBAGENT_FAILED, LlmError
from dsh_core.extensions.subagent import SubagentTool
from dsh_core.model.seam import (
    ChatRequest,
    Event,
    Finish,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    Usage,
)
from dsh_core.session import SUBAGENTS_DIR, SessionLog, SessionStore
from dsh_core.session.events import ToolResult, TurnEnd
from dsh_core.testing import Hang, ScriptedModel
from dsh_core.tools import Tool, Toolbox, Workspace, builtin_tools
from tests.dsh_core.agent.test_loop_tools import STOP, FakeTool, asks, records, run

CHILD_PROMPT = "You are a subagent."


def subagent_call(n: int, prompt: str = "find the answer", description: str = "look") -> ToolCall:
    arguments = json.dumps({"description": description, "prompt": prompt})
    return ToolCall(f"call_{n}", "subagent", arguments)


def parent_with_subagents(
    model: object,
    log: SessionLog,
    store: SessionStore,
    children: list[Conversation],
    *,
    tools: list[Tool] = (),  # type: ignore[assignment]
) -> Conversation:
    """A parent conversation whose ``subagent`` calls run children over the same model, each
    with an ``echo`` tool (a read) and a session log of its own; ``tools`` besides."""

    def open_child(call: ToolCall) -> Conversation:
        child_log = store.create(Path(log.cwd), parent=log, call_id=call.id)
        child = Conversation(
            model,  # type: ignore[arg-type]
            child_log,
            model_name="m",
            toolbox=Toolbox([FakeTool("echo")]),
            approval=ApprovalPolicy(unattended="a subagent cannot ask anyone"),
            system_prompt=CHILD_PROMPT,
        )
        children.append(child)
        return child

    return Conversation(
        model,  # type: ignore[arg-type]
        log,
        model_name="m",
        toolbox=Toolbox([SubagentTool(open_child, output_dir(log)), *tools]),
        approval=ApprovalPolicy.granting(["read"]),
    )


def output_dir(log: SessionLog) -> Path:
    """Where the parent's long results go, as the front door sets it up."""
    return log.path.parent / "tool-output"


def test_a_subagent_answers_with_its_final_text_from_a_session_of_its_own(
    model: ScriptedModel, log: SessionLog, store: SessionStore
) -> None:
    model.enqueue(
        asks(subagent_call(1)),  # the parent asks for a subagent
        asks(ToolCall("c1", "echo", '{"text": "x"}')),  # the child reads
        [TextDelta("The answer is 42."), STOP],  # the child answers
        [TextDelta("It says 42."), STOP],  # the parent answers
    )
    children: list[Conversation] = []
    seen: list[LoopEvent] = []
    parent = parent_with_subagents(model, log, store, children)
    assert run(parent.run_turn("ask a subagent", on_event=seen.append)) == TurnEnd(1, "completed")
    (result,) = records(log, ToolResult)
    assert result.content == "The answer is 42." and not result.is_error
    (child,) = children
    assert child.log.closed
    assert child.log.path.parent.parent == log.path.parent / SUBAGENTS_DIR
    header = json.loads(child.log.path.read_text().splitlines()[0])
    assert header["parent"] == {"session": log.id, "call_id": "call_1"}
    # A fresh conversation: the system prompt and the prompt, nothing of the parent's.
    child_request = model.requests[1]
    assert [m.role for m in child_request.messages] == ["system", "user"]
    assert child_request.messages[1].content == "find the answer"
    assert [spec.name for spec in child_request.tools] == ["echo"]
    # Its tool calls were shown under the parent's call.
    nested = [e for e in seen if isinstance(e, Nested)]
    assert [type(e.event) for e in nested] == [ToolStarting, ToolFinished]
    assert all(e.call.id == "call_1" for e in nested)


def test_a_subagent_that_fails_is_an_error_result_with_its_chain(
    model: ScriptedModel, log: SessionLog, store: SessionStore
) -> None:
    overloaded = LlmError("DeepSeek API request failed", SERVER, status=503)
    model.enqueue(asks(subagent_call(1)), overloaded, [TextDelta("no luck"), STOP])
    children: list[Conversation] = []
    parent = parent_with_subagents(model, log, store, children)
    assert run(parent.run_turn("q")) == TurnEnd(1, "completed")
    (result,) = records(log, ToolResult)
    assert result.error is not None and result.error.code == SERVER
    assert result.content == (
        f"Error: subagent session {children[0].log.id} failed: DeepSeek API request failed"
    )


def test_a_subagent_that_stops_without_an_answer_says_so(
    model: ScriptedModel, log: SessionLog, store: SessionStore
) -> None:
    model.enqueue(
        asks(subagent_call(1)),
        asks(ToolCall("c", "echo", "{}")),
        [STOP],  # the child ends its turn without a word
        [TextDelta("ok"), STOP],
    )
    parent = parent_with_subagents(model, log, store, [])
    run(parent.run_turn("q"))
    (result,) = records(log, ToolResult)
    assert result.error is not None and result.error.code == SUBAGENT_FAILED
    assert result.content.endswith("ended without any text")


def test_ctrl_c_cancels_the_child_and_both_turns_end_aborted(
    log: SessionLog, store: SessionStore
) -> None:
    child_streaming = asyncio.Event()

    class Noticing(ScriptedModel):
        async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
            async for event in super().stream(request):
                yield event
                if len(self.requests) == 2:  # the child's request has shown its text
                    child_streaming.set()

    noticing = Noticing()
    noticing.enqueue(asks(subagent_call(1)), [TextDelta("thinking..."), Hang()])
    children: list[Conversation] = []
    parent = parent_with_subagents(noticing, log, store, children)

    async def main() -> TurnEnd:
        turn = asyncio.create_task(parent.run_turn("q"))
        await child_streaming.wait()
        parent.cancel("user")
        return await turn

    assert run(main()) == TurnEnd(1, "aborted", reason="user")
    (result,) = records(log, ToolResult)
    assert result.error is not None and result.error.code == "ABORTED"
    (child,) = children
    assert child.log.closed
    ends = [json.loads(line) for line in child.log.path.read_text().splitlines()[1:]]
    assert ends[-1]["type"] == "turn/end" and ends[-1]["data"]["reason"]["kind"] == "aborted"


class MeetingModel:
    """The parent's script, then child requests that answer only once ``count`` of them are in
    flight at once: a proof that the children ran side by side."""

    def __init__(self, parent: ScriptedModel, count: int) -> None:
        self.parent = parent
        self.count = count
        self.waiting = 0
        self.met = asyncio.Event()

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        if request.messages[0].content != CHILD_PROMPT:
            async for event in self.parent.stream(request):
                yield event
            return
        self.waiting += 1
        if self.waiting == self.count:
            self.met.set()
        await self.met.wait()
        yield TextDelta(f"child saw: {request.messages[1].content}")
        yield Usage(1, 1)
        yield Finish("stop")

    async def close(self) -> None:
        return None


def test_three_subagents_in_one_step_run_side_by_side(log: SessionLog, store: SessionStore) -> None:
    script = ScriptedModel()
    script.enqueue(
        [
            *(ToolCallRequest(subagent_call(n, prompt=f"task {n}")) for n in (1, 2, 3)),
            Usage(1, 1),
            Finish("tool-calls"),
        ],
        [TextDelta("three answers"), STOP],
    )
    children: list[Conversation] = []
    parent = parent_with_subagents(MeetingModel(script, 3), log, store, children)
    assert run(parent.run_turn("q")) == TurnEnd(1, "completed")
    assert [r.content for r in records(log, ToolResult)] == [
        "child saw: task 1",
        "child saw: task 2",
        "child saw: task 3",
    ]
    assert len({child.log.id for child in children}) == 3


def test_a_long_answer_is_saved_where_the_parents_model_can_read_it(
    model: ScriptedModel, log: SessionLog, store: SessionStore, tmp_path: Path
) -> None:
    """The review's model followed the cut answer's pointer, the child's session log in
    DSH_HOME, and ``read`` refused it as a credential. The whole answer is now in the parent's
    tool-output directory, which ``read`` reads as it reads a long command's output."""
    answer = "".join(f"finding {n}: all fine\n" for n in range(3000))  # 66,890 characters
    model.enqueue(asks(subagent_call(1)), [TextDelta(answer), STOP], [TextDelta("cut"), STOP])
    work = tmp_path / "work"
    work.mkdir()
    workspace = Workspace.at(work, output_dir(log), dsh_home=store.home)
    read = [tool for tool in builtin_tools(workspace) if tool.spec.name == "read"]
    parent = parent_with_subagents(model, log, store, [], tools=read)
    assert run(parent.run_turn("review everything")) == TurnEnd(1, "completed")
    [cut] = records(log, ToolResult)
    assert cut.truncated and len(cut.content) < 31_000
    [path] = re.findall(r"the whole output is in (\S+)\]", cut.content)
    assert path == cut.output_file and Path(path).read_text() == answer.strip()
    # The model follows the pointer.
    reading = ToolCall("c2", "read", json.dumps({"file_path": path, "offset": 2999}))
    model.enqueue(asks(reading), [TextDelta("read it"), STOP])
    assert run(parent.run_turn("read all of it")) == TurnEnd(2, "completed")
    [_, whole] = records(log, ToolResult)
    assert not whole.is_error and "finding 2999: all fine" in whole.content, whole.content


def test_a_subagent_cannot_run_outside_a_call() -> None:
    tool = SubagentTool(lambda call: pytest.fail("no child without a call"), Path("/nowhere"))
    invocation = tool.prepare({"description": "d", "prompt": "p"})
    assert invocation.access.free
    with pytest.raises(Exception, match="only as a call of a turn"):
        run(invocation.run())
