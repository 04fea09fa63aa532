"""Every end reason from a real run: the loop, the DeepSeek adapter and a loopback stub server.

Each test reads the session file back through ``SessionStore.open`` and checks what it holds.
``interrupted`` needs a process that dies: a child runs the turn and is SIGKILLed mid-answer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.agent.loop import Conversation, LoopEvent
from dsh_core.model.deepseek import DeepSeekAdapter, RetryPolicy
from dsh_core.model.seam import TextDelta
from dsh_core.session import SessionLog, SessionStore
from dsh_core.session.events import TurnEnd
from dsh_core.session.lines import LONG_STRING, encode_line
from dsh_core.testing import (
    Answer,
    HttpError,
    LongStream,
    ManualClock,
    SlowStream,
    StubServer,
    closed_port,
)
from tests.conftest import CANARY_KEY

REPO = Path(__file__).resolve().parents[3]
CWD = Path("/home/ann/src/project")
ONE_RETRY = RetryPolicy(max_retries=1, jitter=False)
"""Waited out on a ManualClock that jumps: the retry costs no time."""


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "home")


def run_turns(
    store: SessionStore,
    base_url: str,
    *texts: str,
    cancel_after_text: str | None = None,
    **options: Any,
) -> tuple[list[TurnEnd], SessionLog]:
    """Run ``texts`` as turns of a new session; return the ends and the log as reloaded."""

    async def main() -> tuple[list[TurnEnd], str]:
        adapter = DeepSeekAdapter(
            base_url=base_url,
            api_key=CANARY_KEY,
            retry=ONE_RETRY,
            clock=ManualClock(autojump=True),
        )
        with store.create(CWD) as log:
            conversation = Conversation(adapter, log, model_name="deepseek-v4-flash", **options)

            def observer(event: LoopEvent) -> None:
                if cancel_after_text is not None and isinstance(event, TextDelta):
                    # As the front door's SIGINT handler does: on the loop, between events.
                    asyncio.get_running_loop().call_soon(conversation.cancel, cancel_after_text)

            try:
                ends = [await conversation.run_turn(text, on_event=observer) for text in texts]
            finally:
                await adapter.close()
            return ends, log.id

    ends, session_id = asyncio.run(main())
    log, report = store.open(session_id)
    assert report.notices == ()
    return ends, log


def turn_ends(log: SessionLog) -> list[dict[str, Any]]:
    return [event.data["reason"] for event in log.events if event.type == "turn/end"]


def test_completed(server: StubServer, store: SessionStore) -> None:
    server.enqueue(Answer("Hello there.", reasoning="Greet back."), Answer("Second."))
    ends, log = run_turns(store, server.url, "hello", "again")
    with log:
        assert [end.kind for end in ends] == ["completed", "completed"]
        messages = [e.data for e in log.events if e.type == "assistant/message"]
        assert messages[0]["text"] == "Hello there."
        assert messages[0]["reasoning"] == "Greet back."
        assert "usage" in [e.type for e in log.events]
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hello there."},
        {"role": "user", "content": "again"},
    ]


def test_max_tokens(server: StubServer, store: SessionStore) -> None:
    server.enqueue(Answer("Once upon a ti", finish_reason="length"))
    ends, log = run_turns(store, server.url, "story", max_tokens=5)
    with log:
        assert ends[0].kind == "max-tokens"
        assert turn_ends(log) == [{"kind": "max-tokens"}]
    assert server.requests[0]["max_tokens"] == 5


def test_error_transport_message_is_stored_exactly(store: SessionStore) -> None:
    port = closed_port()
    ends, log = run_turns(store, f"http://127.0.0.1:{port}", "anyone there?")
    expected = (
        f"DeepSeek API request to http://127.0.0.1:{port} failed: All connection attempts "
        f"failed: [Errno 111] Connect call failed ('127.0.0.1', {port})"
    )
    with log:
        assert turn_ends(log) == [{"kind": "error", "code": "TRANSPORT", "message": expected}]
        retry = next(e.data for e in log.events if e.type == "retry")
        assert retry["message"] == expected
    assert ends[0].failure is not None and ends[0].failure.message == expected


def test_error_from_http_status(server: StubServer, store: SessionStore) -> None:
    server.enqueue(HttpError(401, "Authentication Fails, Your api key is invalid"))
    _, log = run_turns(store, server.url, "hi")
    with log:
        (reason,) = turn_ends(log)
        assert reason["kind"] == "error"
        assert reason["code"] == "AUTH"
        assert reason["status"] == 401
        assert "Authentication Fails" in reason["message"]


def test_aborted_keeps_the_shown_text_and_sends_it_next(
    server: StubServer, store: SessionStore
) -> None:
    server.enqueue(SlowStream("one two three four five six", delay=0.05), Answer("Carrying on."))
    ends, log = run_turns(store, server.url, "count", cancel_after_text="user")
    with log:
        assert ends[0] == TurnEnd(1, "aborted", reason="user")
        assert turn_ends(log) == [{"kind": "aborted", "reason": "user"}]
        (shown,) = [e.data for e in log.events if e.type == "assistant/message"]
        assert shown["interrupted"] is True and shown["text"].startswith("one")
        log.close()
        resumed, _ = store.open(log.id)
        with resumed:
            conversation = Conversation(
                DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY),
                resumed,
                model_name="deepseek-v4-flash",
            )

            async def go_on() -> TurnEnd:
                try:
                    return await conversation.run_turn("go on")
                finally:
                    await conversation.model.close()

            assert asyncio.run(go_on()).kind == "completed"
    assert server.requests[-1]["messages"][1] == {"role": "assistant", "content": shown["text"]}


def test_rejected_never_reaches_the_server(server: StubServer, store: SessionStore) -> None:
    ends, log = run_turns(store, server.url, "x" * 5000, input_limit=4096)
    with log:
        assert ends[0].kind == "rejected"
        assert [e.type for e in log.events] == ["turn/start", "turn/end"]
    assert server.requests == []


def child_main(home: str, base_url: str) -> None:
    """One turn against ``base_url``; prints ``streaming`` once the answer starts."""
    store = SessionStore(Path(home))

    async def main() -> None:
        adapter = DeepSeekAdapter(base_url=base_url, api_key=CANARY_KEY)
        with store.create(CWD) as log:
            print(log.id, flush=True)

            def observer(event: LoopEvent) -> None:
                if isinstance(event, TextDelta):
                    print("streaming", flush=True)

            await Conversation(adapter, log, model_name="deepseek-v4-flash").run_turn(
                "a long answer, please", on_event=observer
            )

    asyncio.run(main())


def test_interrupted_after_the_process_is_killed(server: StubServer, store: SessionStore) -> None:
    server.enqueue(SlowStream("word " * 200, delay=0.05))
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.dsh_core.agent.test_loop_stub", str(store.home), server.url],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        session_id = child.stdout.readline().strip()
        if child.stdout.readline() != "streaming\n":
            child.wait()
            logs = [path.read_text() for path in store.home.rglob("session.jsonl")]
            pytest.fail(f"the child ended before the answer streamed ({child.returncode}): {logs}")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    log, report = store.open(session_id)
    with log:
        assert report.interrupted_turn == 1
        assert [e.type for e in log.events] == ["turn/start", "user/message", "turn/end"]
        assert turn_ends(log) == [{"kind": "interrupted"}]
        conversation = Conversation(
            DeepSeekAdapter(base_url=server.url, api_key=None), log, model_name="deepseek-v4-flash"
        )
        assert conversation.last_turn_end() == TurnEnd(1, "interrupted")


def test_the_key_is_never_written(server: StubServer, store: SessionStore) -> None:
    server.enqueue(Answer("fine"), HttpError(401, "bad key"))
    run_turns(store, server.url, "one", "two")[1].close()
    assert server.headers[0]["authorization"] == f"Bearer {CANARY_KEY}"
    written = [p for p in store.home.rglob("*") if p.is_file()]
    assert written
    for path in written:
        assert CANARY_KEY.encode() not in path.read_bytes()


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2])


def test_a_long_answer_is_recorded_and_sent_back_whole(
    server: StubServer, store: SessionStore
) -> None:
    """Over a million characters: the log writes its line in slices (encode_line_parts), and
    the line is the one encode_line writes; the next request carries the text back exactly."""
    server.enqueue(LongStream(12_000, words_per_delta=20), Answer("Short."))
    ends, log = run_turns(store, server.url, "go on at length", "and now?")
    with log:
        assert [end.kind for end in ends] == ["completed", "completed"]
        (answer, _) = [e for e in log.events if e.type == "assistant/message"]
        text = answer.data["text"]
        assert len(text) > LONG_STRING
        words = ["the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. "]
        assert text == "".join(words[n % len(words)] for n in range(12_000 * 20))
        written = log.path.read_bytes().splitlines(keepends=True)
        assert encode_line(answer.to_json()) in written
    assert server.requests[1]["messages"][1] == {"role": "assistant", "content": text}
