"""Snapshot fixtures: one recorded session per end reason, replayed byte for byte.

Each scenario below is the input of one file in ``tests/fixtures/``: the user's messages, what
the scripted model answers, and when a turn is cancelled or the process "dies". With the clock
and the session id injected, running a scenario must reproduce its file exactly.

After an intended change to the format, regenerate the files and review the diff::

    .venv/bin/python -m tests.dsh_core.test_fixtures --regenerate
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from dsh_core.errors import LlmError
from dsh_core.llm import (
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    Usage,
)
from dsh_core.loop import Conversation, LoopEvent
from dsh_core.session import SessionStore
from dsh_core.testing import ScriptedModel
from tests.dsh_core.test_session import CWD, ticking

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
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


SCENARIOS: dict[str, Scenario] = {
    "completed": completed,
    "error": error,
    "aborted": aborted,
    "rejected": rejected,
    "interrupted": interrupted,
    "max-tokens": max_tokens,
}


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
        assert name in kinds
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
        sys.exit("usage: python -m tests.dsh_core.test_fixtures --regenerate")
    regenerate()
