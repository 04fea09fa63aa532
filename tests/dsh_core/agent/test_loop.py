"""The agent loop: every end reason, what each writes, cancellation, hooks and history."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pytest

from dsh_core.agent.history import estimate_tokens
from dsh_core.agent.loop import Conversation, LoopEvent, TurnFailed
from dsh_core.errors import FailureRecord, LlmError, SessionLogError, UsageError
from dsh_core.model.seam import (
    AssistantMessage,
    ChatRequest,
    Event,
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    Usage,
    UserMessage,
)
from dsh_core.session import SessionLog, SessionStore
from dsh_core.session import log as log_module
from dsh_core.session.events import TurnEnd, TurnStart, UserText
from dsh_core.testing import ScriptedModel
from dsh_core.testing.conformance import ModelFactory, Stuck, scripted_model, stub_adapter
from tests.dsh_core.session.test_session import count_fsyncs

T = TypeVar("T")

DONE = Finish("stop")


def deltas(count: int) -> list[Event | BaseException]:
    """A long answer of one-character deltas, for cancelling mid-stream."""
    return [*(TextDelta("x") for _ in range(count)), DONE]


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


@pytest.fixture
def conversation(model: ScriptedModel, log: SessionLog) -> Conversation:
    return Conversation(model, log, model_name="deepseek-v4-flash")


def kinds(log: SessionLog) -> list[str]:
    return [event.type for event in log.events]


def data_of(log: SessionLog, kind: str) -> list[dict[str, Any]]:
    return [event.data for event in log.events if event.type == kind]


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def __call__(self, event: LoopEvent) -> None:
        self.events.append(event)


class FirstText:
    """An observer that sets :attr:`seen` at the first text delta: tests cancel after it, not
    after a sleep that a loaded machine may outlast."""

    def __init__(self) -> None:
        self.seen = asyncio.Event()

    def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, TextDelta):
            self.seen.set()


# --- completed and max-tokens -------------------------------------------------------------------


def test_a_completed_turn(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    usage = Usage(prompt_tokens=5, completion_tokens=2, cached_tokens=1, reasoning_tokens=3)
    script: list[Event | BaseException] = [
        KeepAlive(),
        ReasoningDelta(""),
        ReasoningDelta("thinking"),
        TextDelta("Hel"),
        TextDelta("lo"),
        usage,
        DONE,
    ]
    model.enqueue(script)
    seen = Recorder()
    end = run(conversation.run_turn("hi", on_event=seen))
    assert end == TurnEnd(1, "completed")
    assert seen.events == script  # every event is passed on live, in order
    assert model.requests == [ChatRequest(model="deepseek-v4-flash", messages=(UserMessage("hi"),))]
    assert kinds(log) == ["turn/start", "user/message", "assistant/message", "usage", "turn/end"]
    assert [e.data for e in log.events] == [
        {"turn": 1, "model": "deepseek-v4-flash"},
        {"turn": 1, "text": "hi"},
        {"turn": 1, "step": 1, "text": "Hello", "reasoning": "thinking"},
        {
            "turn": 1,
            "step": 1,
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "cached_tokens": 1,
            "reasoning_tokens": 3,
        },
        {"turn": 1, "reason": {"kind": "completed"}},
    ]
    assert conversation.last_turn_end() == end
    assert not conversation.running


def test_history_carries_every_turn(conversation: Conversation, model: ScriptedModel) -> None:
    model.enqueue([TextDelta("one"), DONE], [TextDelta("two"), DONE])
    run(conversation.run_turn("first"))
    conversation.model_name = "other-model"
    conversation.max_tokens = 50
    run(conversation.run_turn("second"))
    assert model.requests[1] == ChatRequest(
        model="other-model",
        messages=(
            UserMessage("first"),
            AssistantMessage("one"),
            UserMessage("second"),
        ),
        max_tokens=50,
    )
    assert conversation.history[-1] == AssistantMessage("two")
    assert data_of(conversation.log, "turn/start")[1] == {"turn": 2, "model": "other-model"}


def test_max_tokens(conversation: Conversation, model: ScriptedModel, log: SessionLog) -> None:
    model.enqueue([TextDelta("cut sh"), Finish("max-tokens")])
    end = run(conversation.run_turn("long story"))
    assert end == TurnEnd(1, "max-tokens")
    assert data_of(log, "assistant/message") == [{"turn": 1, "step": 1, "text": "cut sh"}]
    assert data_of(log, "turn/end") == [{"turn": 1, "reason": {"kind": "max-tokens"}}]


def test_a_stream_without_finish_counts_as_completed(
    conversation: Conversation, model: ScriptedModel
) -> None:
    model.enqueue([TextDelta("ok")])
    assert run(conversation.run_turn("q")).kind == "completed"


def test_two_fsyncs_per_turn(
    conversation: Conversation, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_fsyncs(monkeypatch)
    model.enqueue([TextDelta("a"), Usage(1, 1), DONE])
    run(conversation.run_turn("q"))
    assert len(calls) == 2  # after user/message (covers turn/start) and after turn/end


# --- errors -------------------------------------------------------------------------------------


def transport_error(port: int = 9) -> LlmError:
    refused = ConnectionRefusedError(111, f"Connect call failed ('127.0.0.1', {port})")
    outer = OSError("All connection attempts failed")
    outer.__cause__ = refused
    error = LlmError(f"DeepSeek API request to http://127.0.0.1:{port} failed", "TRANSPORT")
    error.__cause__ = outer
    return error


def test_an_llm_error_keeps_its_details_and_the_whole_chain(
    conversation: Conversation,
    model: ScriptedModel,
    log: SessionLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = LlmError("overloaded", "SERVER", status=503, retry_after=2.5, request_id="req-1")
    error.__cause__ = RuntimeError("upstream said no")
    model.enqueue(error)
    seen = Recorder()
    end = run(conversation.run_turn("q", on_event=seen))
    failure = FailureRecord("SERVER", "overloaded: upstream said no", 503, 2.5, "req-1")
    assert end == TurnEnd(1, "error", failure)
    assert seen.events == [TurnFailed(error)]
    assert seen.events[0].error is error  # type: ignore[union-attr]
    assert data_of(log, "turn/end") == [
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "code": "SERVER",
                "message": "overloaded: upstream said no",
                "status": 503,
                "retry_after": 2.5,
                "request_id": "req-1",
            },
        }
    ]
    assert "assistant/message" not in kinds(log)  # nothing was shown
    assert "failed [SERVER]: overloaded: upstream said no" in caplog.text
    assert caplog.records[-1].levelno == logging.WARNING


def test_the_transport_message_is_stored_whole(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.enqueue(transport_error())
    end = run(conversation.run_turn("q"))
    assert end.failure is not None
    assert end.failure.message == (
        "DeepSeek API request to http://127.0.0.1:9 failed: All connection attempts failed: "
        "[Errno 111] Connect call failed ('127.0.0.1', 9)"
    )
    assert data_of(log, "turn/end")[0]["reason"]["message"] == end.failure.message


def test_any_other_exception_is_unknown(conversation: Conversation, model: ScriptedModel) -> None:
    model.enqueue([TextDelta("partial"), KeyError("missing")])
    end = run(conversation.run_turn("q"))
    assert end == TurnEnd(1, "error", FailureRecord("UNKNOWN", "'missing'"))


def test_text_shown_before_a_failure_is_kept_and_sent_next_time(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.enqueue(
        [ReasoningDelta("hmm"), TextDelta("half an "), LlmError("cut", "STREAM_CLOSED")],
        [TextDelta("whole"), DONE],
    )
    run(conversation.run_turn("first"))
    assert data_of(log, "assistant/message") == [
        {"turn": 1, "step": 1, "text": "half an ", "reasoning": "hmm", "interrupted": True}
    ]
    run(conversation.run_turn("go on"))
    assert model.requests[1].messages == (
        UserMessage("first"),
        AssistantMessage("half an "),
        UserMessage("go on"),
    )


def test_reasoning_alone_is_kept_but_not_sent(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.enqueue([ReasoningDelta("only thoughts"), LlmError("cut", "STREAM_CLOSED")])
    run(conversation.run_turn("q"))
    assert data_of(log, "assistant/message") == [
        {"turn": 1, "step": 1, "text": "", "reasoning": "only thoughts", "interrupted": True}
    ]
    # Reasoning is never sent back, and no answer text was shown: the turn is not part of
    # the conversation the next request carries.
    assert conversation.history == []


def test_an_observer_that_raises_fails_the_turn(
    conversation: Conversation, model: ScriptedModel
) -> None:
    model.enqueue([TextDelta("a"), DONE])

    def broken_pipe(event: LoopEvent) -> None:
        if isinstance(event, TextDelta):
            raise BrokenPipeError(32, "Broken pipe")

    end = run(conversation.run_turn("q", on_event=broken_pipe))
    assert end.kind == "error"
    assert end.failure == FailureRecord("UNKNOWN", "[Errno 32] Broken pipe")


def test_retries_are_logged_and_recorded(
    conversation: Conversation,
    model: ScriptedModel,
    log: SessionLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dsh_core.agent.loop")
    notice = RetryNotice(1, 3, 0.5, LlmError("busy", "RATE_LIMIT", status=429))
    model.enqueue([notice, TextDelta("ok"), DONE])
    assert run(conversation.run_turn("q")).kind == "completed"
    assert data_of(log, "retry") == [
        {
            "turn": 1,
            "step": 1,
            "attempt": 1,
            "max_retries": 3,
            "delay": 0.5,
            "code": "RATE_LIMIT",
            "message": "busy",
            "status": 429,
        }
    ]
    assert "retry 1 of 3 in 0.5 s after: busy" in caplog.text


def test_the_stream_is_closed_when_the_turn_stops_early(
    conversation: Conversation, log: SessionLog
) -> None:
    closed: list[bool] = []

    class Model(ScriptedModel):
        async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
            try:
                yield TextDelta("a")
                yield TextDelta("b")
            finally:
                closed.append(True)

    conversation.model = Model()

    def stop(event: LoopEvent) -> None:
        if isinstance(event, TextDelta):
            raise RuntimeError("observer gave up")

    run(conversation.run_turn("q", on_event=stop))
    assert closed == [True]


# --- aborted ------------------------------------------------------------------------------------


def test_cancel_from_another_task_aborts_and_returns(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.delay = 0.01
    model.enqueue([TextDelta("one "), TextDelta("two "), TextDelta("three"), DONE])

    async def main() -> tuple[TurnEnd, int]:
        first_delta = asyncio.Event()
        turn = asyncio.create_task(
            conversation.run_turn("q", on_event=lambda event: first_delta.set())
        )
        await first_delta.wait()  # one delta arrived, the second is on its way
        conversation.cancel("user")
        conversation.cancel("shutdown")  # the first reason wins
        end = await turn
        await asyncio.sleep(0)  # no cancellation leaks into the caller
        return end, turn.cancelling()

    end, cancelling = run(main())
    assert end == TurnEnd(1, "aborted", reason="user")
    assert cancelling == 0
    assert data_of(log, "assistant/message") == [
        {"turn": 1, "step": 1, "text": "one ", "interrupted": True}
    ]
    assert data_of(log, "turn/end") == [
        {"turn": 1, "reason": {"kind": "aborted", "reason": "user"}}
    ]
    assert not conversation.running


def test_cancel_from_a_signal_handler(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.delay = 0.01
    model.enqueue(deltas(100))

    async def main() -> TurnEnd:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, conversation.cancel, "user")
        first = FirstText()

        async def interrupt() -> None:
            await first.seen.wait()
            os.kill(os.getpid(), signal.SIGINT)

        interrupter = asyncio.create_task(interrupt())
        try:
            return await conversation.run_turn("q", on_event=first)
        finally:
            await interrupter
            loop.remove_signal_handler(signal.SIGINT)

    assert run(main()) == TurnEnd(1, "aborted", reason="user")


def test_cancel_from_inside_the_turn(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.enqueue([TextDelta("a"), TextDelta("b"), DONE])

    def observer(event: LoopEvent) -> None:
        conversation.cancel("shutdown")

    async def main() -> tuple[TurnEnd, int]:
        end = await conversation.run_turn("q", on_event=observer)
        await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        return end, task.cancelling()

    assert run(main()) == (TurnEnd(1, "aborted", reason="shutdown"), 0)
    assert data_of(log, "assistant/message") == [
        {"turn": 1, "step": 1, "text": "a", "interrupted": True}
    ]


@pytest.fixture(params=["scripted", "adapter"])
def any_model(request: pytest.FixtureRequest) -> ModelFactory:
    """Each ChatModel that passes the conformance kit: the loop must not tell them apart."""
    factories: dict[str, ModelFactory] = {"scripted": scripted_model, "adapter": stub_adapter}
    return factories[request.param]


def test_cancel_mid_answer_aborts_the_turn_whatever_the_model(
    any_model: ModelFactory, log: SessionLog
) -> None:
    # "half" is one delta whatever the model (the stub streams four characters per delta):
    # when the first text arrives, all of it has.
    async def main() -> tuple[TurnEnd, int]:
        async with any_model([Stuck("half")]) as model:
            conversation = Conversation(model, log, model_name="m")
            first = FirstText()
            turn = asyncio.create_task(conversation.run_turn("q", on_event=first))
            await first.seen.wait()  # the model now waits for more: the cancel reaches it there
            conversation.cancel("user")
            end = await turn
            await asyncio.sleep(0)  # no cancellation leaks into the caller
            return end, turn.cancelling()

    assert run(main()) == (TurnEnd(1, "aborted", reason="user"), 0)
    assert data_of(log, "assistant/message") == [
        {"turn": 1, "step": 1, "text": "half", "interrupted": True}
    ]
    assert data_of(log, "turn/end")[0]["reason"] == {"kind": "aborted", "reason": "user"}


def test_an_outside_cancellation_propagates_whatever_the_model(
    any_model: ModelFactory, log: SessionLog
) -> None:
    async def main() -> None:
        async with any_model([Stuck("half")]) as model:
            conversation = Conversation(model, log, model_name="m")
            first = FirstText()
            turn = asyncio.create_task(conversation.run_turn("q", on_event=first))
            await first.seen.wait()
            turn.cancel()  # asyncio.run shutting down, say: not Conversation.cancel
            with pytest.raises(asyncio.CancelledError):
                await turn

    run(main())
    assert data_of(log, "turn/end")[0]["reason"] == {"kind": "aborted", "reason": "cancelled"}
    assert data_of(log, "assistant/message")[0]["interrupted"] is True


def test_an_outside_cancellation_is_recorded_and_propagates(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.delay = 0.01
    model.enqueue(deltas(100))

    async def main() -> None:
        first = FirstText()
        turn = asyncio.create_task(conversation.run_turn("q", on_event=first))
        await first.seen.wait()
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn

    run(main())
    assert data_of(log, "turn/end")[0]["reason"] == {"kind": "aborted", "reason": "cancelled"}
    assert data_of(log, "assistant/message")[0]["interrupted"] is True


def test_cancel_together_with_an_outside_cancellation_still_propagates(
    conversation: Conversation, model: ScriptedModel, log: SessionLog
) -> None:
    model.delay = 0.01
    model.enqueue(deltas(100))

    async def main() -> None:
        first = FirstText()
        turn = asyncio.create_task(conversation.run_turn("q", on_event=first))
        await first.seen.wait()
        conversation.cancel("shutdown")
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn

    run(main())
    assert data_of(log, "turn/end")[0]["reason"] == {"kind": "aborted", "reason": "shutdown"}


def test_cancel_when_idle_is_a_no_op(conversation: Conversation, model: ScriptedModel) -> None:
    conversation.cancel("user")
    model.enqueue([TextDelta("a"), DONE])
    assert run(conversation.run_turn("q")).kind == "completed"


def test_a_late_cancel_after_the_answer_finished_leaks_nothing(
    conversation: Conversation, log: SessionLog
) -> None:
    draining = asyncio.Event()

    class Model(ScriptedModel):
        async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
            yield TextDelta("whole")
            yield DONE
            # E.g. the adapter reading the response to its end; the cancel comes in here
            # (the 30 s only bound a hang: without the cancel the turn would end completed).
            draining.set()
            await asyncio.sleep(30)

    conversation.model = Model()

    async def cancel_while_draining() -> None:
        await draining.wait()
        conversation.cancel("user")

    async def main() -> tuple[TurnEnd, int]:
        canceller = asyncio.create_task(cancel_while_draining())
        end = await conversation.run_turn("q")
        await canceller
        await asyncio.sleep(0)  # no cancellation leaks into the caller
        task = asyncio.current_task()
        assert task is not None
        return end, task.cancelling()

    end, cancelling = run(main())
    # The cancel landed while the adapter was still draining: the turn is aborted, but the
    # answer it had is kept, and the caller's task is not left cancelled.
    assert end == TurnEnd(1, "aborted", reason="user")
    assert cancelling == 0
    assert data_of(log, "assistant/message")[0] == {
        "turn": 1,
        "step": 1,
        "text": "whole",
        "interrupted": True,
    }


# --- rejected -----------------------------------------------------------------------------------


def test_a_message_over_the_input_limit_is_rejected_and_not_stored(
    model: ScriptedModel, log: SessionLog
) -> None:
    conversation = Conversation(model, log, model_name="m", input_limit=1024)
    text = "é" * 600  # 1,200 bytes in UTF-8
    end = run(conversation.run_turn(text))
    assert end == TurnEnd(
        1,
        "rejected",
        reason="the message is 1.2 KiB, over the limit of 1 KiB per message: "
        "shorten it, or send it in parts",
    )
    assert kinds(log) == ["turn/start", "turn/end"]
    assert model.requests == []


def test_the_default_limit_is_256_kib(conversation: Conversation, log: SessionLog) -> None:
    end = run(conversation.run_turn("x" * (256 * 1024 + 1)))
    assert end.reason is not None
    assert "over the limit of 256 KiB per message: shorten it" in end.reason
    assert "the message is 256.1 KiB" in end.reason


def test_reject_oversized(conversation: Conversation, log: SessionLog) -> None:
    end = conversation.reject_oversized(10 * 1024 * 1024)
    assert end.kind == "rejected"
    assert end.reason is not None and end.reason.startswith("the message is 10 MiB")
    assert data_of(log, "turn/end") == [
        {"turn": 1, "reason": {"kind": "rejected", "reason": end.reason}}
    ]


def test_a_conversation_that_outgrew_the_window_is_rejected(
    model: ScriptedModel, log: SessionLog
) -> None:
    conversation = Conversation(
        model, log, model_name="m", context_window=100, max_tokens=20, auto_compact=False
    )
    model.enqueue([TextDelta("a" * 100), DONE])
    assert run(conversation.run_turn("b" * 100)).kind == "completed"  # 30 + 4 + 20 tokens
    end = run(conversation.run_turn("c" * 30))  # 34 + 34 + 13 + 20
    assert end == TurnEnd(
        2,
        "rejected",
        reason="the conversation no longer fits the model's context window (about 101 tokens, "
        "the window is 100): compact it (/compact), start a fresh session (/new, or dsh without "
        "--continue), or shorten the message",
    )


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a" * 10) == 3
    assert estimate_tokens("你好") == 2
    assert estimate_tokens("\ud83d") == 1


def test_custom_hooks_see_the_conversation_and_the_text(
    model: ScriptedModel, log: SessionLog
) -> None:
    seen: list[tuple[Conversation, str]] = []

    def no_secrets(conversation: Conversation, text: str) -> str | None:
        seen.append((conversation, text))
        return "the message looks like it contains a key: remove it" if "sk-" in text else None

    conversation = Conversation(model, log, model_name="m", hooks=[no_secrets])
    end = run(conversation.run_turn("my key is sk-123"))
    assert end == TurnEnd(
        1, "rejected", reason="the message looks like it contains a key: remove it"
    )
    assert seen == [(conversation, "my key is sk-123")]


def test_a_hook_that_raises_fails_its_turn(model: ScriptedModel, log: SessionLog) -> None:
    def broken(conversation: Conversation, text: str) -> str | None:
        raise ValueError("hook bug")

    seen = Recorder()
    conversation = Conversation(model, log, model_name="m", hooks=[broken])
    end = run(conversation.run_turn("q", on_event=seen))
    assert end == TurnEnd(1, "error", FailureRecord("UNKNOWN", "hook bug"))
    assert [type(e) for e in seen.events] == [TurnFailed]


# --- the log, resuming, misuse ------------------------------------------------------------------


def test_resume_continues_numbering_and_history(
    store: SessionStore, model: ScriptedModel, log: SessionLog
) -> None:
    model.enqueue([TextDelta("one"), DONE])
    run(Conversation(model, log, model_name="m").run_turn("first"))
    log.append(TurnStart(2, "m"))
    log.append(UserText(2, "lost"), durable=True)
    log.close()  # as if the process died here
    resumed, report = store.open(log.id)
    with resumed:
        conversation = Conversation(model, resumed, model_name="m")
        assert report.interrupted_turn == 2
        assert conversation.last_turn_end() == TurnEnd(2, "interrupted")
        model.enqueue([TextDelta("three"), DONE])
        assert run(conversation.run_turn("again")).turn == 3
        assert model.requests[-1].messages == (
            UserMessage("first"),
            AssistantMessage("one"),
            # The interrupted turn had no answer: its question is not sent again.
            UserMessage("again"),
        )


def test_turn_end_json_round_trip_and_unknown_kinds() -> None:
    ends = [
        TurnEnd(1, "completed"),
        TurnEnd(2, "error", FailureRecord("AUTH", "bad key", status=401)),
        TurnEnd(3, "aborted", reason="user"),
        TurnEnd(4, "rejected", reason="shorten it"),
        TurnEnd(5, "interrupted"),
        TurnEnd(6, "max-tokens"),
        TurnEnd(7, "max-steps"),
    ]
    for end in ends:
        assert TurnEnd.from_data(end.to_data()) == end
    merged = TurnEnd.from_data({"turn": 8, "reason": {"kind": "merged", "x": 1}})
    assert merged == TurnEnd(8, "other", other_kind="merged")
    assert merged.to_data() == {"turn": 8, "reason": {"kind": "merged"}}
    with pytest.raises(ValueError, match="without a reason"):
        TurnEnd.from_data({})


def test_a_log_that_cannot_be_written_fails_run_turn(
    conversation: Conversation, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(SessionLogError, match="cannot write session log"):
        run(conversation.run_turn("q"))
    assert not conversation.running


def test_one_turn_at_a_time(conversation: Conversation, model: ScriptedModel) -> None:
    model.delay = 0.01
    model.enqueue([TextDelta("a"), DONE])

    async def main() -> None:
        first = asyncio.create_task(conversation.run_turn("q"))
        await asyncio.sleep(0)
        assert conversation.running
        with pytest.raises(UsageError):
            await conversation.run_turn("again")
        with pytest.raises(UsageError):
            conversation.reject_oversized(1)
        await first

    run(main())


def test_a_turn_left_open_by_a_failed_write_is_ended_before_the_next(
    conversation: Conversation,
    model: ScriptedModel,
    log: SessionLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_write = log_module.write_all
    writes = {"count": 0}

    def disk_full_once(fd: int, data: bytes) -> None:
        writes["count"] += 1
        if writes["count"] == 2:  # turn 1's user/message
            raise OSError(28, "No space left on device")
        real_write(fd, data)

    monkeypatch.setattr(log_module, "write_all", disk_full_once)
    model.enqueue([TextDelta("two"), DONE])
    with pytest.raises(SessionLogError):
        run(conversation.run_turn("first"))
    end = run(conversation.run_turn("second"))
    assert end == TurnEnd(2, "completed")
    ends = data_of(log, "turn/end")
    assert ends[0] == {
        "turn": 1,
        "reason": {
            "kind": "error",
            "code": "SESSION_LOG",
            "message": f"cannot write session log {log.path}: [Errno 28] No space left on device",
        },
    }
    assert kinds(log) == [
        "turn/start",
        "turn/end",
        "turn/start",
        "user/message",
        "assistant/message",
        "turn/end",
    ]


def test_turns_without_an_answer_are_left_out_of_the_history(
    conversation: Conversation, model: ScriptedModel
) -> None:
    model.enqueue(
        [TextDelta("one"), DONE],
        LlmError("refused", "AUTH"),  # failed before any answer
        [TextDelta("partial"), LlmError("cut", "TRANSPORT")],  # cut after some text
        [TextDelta("four"), DONE],
    )
    for text in ("first", "second", "third", "fourth"):
        run(conversation.run_turn(text))
    assert model.requests[-1].messages == (
        UserMessage("first"),
        AssistantMessage("one"),
        UserMessage("third"),
        AssistantMessage("partial"),
        UserMessage("fourth"),
    )
