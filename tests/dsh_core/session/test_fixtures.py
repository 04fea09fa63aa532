"""Snapshot fixtures: one recorded session per end reason, replayed byte for byte.

Each scenario below is the input of one file in ``tests/fixtures/``: the user's messages, what
the scripted model answers, and when a turn is cancelled or the process "dies". With the clock
and the session id injected, running a scenario must reproduce its file exactly.

After an intended change to the format, regenerate the files and review the diff::

    .venv/bin/python -m tests.dsh_core.session.test_fixtures --regenerate
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.loop import Conversation, LoopEvent, ToolStarting
from dsh_core.errors import LlmError
from dsh_core.model.seam import (
    Event,
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from dsh_core.session import SessionStore
from dsh_core.testing import ScriptedModel
from dsh_core.tools import Access, AccessKind, Invocation, Toolbox, ToolOutput
from tests.dsh_core.session.test_session import CWD, ticking

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
DONE = Finish("stop")

Scenario = Callable[[SessionStore], Awaitable[Path]]


async def completed(store: SessionStore) -> Path:
    """Two plain turns: reasoning, keep-alives, usage, and text that is not ASCII."""
    model = ScriptedModel()
    model.enqueue(
        [
            KeepAlive(),
            ReasoningDelta(""),
            ReasoningDelta("The user greets; "),
            ReasoningDelta("greet back."),
            TextDelta("Hello! "),
            TextDelta("How can I help?"),
            Usage(prompt_tokens=9, completion_tokens=12, cached_tokens=0, reasoning_tokens=7),
            DONE,
        ],
        [
            TextDelta("你好 🙂\n"),
            TextDelta('Quotes " and \\ and a line separator \u2028 stay as they are.'),
            Usage(prompt_tokens=40, completion_tokens=20, cached_tokens=32),
            DONE,
        ],
    )
    with store.create(CWD) as log:
        conversation = Conversation(model, log, model_name="deepseek-v4-flash")
        await conversation.run_turn("hello")
        await conversation.run_turn("say hi in Chinese,\nthen quote something")
        return log.path


async def max_tokens(store: SessionStore) -> Path:
    """An answer cut at the output token limit."""
    model = ScriptedModel()
    model.enqueue(
        [
            TextDelta("Once upon a time, there was a very long st"),
            Usage(prompt_tokens=12, completion_tokens=16),
            Finish("max-tokens"),
        ]
    )
    with store.create(CWD) as log:
        conversation = Conversation(model, log, model_name="deepseek-v4-flash", max_tokens=16)
        await conversation.run_turn("tell me a long story")
        return log.path


def _transport_error() -> LlmError:
    refused = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")
    connect = OSError("All connection attempts failed")
    connect.__cause__ = refused
    error = LlmError("DeepSeek API request to http://127.0.0.1:9 failed", "TRANSPORT")
    error.__cause__ = connect
    return error


async def error(store: SessionStore) -> Path:
    """Four failures: after a retry, after text was shown, with a cause chain, not ours."""
    model = ScriptedModel()
    model.enqueue(
        [
            RetryNotice(1, 2, 1.0, LlmError("Rate limit reached", "RATE_LIMIT", status=429)),
            LlmError("Server overloaded", "SERVER", status=503, request_id="req-503"),
        ],
        [TextDelta("The first half of an an"), LlmError("stream ended early", "STREAM_CLOSED")],
        _transport_error(),
        ValueError("a bug outside dsh's error model"),
    )
    with store.create(CWD) as log:
        conversation = Conversation(model, log, model_name="deepseek-v4-flash")
        for text in ("one", "two", "three", "four"):
            await conversation.run_turn(text)
        return log.path


async def aborted(store: SessionStore) -> Path:
    """Cancelled from inside the turn, by a signal-like callback, then a turn that completes."""
    model = ScriptedModel(delay=0.001)
    model.enqueue(
        [TextDelta("Let me think"), TextDelta(" about that"), DONE],
        [ReasoningDelta("Long "), ReasoningDelta("thoughts"), TextDelta("never shown"), DONE],
        [TextDelta("Continuing from where I stopped."), DONE],
    )
    with store.create(CWD) as log:
        conversation = Conversation(model, log, model_name="deepseek-v4-flash")

        def cancel_after_first_text(event: LoopEvent) -> None:
            if isinstance(event, TextDelta):
                conversation.cancel("user")

        await conversation.run_turn("explain monads", on_event=cancel_after_first_text)

        def shutdown_after_reasoning(event: LoopEvent) -> None:
            # Like loop.add_signal_handler: the cancel runs while the turn waits on the stream.
            asyncio.get_running_loop().call_soon(conversation.cancel, "shutdown")

        await conversation.run_turn("and functors?", on_event=shutdown_after_reasoning)
        await conversation.run_turn("go on")
        return log.path


async def rejected(store: SessionStore) -> Path:
    """Each way a turn is refused: size, a hook, the context window, an unread long line."""

    def no_keys(conversation: Conversation, text: str) -> str | None:
        return "the message looks like it holds an API key: remove it" if "sk-" in text else None

    model = ScriptedModel()
    model.enqueue([TextDelta("Fine."), DONE])
    with store.create(CWD) as log:
        conversation = Conversation(
            model,
            log,
            model_name="deepseek-v4-flash",
            input_limit=2048,
            context_window=400,
            hooks=[no_keys],
        )
        await conversation.run_turn("a short question")
        await conversation.run_turn("x" * 3000)
        await conversation.run_turn("my key is sk-0123")
        await conversation.run_turn("y" * 1500)  # within the size limit, not the window
        conversation.reject_oversized(5 * 1024 * 1024)
        return log.path


async def interrupted(store: SessionStore) -> Path:
    """The process dies mid-answer (and mid-write); the next load closes the turn."""
    model = ScriptedModel()
    model.enqueue(
        [TextDelta("Sure."), DONE],
        [TextDelta("Step one is"), TextDelta(" to"), DONE],
        [TextDelta("Picking up again."), DONE],
    )
    with store.create(CWD) as log:
        conversation = Conversation(model, log, model_name="deepseek-v4-flash")
        await conversation.run_turn("plan the work")
        on_disk: list[bytes] = []

        def die_after_first_text(event: LoopEvent) -> None:
            if isinstance(event, TextDelta) and not on_disk:
                # What a SIGKILL here would leave: the file as it is, plus a write cut short.
                on_disk.append(log.path.read_bytes() + b'{"type":"assistant/mes')
                conversation.cancel("user")

        await conversation.run_turn("now do it", on_event=die_after_first_text)
    log.path.write_bytes(on_disk[0])
    resumed, _ = store.open(log.id)
    with resumed:
        conversation = Conversation(model, resumed, model_name="deepseek-v4-flash")
        await conversation.run_turn("are you there?")
    return log.path


class FixtureTool:
    """A deterministic tool: answers ``<name>: <arguments>``, or waits forever (``hang``)."""

    def __init__(self, name: str, kind: AccessKind, *, hang: bool = False) -> None:
        self.name, self.kind, self.hang = name, kind, hang

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, f"the {self.name} tool", {"type": "object"})

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return json.dumps(dict(arguments), sort_keys=True)

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        async def run() -> ToolOutput:
            if self.hang:
                await asyncio.sleep(3600)
            return ToolOutput(f"{self.name}: {self.describe(arguments)}")

        return Invocation(Access(self.kind), self.describe(arguments), run)


def tools() -> Toolbox:
    return Toolbox(
        [
            FixtureTool("read", "read"),
            FixtureTool("bash", "shell"),
            FixtureTool("write", "write"),
            FixtureTool("hang", "shell", hang=True),
        ]
    )


def calls(*pairs: tuple[str, str]) -> list[Event | BaseException]:
    """A step that asks for ``(name, arguments)`` calls, ids numbered in order."""
    events: list[Event | BaseException] = [
        ToolCallRequest(ToolCall(f"call_{name}_{n}", name, arguments))
        for n, (name, arguments) in enumerate(pairs, start=1)
    ]
    return [*events, Usage(prompt_tokens=20, completion_tokens=8), Finish("tool-calls")]


async def tool_steps(store: SessionStore) -> Path:
    """A system prompt; a turn of three steps: calls that run, one refused, bad arguments."""
    model = ScriptedModel()
    model.enqueue(
        [
            ReasoningDelta("I should look first."),
            TextDelta("Let me look."),
            *calls(("read", '{"file_path": "a.txt"}'), ("bash", '{"command": "ls"}')),
        ],
        calls(("write", '{"file_path": "a.txt", "content": "x"}'), ("read", '{"file_path"')),
        [TextDelta("Done: a.txt holds a."), Usage(prompt_tokens=60, completion_tokens=6), DONE],
    )
    with store.create(CWD) as log:
        conversation = Conversation(
            model,
            log,
            model_name="deepseek-v4-flash",
            toolbox=tools(),
            approval=ApprovalPolicy.granting(["shell"]),
            system_prompt="You are dsh, in a fixture.",
        )
        await conversation.run_turn("what is in a.txt?")
        return log.path


async def tool_aborted(store: SessionStore) -> Path:
    """Cancelled while a call runs; the next turn's request carries every pair."""
    model = ScriptedModel()
    model.enqueue(
        calls(("hang", '{"command": "sleep 1000"}'), ("read", '{"file_path": "b.txt"}')),
        [TextDelta("Stopped, as you asked."), DONE],
    )
    with store.create(CWD) as log:
        conversation = Conversation(
            model,
            log,
            model_name="deepseek-v4-flash",
            toolbox=tools(),
            approval=ApprovalPolicy.granting(["shell"]),
        )

        def cancel_once_running(event: LoopEvent) -> None:
            if isinstance(event, ToolStarting) and event.call.name == "hang":
                # As a signal handler would: once the call is running.
                asyncio.get_running_loop().call_soon(conversation.cancel, "user")

        await conversation.run_turn("run the slow thing", on_event=cancel_once_running)
        await conversation.run_turn("never mind")
        return log.path


async def tool_interrupted(store: SessionStore) -> Path:
    """The process dies while a call runs; the load answers the calls, then a turn goes on."""
    model = ScriptedModel()
    model.enqueue(
        calls(("hang", '{"command": "make"}'), ("read", '{"file_path": "c.txt"}')),
        [TextDelta("The build's outcome is unknown; I will check first."), DONE],
    )
    on_disk: list[bytes] = []
    with store.create(CWD) as log:
        conversation = Conversation(
            model,
            log,
            model_name="deepseek-v4-flash",
            toolbox=tools(),
            approval=ApprovalPolicy.granting(["shell"]),
        )

        def die_while_running(event: LoopEvent) -> None:
            if isinstance(event, ToolStarting) and event.call.name == "hang":
                # What a SIGKILL while the tool runs leaves: the tool/call, durable, and
                # nothing after it. It is written after this event; read the file then.
                loop = asyncio.get_running_loop()
                loop.call_soon(lambda: on_disk.append(log.path.read_bytes()))
                loop.call_soon(conversation.cancel, "user")

        await conversation.run_turn("build it", on_event=die_while_running)
    log.path.write_bytes(on_disk[0])
    resumed, _ = store.open(log.id)
    with resumed:
        conversation = Conversation(model, resumed, model_name="deepseek-v4-flash", toolbox=tools())
        await conversation.run_turn("did it work?")
    return log.path


SCENARIOS: dict[str, Scenario] = {
    "completed": completed,
    "error": error,
    "aborted": aborted,
    "rejected": rejected,
    "interrupted": interrupted,
    "max-tokens": max_tokens,
    "tool-steps": tool_steps,
    "tool-aborted": tool_aborted,
    "tool-interrupted": tool_interrupted,
}
ENDS = {"tool-steps": "completed", "tool-aborted": "aborted", "tool-interrupted": "interrupted"}
"""The end each scenario is about, where its name is not one."""


def replay(name: str, home: Path) -> bytes:
    """Run scenario ``name`` in a fresh ``home`` and return the session file it wrote."""
    store = SessionStore(home, clock=ticking(), new_id=lambda: f"fixture-{name}")

    async def main() -> Path:
        return await SCENARIOS[name](store)

    return asyncio.run(main()).read_bytes()


@pytest.mark.parametrize("name", SCENARIOS)
def test_replay_reproduces_the_fixture(name: str, tmp_path: Path) -> None:
    expected = (FIXTURES / f"{name}.jsonl").read_bytes()
    assert replay(name, tmp_path) == expected


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_fixture_ends_a_turn_its_way_and_loads_clean(name: str, tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    directory = store.root / "key" / f"fixture-{name}"
    directory.mkdir(parents=True)
    shutil.copy(FIXTURES / f"{name}.jsonl", directory / "session.jsonl")
    log, report = store.open(f"fixture-{name}")
    with log:
        assert report.notices == ()
        kinds = [event.data["reason"]["kind"] for event in log.events if event.type == "turn/end"]
        assert ENDS.get(name, name) in kinds
        assert [event.seq for event in log.events] == list(range(len(log.events)))


def test_the_transport_failure_is_stored_with_its_whole_chain() -> None:
    content = (FIXTURES / "error.jsonl").read_text()
    assert (
        '"message":"DeepSeek API request to http://127.0.0.1:9 failed: All connection attempts '
        "failed: [Errno 111] Connect call failed ('127.0.0.1', 9)\"" in content
    )


def regenerate() -> None:
    """Rewrite every fixture from its scenario."""
    FIXTURES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name in SCENARIOS:
            target = FIXTURES / f"{name}.jsonl"
            target.write_bytes(replay(name, Path(scratch) / name))
            print(f"wrote {target}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: python -m tests.dsh_core.session.test_fixtures --regenerate")
    regenerate()
