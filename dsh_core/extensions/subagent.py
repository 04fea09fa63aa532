"""The ``subagent`` tool (SPEC 13): a child agent, in-process, that reads and reports back.

    tool = SubagentTool(open_child, output_dir)  # open_child(call) -> the child's Conversation
    toolbox = Toolbox([..., tool])

A call runs one turn of a fresh conversation: the system prompt and the call's ``prompt``, the
same model, read-only tools (``read``, ``glob``, ``grep``, ``skill``) and no subagents of its
own; what it may do without a question is what a pipe may (nobody can be asked from inside a
call). Its steps go to a session log of its own, linked to the parent's call (``parent:
{session, call_id}`` in its header; ``--sessions`` lists it under the parent). The result is
the child's final text, capped as a command's output is (a long answer is saved whole in the
parent's ``output_dir``, where the model reads it as it reads a command's); a child whose turn
did not end with an answer gives ``Error: <chain>``. Cancelling the parent's turn cancels the
child (its task is the call's). The child's tool calls are reported as they run
(:func:`~dsh_core.agent.calls.running_call`), so the front door shows them under the parent's call.

A subagent only reads: it needs no approval, and several run side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent.calls import ToolFinished, ToolStarting, running_call
from ..agent.compaction import WindowAdvice
from ..errors import SUBAGENT_FAILED, FailureRecord, HarnessError
from ..model.seam import ToolCall, ToolSpec
from ..session.events import AssistantStep, TurnEnd
from ..tools.base import Access, Invocation, ToolError, ToolOutput
from ..tools.specs import OUTPUT_LIMIT

if TYPE_CHECKING:
    from ..agent.loop import Conversation, LoopEvent

__all__ = ["CHILD_TOOLS", "SUBAGENT", "SUBAGENT_WINDOW_ADVICE", "SubagentTool"]

CHILD_TOOLS = ("read", "glob", "grep", "skill")
"""What a subagent may use: tools that only read."""

SUBAGENT_WINDOW_ADVICE = WindowAdvice(
    None, "ask each subagent for less (split the task among several calls), or shorten the prompt"
)
"""A child's, for the model that called it: the child has no commands, and is fresh each call."""

SUBAGENT = ToolSpec(
    "subagent",
    "Run a subagent: a fresh agent with the same model and read-only tools (read, glob, grep, "
    "skill) that works on `prompt` alone and answers with one final text, which is this "
    "tool's result. It does not see this conversation: say in `prompt` everything it needs. "
    "Use it for a self-contained search or review that would fill this conversation with "
    "intermediate reads. Several subagent calls in one answer run at the same time. "
    "`description` is a few words shown to the person.",
    {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "3-8 words: what it is for."},
            "prompt": {"type": "string", "description": "The whole task, for the subagent."},
        },
        "required": ["description", "prompt"],
        "additionalProperties": False,
    },
)

OpenChild = Callable[[ToolCall], "Conversation"]
"""Makes the child's conversation for a call: its own session log, linked to the call."""


class SubagentTool:
    """``subagent {description, prompt}``."""

    spec = SUBAGENT

    def __init__(self, open_child: OpenChild, output_dir: Path) -> None:
        self._open_child = open_child
        self._output_dir = output_dir

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("description", ""))

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        from ..tools.paths import check_arguments, string_argument  # at the first call

        check_arguments("subagent", arguments, ("description", "prompt"))
        description = string_argument(arguments, "description")
        prompt = string_argument(arguments, "prompt")
        assert description is not None and prompt is not None

        async def run() -> ToolOutput:
            current = running_call()
            if current is None:
                raise ToolError("a subagent runs only as a call of a turn")
            return await self._run(current.call, prompt, current.report)

        return Invocation(Access("read"), description, run, quoted=(("task", prompt),))

    async def _run(
        self,
        call: ToolCall,
        prompt: str,
        report: Callable[[ToolStarting | ToolFinished], None],
    ) -> ToolOutput:
        child = self._open_child(call)

        def forward(event: LoopEvent) -> None:
            if isinstance(event, ToolStarting | ToolFinished):
                report(event)

        try:
            end = await child.run_turn(prompt, on_event=forward)
        finally:
            child.log.close()
        return _result(child, end, self._output_dir)


def _result(child: Conversation, end: TurnEnd, output_dir: Path) -> ToolOutput:
    """The child's last text, or why there is none."""
    texts = [
        event.record.text
        for event in child.log.events
        if isinstance(event.record, AssistantStep) and event.record.turn == end.turn
    ]
    text = texts[-1].strip() if texts else ""
    session = f"subagent session {child.log.id}"
    if end.kind == "error" and end.failure is not None:
        failure = FailureRecord(end.failure.code, f"{session} failed: {end.failure.message}")
        return ToolOutput(failure.as_tool_result, failure)
    if end.kind not in ("completed", "max-tokens") or not text:
        why = {
            "max-steps": "stopped at the step limit",
            "rejected": f"was rejected: {end.reason}",
            "aborted": f"was cancelled ({end.reason})",
        }.get(end.kind, f"ended {end.name}")
        if end.kind in ("completed", "max-tokens"):
            why = "ended without any text"
        return ToolOutput.failed(HarnessError(f"{session} {why}", SUBAGENT_FAILED))
    if end.kind == "max-tokens":
        text += "\n[the subagent's answer stopped at the output token limit]"
    # Capped as a command's output: the whole answer in a file the parent's model may read
    # (the child's session log is in DSH_HOME, which it may not).
    from ..tools.process import capped_result  # with the rest of the tools' machinery

    return capped_result(text, output_dir, limit=OUTPUT_LIMIT, prefix="subagent-")
