"""DeepSeekAdapter over real loopback sockets: the stub server and small fault servers.

Each failure and each behaviour has a test that checks the code, the message as ``error_chain``
renders it, the retries and the order of events. No test asserts a duration or waits for one:
the adapter's timers and backoff run on a :class:`ManualClock` that the test moves (backoffs
jump it by themselves), and other waits are bounded polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_core import __version__, error_chain
from dsh_core.errors import LlmError, UsageError
from dsh_core.model.deepseek import DeepSeekAdapter, RetryPolicy, parse_retry_after
from dsh_core.model.seam import (
    AssistantMessage,
    ChatRequest,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from dsh_core.testing import (
    Answer,
    Behaviour,
    Cut,
    Disconnect,
    Empty,
    EndWithoutDone,
    Held,
    HttpError,
    InBandError,
    KeepAlives,
    LongStream,
    Malformed,
    ManualClock,
    RawStream,
    Stall,
    StubServer,
    WrongContentType,
    closed_port,
)
from tests.conftest import CANARY_KEY
from tests.reliability.faults import FaultServer, Handler, answer_407, read_request

STEADY = RetryPolicy(jitter=False)
"""The real schedule (0.5 s, 1 s, 2 s, 4 s; Retry-After up to 30 s) without its randomness;
on a test's clock, waited out in no time."""
NO_RETRY = RetryPolicy(max_retries=0)
PEER_CLOSED = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(autouse=True)
def key_never_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every test here also checks that no log record, of any library, holds a secret."""
    caplog.set_level(logging.DEBUG)
    yield
    for record in caplog.records:
        for secret in (CANARY_KEY, "hunter2"):
            assert secret not in record.getMessage()
            assert secret not in repr(record.args)


@dataclass
class Outcome:
    """What one ``stream()`` produced: its events, then the failure that ended it, if any."""

    events: list[Event]
    error: LlmError | None
    slept: list[float] = field(default_factory=list)
    """The backoffs the adapter waited, on the test's clock."""

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def reasoning(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ReasoningDelta))

    @property
    def retries(self) -> list[RetryNotice]:
        return [e for e in self.events if isinstance(e, RetryNotice)]

    @property
    def kinds(self) -> list[str]:
        """Event class names with consecutive repeats collapsed: the shape of the stream."""
        names: list[str] = []
        for event in self.events:
            if not names or names[-1] != type(event).__name__:
                names.append(type(event).__name__)
        return names

    @property
    def rendered(self) -> str:
        assert self.error is not None, f"the stream did not fail: {self.events}"
        return error_chain(self.error)


def request(text: str = "hello", **options: Any) -> ChatRequest:
    return ChatRequest(model="deepseek-v4-flash", messages=(UserMessage(text),), **options)


async def collect(adapter: DeepSeekAdapter, chat: ChatRequest | None = None) -> Outcome:
    events: list[Event] = []
    try:
        async for event in adapter.stream(chat or request()):
            events.append(event)
    except LlmError as exc:
        assert_no_key(exc)
        return Outcome(events, exc)
    return Outcome(events, None)


def stream(
    base_url: str,
    chat: ChatRequest | None = None,
    *,
    retry: RetryPolicy = STEADY,
    api_key: str | None = CANARY_KEY,
    **options: Any,
) -> Outcome:
    """One request with a fresh adapter on a fresh :class:`ManualClock` whose sleeps jump."""

    async def main() -> Outcome:
        clock = ManualClock(autojump=True)
        adapter = DeepSeekAdapter(
            base_url=base_url, api_key=api_key, retry=retry, clock=clock, **options
        )
        try:
            outcome = await collect(adapter, chat)
            outcome.slept = clock.slept
            return outcome
        finally:
            assert CANARY_KEY not in repr(adapter)
            await adapter.close()

    return asyncio.run(main())


def assert_no_key(exc: BaseException) -> None:
    assert CANARY_KEY not in error_chain(exc)
    link: BaseException | None = exc
    while link is not None:
        assert CANARY_KEY not in repr(link)
        link = link.__cause__ or link.__context__


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition``: the server side learns of a close asynchronously. The bound (about
    30 s) only stops a hang; it measures nothing."""
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")


def chunk_event(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


# -- the answer ---------------------------------------------------------------------------------


def test_default_answer(server: StubServer) -> None:
    outcome = stream(server.url, request("hello"))
    assert outcome.error is None
    assert outcome.text == "You said: hello"
    assert outcome.kinds == ["TextDelta", "Usage", "Finish"]
    # prompt_tokens is the stub's count of the body it received.
    prompt = server.served[-1].prompt.tokens
    assert outcome.events[-2] == Usage(prompt_tokens=prompt, completion_tokens=4)
    assert outcome.events[-1] == Finish("stop")


def test_request_shape_and_headers(server: StubServer) -> None:
    chat = ChatRequest(
        model="deepseek-v4-pro",
        messages=(SystemMessage("Be brief."), UserMessage("hi")),
        max_tokens=64,
        temperature=0.5,
        stop=("END",),
        thinking=True,
        reasoning_effort="high",
    )
    assert stream(server.url + "/", chat).error is None  # the trailing slash is ignored
    assert server.requests == [
        {
            "model": "deepseek-v4-pro",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 64,
            "temperature": 0.5,
            "stop": ["END"],
            "thinking": {"type": "enabled"},
            "reasoning_effort": "high",
        }
    ]
    headers = server.headers[0]
    assert headers["authorization"] == f"Bearer {CANARY_KEY}"
    assert headers["accept"] == "text/event-stream"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == f"dsh/{__version__}"


def test_optional_fields_are_left_out(server: StubServer) -> None:
    stream(server.url, request(thinking=False))
    assert set(server.requests[0]) == {"model", "messages", "stream", "stream_options", "thinking"}
    assert server.requests[0]["thinking"] == {"type": "disabled"}


def test_reasoning_comes_before_the_answer(server: StubServer) -> None:
    server.enqueue(Answer("The answer.", reasoning="Let me think."))
    outcome = stream(server.url)
    assert outcome.kinds == ["ReasoningDelta", "TextDelta", "Usage", "Finish"]
    assert outcome.reasoning == "Let me think."
    assert outcome.text == "The answer."
    usage = outcome.events[-2]
    assert isinstance(usage, Usage) and usage.reasoning_tokens == 4


def test_usage_fields(server: StubServer) -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "prompt_cache_hit_tokens": 60,
        "prompt_cache_miss_tokens": 40,
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    server.enqueue(
        RawStream(
            (
                chunk_event({"content": "ok"}, "stop"),
                b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n",
                b"data: [DONE]\n\n",
            )
        )
    )
    outcome = stream(server.url)
    assert Usage(100, 20, cached_tokens=60, reasoning_tokens=5) in outcome.events


def test_finish_reason_length_is_max_tokens(server: StubServer) -> None:
    server.enqueue(Answer("Once upon a ti", finish_reason="length"))
    outcome = stream(server.url)
    assert outcome.error is None
    assert outcome.events[-1] == Finish("max-tokens")


@pytest.mark.parametrize("reason", ["tool_calls", "some_future_reason"])
def test_other_finish_reasons_are_a_normal_stop(server: StubServer, reason: str) -> None:
    server.enqueue(Answer("ok", finish_reason=reason))
    assert stream(server.url).events[-1] == Finish("stop")


def test_finish_reason_content_filter(server: StubServer) -> None:
    server.enqueue(Answer("Some text", finish_reason="content_filter"))
    outcome = stream(server.url)
    assert outcome.text == "Some text"
    assert outcome.error is not None and outcome.error.code == "CONTENT_FILTER"
    assert outcome.rendered == "DeepSeek API stopped the answer: finish_reason content_filter"
    assert outcome.error.request_id == "stub-1"


def test_finish_reason_insufficient_system_resource(server: StubServer) -> None:
    server.enqueue(Answer("Half an", finish_reason="insufficient_system_resource"))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "SERVER"
    assert outcome.rendered == (
        "DeepSeek API stopped the answer: finish_reason insufficient_system_resource"
    )
    assert len(server.requests) == 1  # text was shown: no retry


def test_deltas_of_one_read_are_merged(server: StubServer) -> None:
    server.enqueue(LongStream(5000))
    outcome = stream(server.url)
    words = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. ")
    assert outcome.text == "".join(words[i % len(words)] for i in range(5000))
    assert len(outcome.events) < 100


def test_unicode_and_line_separators_survive_split_chunks(server: StubServer) -> None:
    body = chunk_event({"content": "a\u2028b\x1cc 🙂 \r\n"}).replace(b"\n\n", b"\r\n\r\n")
    cut = body.index("🙂".encode()) + 2  # inside the emoji
    crlf = body.index(b"\r\n\r\n") + 1  # between CR and LF
    server.enqueue(
        RawStream((body[:cut], body[cut:crlf], body[crlf:], b"data: [DONE]\r\n\r\n"), delay=0.01)
    )
    outcome = stream(server.url)
    assert outcome.error is None
    assert outcome.text == "a\u2028b\x1cc 🙂 \r\n"


def test_escape_sequences_are_passed_through_untouched(server: StubServer) -> None:
    server.enqueue(Answer("\x1b[2J\x1b]0;pwned\x07\u202eevil"))
    assert stream(server.url).text == "\x1b[2J\x1b]0;pwned\x07\u202eevil"  # the front door's job


# -- keep-alives and timeouts --------------------------------------------------------------------


def test_keep_alives_are_reported_then_the_answer(server: StubServer) -> None:
    server.enqueue(KeepAlives(3, 0.0, Answer("ready")))
    outcome = stream(server.url)
    assert outcome.kinds == ["KeepAlive", "TextDelta", "Usage", "Finish"]
    assert outcome.text == "ready"


def test_keep_alives_reset_the_idle_timer(server: StubServer) -> None:
    # Ten keep-alives 1.5 s apart on the test's clock, 15 s in all, against a 2 s idle timeout:
    # only a timer that every keep-alive pushes back lets the answer through. The server sends
    # each keep-alive once the clock has moved while the adapter waited for it.
    gates = [threading.Event() for _ in range(10)]
    behaviour: Behaviour = Answer("still here")
    for gate in reversed(gates):
        behaviour = KeepAlives(1, 0.0, Held(gate, behaviour))
    server.enqueue(behaviour)
    clock = ManualClock()

    async def main() -> Outcome:
        adapter = DeepSeekAdapter(
            base_url=server.url, api_key=CANARY_KEY, idle_timeout=2, retry=NO_RETRY, clock=clock
        )
        events: list[Event] = []
        try:
            async for event in adapter.stream(request()):
                events.append(event)
                if isinstance(event, KeepAlive):
                    clock.advance_soon(1.5)  # once the adapter waits for the next one
                    asyncio.get_running_loop().call_soon(gates[len(events) - 1].set)
        finally:
            await adapter.close()
        return Outcome(events, None)

    outcome = asyncio.run(main())
    assert outcome.text == "still here"
    assert sum(isinstance(e, KeepAlive) for e in outcome.events) == 10
    assert clock.now == 15


def test_keep_alives_do_not_count_as_shown_text(server: StubServer) -> None:
    server.enqueue(KeepAlives(2, 0.0, Cut("")), Answer("second try"))
    outcome = stream(server.url)
    assert outcome.kinds == ["KeepAlive", "RetryNotice", "TextDelta", "Usage", "Finish"]
    assert outcome.text == "second try"


def stream_advancing(
    base_url: str, seconds: float, when: Callable[[list[Event]], bool], **options: Any
) -> tuple[Outcome, ManualClock]:
    """Stream as :func:`stream` does, moving the clock ``seconds`` once the events so far
    satisfy ``when``, as soon as the adapter waits on the network again (backoffs still jump
    by themselves)."""
    clock = ManualClock(autojump=True)

    async def main() -> Outcome:
        adapter = DeepSeekAdapter(base_url=base_url, api_key=CANARY_KEY, clock=clock, **options)
        events: list[Event] = []
        moved = False
        try:
            async for event in adapter.stream(request()):
                events.append(event)
                if not moved and when(events):
                    clock.advance_soon(seconds)
                    moved = True
        except LlmError as exc:
            return Outcome(events, exc)
        finally:
            await adapter.close()
        return Outcome(events, None)

    return asyncio.run(main()), clock


def test_idle_timeout_before_any_text_is_retried(server: StubServer) -> None:
    # A keep-alive shows the stream is open (and is not text); then the server stalls, and
    # the clock moves past the idle timeout while the adapter waits.
    server.enqueue(KeepAlives(1, 0.0, Stall(3600)), Answer("after the stall"))

    def opened(events: list[Event]) -> bool:
        return any(isinstance(event, KeepAlive) for event in events)

    outcome, clock = stream_advancing(server.url, 120, opened, retry=STEADY)
    (retry,) = outcome.retries
    assert retry.error.__class__ is LlmError
    assert error_chain(retry.error) == (
        f"DeepSeek API stream from {server.url} timed out: nothing received for 120 s"
    )
    assert outcome.text == "after the stall"
    assert clock.slept == [0.5]


def test_idle_timeout_after_text_fails_the_turn(server: StubServer) -> None:
    server.enqueue(Stall(3600, after_text="Partial"), Answer("never asked for"))
    # The text may come in several reads: the clock moves once all of it has arrived.
    outcome, _ = stream_advancing(
        server.url, 120, lambda events: Outcome(events, None).text == "Partial"
    )
    assert outcome.text == "Partial"
    assert outcome.error is not None and outcome.error.code == "TIMEOUT"
    assert outcome.rendered == (
        f"DeepSeek API stream from {server.url} timed out: nothing received for 120 s"
    )
    assert outcome.retries == []
    assert len(server.requests) == 1


def test_the_idle_timer_counts_only_silence(server: StubServer) -> None:
    # 119 s of the test's clock pass while the adapter waits, then the rest of the answer
    # arrives: a silence under the timeout is no failure.
    gate = threading.Event()
    server.enqueue(KeepAlives(1, 0.0, Held(gate, Answer("in time"))))
    clock = ManualClock()

    async def main() -> str:
        adapter = DeepSeekAdapter(
            base_url=server.url, api_key=CANARY_KEY, retry=NO_RETRY, clock=clock
        )
        text = ""
        try:
            async for event in adapter.stream(request()):
                if isinstance(event, KeepAlive):
                    clock.advance_soon(119)
                    asyncio.get_running_loop().call_soon(gate.set)
                elif isinstance(event, TextDelta):
                    text += event.text
        finally:
            await adapter.close()
        return text

    assert asyncio.run(main()) == "in time"


def silent_after_reading(received: threading.Event) -> Handler:
    """A server that reads the request, says so, and never answers."""

    def handler(conn: socket.socket, server: FaultServer) -> None:
        read_request(conn)
        received.set()
        server.stopping.wait()

    return handler


def wait_for_a_response(seconds: float, **options: Any) -> tuple[Outcome, str]:
    """Request from a server that never answers; move the clock ``seconds`` once it has read
    the request (the adapter then waits for the response, under its timer)."""
    received = threading.Event()
    clock = ManualClock()

    async def main(url: str) -> Outcome:
        adapter = DeepSeekAdapter(
            base_url=url, api_key=CANARY_KEY, retry=NO_RETRY, clock=clock, **options
        )
        try:
            task = asyncio.create_task(collect(adapter))
            await asyncio.to_thread(received.wait)
            clock.advance(seconds)
            return await task
        finally:
            await adapter.close()

    with FaultServer(silent_after_reading(received)) as silent:
        return asyncio.run(main(silent.url)), silent.url


def test_read_timeout_waiting_for_the_response() -> None:
    outcome, url = wait_for_a_response(60)
    assert outcome.error is not None and outcome.error.code == "TIMEOUT"
    assert outcome.rendered == (
        f"DeepSeek API request to {url} timed out waiting for a response after 60 s"
    )


def test_silence_before_the_response_is_the_idle_timeout() -> None:
    outcome, url = wait_for_a_response(30, idle_timeout=30)
    assert outcome.error is not None and outcome.error.code == "TIMEOUT"
    assert outcome.rendered == (
        f"DeepSeek API request to {url} timed out: nothing received for 30 s"
    )


def test_no_timeout_before_its_time() -> None:
    received = threading.Event()
    clock = ManualClock()

    async def main(url: str) -> tuple[bool, Outcome]:
        adapter = DeepSeekAdapter(base_url=url, api_key=CANARY_KEY, retry=NO_RETRY, clock=clock)
        task = asyncio.create_task(collect(adapter))
        await asyncio.to_thread(received.wait)
        clock.advance(59.9)  # the response may come up to 60 s after the request
        for _ in range(50):  # turns of the loop, far more than a timeout takes to land
            await asyncio.sleep(0)
        waiting = not task.done()
        clock.advance(0.1)
        outcome = await task
        await adapter.close()
        return waiting, outcome

    with FaultServer(silent_after_reading(received)) as silent:
        waiting, outcome = asyncio.run(main(silent.url))
    assert waiting
    assert outcome.error is not None and outcome.error.code == "TIMEOUT"


def test_connect_timeout() -> None:
    # A listener whose accept queue is full drops new SYNs: connecting hangs, on loopback.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        try:
            outcome = stream(f"http://127.0.0.1:{port}", retry=NO_RETRY, connect_timeout=0.2)
        finally:
            for filler in fillers:
                filler.close()
    assert outcome.error is not None and outcome.error.code == "TIMEOUT"
    assert outcome.rendered == (
        f"DeepSeek API request to http://127.0.0.1:{port} timed out connecting after 0.2 s"
    )


# -- transport failures --------------------------------------------------------------------------


def test_refused_connection_renders_exactly() -> None:
    port = closed_port()
    retry = RetryPolicy(max_retries=2, base_delay=0.001, jitter=False)
    outcome = stream(f"http://127.0.0.1:{port}/", retry=retry)
    expected = (
        f"DeepSeek API request to http://127.0.0.1:{port} failed: All connection attempts "
        f"failed: [Errno 111] Connect call failed ('127.0.0.1', {port})"
    )
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.rendered == expected
    assert outcome.error.message == f"DeepSeek API request to http://127.0.0.1:{port} failed"
    assert isinstance(outcome.error.__cause__, httpx.ConnectError)
    assert [(r.attempt, r.max_retries) for r in outcome.retries] == [(1, 2), (2, 2)]
    assert [error_chain(r.error) for r in outcome.retries] == [expected, expected]


def test_user_info_in_the_base_url_is_redacted() -> None:
    port = closed_port()
    outcome = stream(f"http://user:hunter2@127.0.0.1:{port}", retry=NO_RETRY)
    assert outcome.rendered.startswith(f"DeepSeek API request to http://***@127.0.0.1:{port} ")
    assert "hunter2" not in outcome.rendered
    adapter = DeepSeekAdapter(base_url=f"http://user:hunter2@127.0.0.1:{port}/", api_key=None)
    assert adapter.base_url == f"http://***@127.0.0.1:{port}"
    assert "hunter2" not in repr(adapter)


def test_user_info_is_not_sent_and_the_key_stays_the_credential(server: StubServer) -> None:
    outcome = stream(server.url.replace("http://", "http://user:hunter2@"))
    assert outcome.error is None
    assert server.headers[0]["authorization"] == f"Bearer {CANARY_KEY}"
    # key_never_logged checks that the password is not in httpx's request log line either


def test_disconnect_before_the_response_is_retried(server: StubServer) -> None:
    server.enqueue(Disconnect(), Answer("second try"))
    outcome = stream(server.url)
    (retry,) = outcome.retries
    assert retry.error.__class__ is LlmError
    assert error_chain(retry.error) == (
        f"DeepSeek API request to {server.url} failed: "
        "Server disconnected without sending a response."
    )
    assert outcome.text == "second try"


def test_cut_before_any_text_is_retried(server: StubServer) -> None:
    server.enqueue(Cut(""), Answer("second try"))
    outcome = stream(server.url)
    assert outcome.kinds == ["RetryNotice", "TextDelta", "Usage", "Finish"]
    assert error_chain(outcome.retries[0].error) == (
        f"DeepSeek API stream from {server.url} failed: {PEER_CLOSED}"
    )


def test_cut_after_text_fails_without_retry(server: StubServer) -> None:
    server.enqueue(Cut("Half an ans"), Answer("never asked for"))
    outcome = stream(server.url)
    assert outcome.text == "Half an ans"
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.rendered == f"DeepSeek API stream from {server.url} failed: {PEER_CLOSED}"
    assert outcome.error.request_id == "stub-1"
    assert isinstance(outcome.error.__cause__, httpx.RemoteProtocolError)
    assert outcome.retries == [] and len(server.requests) == 1


def test_unknown_host_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "no-such-host.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    outcome = stream("http://no-such-host.invalid")
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.rendered == (
        "DeepSeek API request to http://no-such-host.invalid failed: "
        "[Errno -2] Name or service not known"
    )
    assert outcome.retries == []


def test_temporary_name_resolution_failure_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    outcome = stream("http://flaky-dns.invalid", retry=RetryPolicy(max_retries=1, base_delay=0.001))
    assert len(outcome.retries) == 1
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = [
        "openssl", "req", "-x509", "-nodes", "-days", "1",
        "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", str(key), "-out", str(cert),
        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
    ]  # fmt: skip
    subprocess.run(
        command,
        check=True,
        capture_output=True,
    )
    return cert, key


def test_certificate_that_fails_verification_is_not_retried(self_signed: tuple[Path, Path]) -> None:
    cert, key = self_signed
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    handshakes: list[int] = []

    async def main() -> tuple[str, Outcome]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        def count(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            handshakes.append(1)  # the failed handshake is logged by asyncio: count it

        asyncio.get_running_loop().set_exception_handler(count)
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            adapter = DeepSeekAdapter(
                base_url=url, api_key=CANARY_KEY, retry=STEADY, clock=ManualClock(autojump=True)
            )
            try:
                return url, await collect(adapter)
            finally:
                await adapter.close()

    url, outcome = asyncio.run(main())
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.rendered.startswith(
        f"DeepSeek API request to {url} failed: [SSL: CERTIFICATE_VERIFY_FAILED]"
    )
    assert outcome.retries == []


@pytest.mark.parametrize(
    ("base_url", "shown"),
    [
        ("ftp://127.0.0.1:21", "ftp://127.0.0.1:21"),
        ("api.deepseek.com", "api.deepseek.com"),
        ("http://user:pw@[::1", "<unparsable URL>"),
    ],
)
def test_unusable_base_url_is_not_retried(base_url: str, shown: str) -> None:
    outcome = stream(base_url)
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.rendered.startswith(f"DeepSeek API request to {shown} failed: ")
    assert outcome.retries == []


# -- the stream itself ---------------------------------------------------------------------------


def test_stream_without_done_after_text(server: StubServer) -> None:
    server.enqueue(EndWithoutDone("partial"), Answer("never asked for"))
    outcome = stream(server.url)
    assert outcome.text == "partial"
    assert outcome.error is not None and outcome.error.code == "STREAM_CLOSED"
    assert outcome.rendered == f"DeepSeek API stream from {server.url} ended before [DONE]"
    assert outcome.retries == []


def test_stream_without_done_before_text_is_retried(server: StubServer) -> None:
    server.enqueue(EndWithoutDone(""), Answer("second try"))
    outcome = stream(server.url)
    assert [r.error.code for r in outcome.retries if isinstance(r.error, LlmError)] == [
        "STREAM_CLOSED"
    ]
    assert outcome.text == "second try"


def test_malformed_json(server: StubServer) -> None:
    server.enqueue(Malformed('{"choices": [{"delta": {"content": "oops"'))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "MALFORMED_RESPONSE"
    assert outcome.rendered == (
        "DeepSeek API stream event is not valid JSON: "
        '\'{"choices": [{"delta": {"content": "oops"\': '
        "Expecting ',' delimiter: line 1 column 42 (char 41)"
    )
    assert outcome.retries == [] and len(server.requests) == 1


def test_malformed_json_is_quoted_to_120_characters(server: StubServer) -> None:
    server.enqueue(Malformed("{" + "x" * 300))
    outcome = stream(server.url)
    assert outcome.error is not None
    assert outcome.error.message == (
        "DeepSeek API stream event is not valid JSON: '{" + "x" * 119 + "'..."
    )


@pytest.mark.parametrize("payload", ["null", "[1, 2]", "42", '"text"', "true"])
def test_payload_that_is_not_an_object(server: StubServer, payload: str) -> None:
    server.enqueue(Malformed(payload))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "MALFORMED_RESPONSE"
    assert outcome.rendered == f"DeepSeek API stream event is not a JSON object: {payload!r}"


@pytest.mark.parametrize(
    ("payload", "what"),
    [
        ('{"choices": "nope"}', "has malformed choices"),
        ('{"choices": [{"delta": ["x"]}]}', "has a malformed delta"),
        ('{"choices": [{"delta": {"content": 5}}]}', "has a non-text delta"),
    ],
)
def test_malformed_chunk_shapes(server: StubServer, payload: str, what: str) -> None:
    server.enqueue(Malformed(payload))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "MALFORMED_RESPONSE"
    assert outcome.rendered == f"DeepSeek API stream event {what}: {payload!r}"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("Content Exists Risk", "CONTENT_FILTER"),
        ("Insufficient Balance", "QUOTA"),
        ("You exceeded your current quota", "QUOTA"),
        ("This model's maximum context length is 65536 tokens", "CONTEXT_WINDOW_EXCEEDED"),
        ("Internal inference error", "SERVER"),
    ],
)
def test_in_band_error(server: StubServer, message: str, code: str) -> None:
    server.enqueue(InBandError(message, after_text="Some text"))
    outcome = stream(server.url)
    assert outcome.text == "Some text"
    assert outcome.error is not None and outcome.error.code == code
    assert outcome.rendered == f"DeepSeek API reported an error in the stream: {message}"
    assert outcome.error.request_id == "stub-1"


def test_in_band_server_error_before_text_is_retried(server: StubServer) -> None:
    server.enqueue(InBandError("Internal inference error"), Answer("second try"))
    outcome = stream(server.url)
    assert len(outcome.retries) == 1 and outcome.text == "second try"


def test_in_band_error_classified_by_its_code_field(server: StubServer) -> None:
    server.enqueue(InBandError("blocked", code="content_filter"))
    assert stream(server.url).rendered == "DeepSeek API reported an error in the stream: blocked"
    server.enqueue(InBandError("blocked", code="content_filter"))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "CONTENT_FILTER"


def test_text_in_the_same_read_as_an_error_is_delivered_first(server: StubServer) -> None:
    error = b'data: {"error": {"message": "Content Exists Risk"}}\n\n'
    server.enqueue(RawStream((chunk_event({"content": "shown "}) + error,)))
    outcome = stream(server.url)
    assert outcome.kinds == ["TextDelta"]
    assert outcome.error is not None and outcome.error.code == "CONTENT_FILTER"


def test_empty_answer_is_retried_then_fails(server: StubServer) -> None:
    server.enqueue(*[Empty()] * 5)
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "EMPTY_RESPONSE"
    assert outcome.rendered == "DeepSeek API sent an empty answer"
    assert [r.attempt for r in outcome.retries] == [1, 2, 3, 4]
    assert len(server.requests) == 5


def test_wrong_content_type(server: StubServer) -> None:
    server.enqueue(WrongContentType())
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "MALFORMED_RESPONSE"
    assert outcome.rendered == (
        "DeepSeek API answered with content type 'text/html; charset=utf-8', not an event stream"
    )
    assert outcome.error.status == 200


def test_json_error_object_instead_of_a_stream(server: StubServer) -> None:
    body = json.dumps({"error": {"message": "Insufficient Balance"}})
    server.enqueue(WrongContentType(body, "application/json"))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "QUOTA"


# -- HTTP statuses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (401, "Authentication Fails, Your api key is invalid", "AUTH"),
        (403, "Forbidden region", "AUTH"),
        (402, "Insufficient Balance", "QUOTA"),
        (429, "You exceeded your current quota", "QUOTA"),
        (500, "Account balance is negative", "QUOTA"),
        (429, "Rate limit reached", "RATE_LIMIT"),
        (400, "This model's maximum context length is 65536 tokens", "CONTEXT_WINDOW_EXCEEDED"),
        (400, "Invalid max_tokens", "INVALID_REQUEST"),
        (413, "Request too large", "INVALID_REQUEST"),
        (422, "Invalid parameters", "INVALID_REQUEST"),
        (413, "context length exceeded", "INVALID_REQUEST"),
        (500, "Internal error", "SERVER"),
        (503, "Server overloaded", "SERVER"),
        # Money words only as whole words: these are not about balance or quota.
        (503, "no healthy upstream behind the load balancer", "SERVER"),
        (400, "Invalid quotation mark in messages[0]", "INVALID_REQUEST"),
        (429, "insufficient_quota", "QUOTA"),
        (404, "Not found", "HTTP_404"),
        (418, "I'm a teapot", "HTTP_418"),
    ],
)
def test_http_status(server: StubServer, status: int, message: str, code: str) -> None:
    server.enqueue(HttpError(status, message))
    outcome = stream(server.url, retry=NO_RETRY)
    error = outcome.error
    assert error is not None and error.code == code
    assert error.status == status and error.request_id == "stub-1"
    phrase = {
        401: "Unauthorized",
        403: "Forbidden",
        402: "Payment Required",
        429: "Too Many Requests",
        400: "Bad Request",
        413: "Request Entity Too Large",
        422: "Unprocessable Entity",
        500: "Internal Server Error",
        503: "Service Unavailable",
        404: "Not Found",
        418: "I'm a Teapot",
    }[status]
    assert outcome.rendered == f"DeepSeek API returned HTTP {status} {phrase}: {message}"


def test_http_error_without_a_usable_body(server: StubServer) -> None:
    server.enqueue(HttpError(502, raw_body="<html><h1>502 Bad Gateway</h1></html>"))
    outcome = stream(server.url, retry=NO_RETRY)
    assert outcome.error is not None and outcome.error.code == "SERVER"
    assert outcome.rendered == "DeepSeek API returned HTTP 502 Bad Gateway"


def test_http_error_body_without_message(server: StubServer) -> None:
    server.enqueue(HttpError(500))
    assert stream(server.url, retry=NO_RETRY).rendered == (
        "DeepSeek API returned HTTP 500 Internal Server Error"
    )


@pytest.mark.parametrize(("status", "message"), [(401, "bad key"), (400, "bad request")])
def test_permanent_statuses_are_not_retried(server: StubServer, status: int, message: str) -> None:
    server.enqueue(HttpError(status, message), Answer("never asked for"))
    outcome = stream(server.url)
    assert outcome.retries == [] and len(server.requests) == 1


def test_retries_are_bounded_and_back_off(server: StubServer) -> None:
    server.enqueue(*[HttpError(503, "Server overloaded")] * 6)
    outcome = stream(server.url)
    assert [(r.attempt, r.max_retries) for r in outcome.retries] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert [r.delay for r in outcome.retries] == [0.5, 1.0, 2.0, 4.0]
    assert outcome.slept == [0.5, 1.0, 2.0, 4.0]  # each announced wait is the one waited
    assert outcome.error is not None and outcome.error.code == "SERVER"
    assert outcome.kinds == ["RetryNotice"]
    assert len(server.requests) == 5


def test_retry_after_seconds_is_honoured(server: StubServer) -> None:
    server.enqueue(HttpError(429, "slow down", retry_after="7.5"), Answer("ok"))
    outcome = stream(server.url)
    (retry,) = outcome.retries
    assert isinstance(retry.error, LlmError) and retry.error.retry_after == 7.5
    assert retry.delay == 7.5  # more than the backoff's 0.5 s: the server's wait wins
    assert outcome.slept == [7.5]
    assert outcome.text == "ok"


def test_retry_after_is_capped(server: StubServer) -> None:
    server.enqueue(HttpError(429, "slow down", retry_after=3600), Answer("ok"))
    (retry,) = stream(server.url).retries
    assert isinstance(retry.error, LlmError) and retry.error.retry_after == 3600
    assert retry.delay == STEADY.retry_after_cap == 30


def test_retry_after_as_an_http_date(server: StubServer) -> None:
    # A minute ahead: HTTP dates have one-second resolution, and a slow machine may take a
    # second or two before the header is parsed.
    when = email.utils.formatdate(time.time() + 60, usegmt=True)
    server.enqueue(HttpError(503, "maintenance", retry_after=when), Answer("ok"))
    (retry,) = stream(server.url).retries
    assert isinstance(retry.error, LlmError) and retry.error.retry_after is not None
    assert 30 < retry.error.retry_after <= 60
    assert retry.delay == STEADY.retry_after_cap


def test_jitter_stays_under_the_ceiling() -> None:
    policy = RetryPolicy()
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (9, 8.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    assert policy.delay(1, retry_after=3) >= 3
    assert policy.delay(1, retry_after=99) >= 30 and policy.delay(1, retry_after=99) <= 30.5


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("5", 5.0),
        (" 7 ", 7.0),
        ("0.5", 0.5),
        ("0", 0.0),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
        ("Wed, 21 Oct 2015 07:28:10", None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    now = email.utils.parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT").timestamp()
    assert parse_retry_after(value, now=now) == seconds


# -- the key -------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "", "   "])
def test_missing_key_fails_before_any_io(key: str | None) -> None:
    # Any I/O to this host would fail as TRANSPORT (the name does not exist).
    outcome = stream("https://api.deepseek.invalid", api_key=key)
    assert outcome.error is not None and outcome.error.code == "MISSING_CREDENTIAL"
    assert outcome.rendered == "No DeepSeek API key: set DEEPSEEK_API_KEY to your API key"


def test_a_local_server_is_asked_without_a_key() -> None:
    """A loopback or private base URL and no key: the request goes without Authorization."""
    with StubServer(key_required=False) as keyless:
        outcome = stream(keyless.url, api_key=None)
        assert outcome.error is None and outcome.text
        assert "authorization" not in keyless.headers[0]


def test_a_local_server_that_wants_a_key_says_so(server: StubServer) -> None:
    outcome = stream(server.url, api_key=None)
    assert outcome.error is not None and outcome.error.code == "AUTH"
    assert "no API key given" in outcome.rendered


@pytest.mark.parametrize("key", [f"{CANARY_KEY}\nX-Evil: 1", f"{CANARY_KEY} x", "sk-ключ"])
def test_unusable_key_is_refused_without_echoing_it(server: StubServer, key: str) -> None:
    outcome = stream(server.url, api_key=key)
    assert outcome.error is not None and outcome.error.code == "MISSING_CREDENTIAL"
    assert "DEEPSEEK_API_KEY" in outcome.rendered
    assert key not in outcome.rendered and "ключ" not in outcome.rendered
    assert server.connections_opened == 0


def test_surrounding_whitespace_is_trimmed(server: StubServer) -> None:
    assert stream(server.url, api_key=f"  {CANARY_KEY}\n").error is None
    assert server.headers[0]["authorization"] == f"Bearer {CANARY_KEY}"


def test_key_appears_nowhere(server: StubServer) -> None:
    server.enqueue(HttpError(401, "Authentication Fails"), Cut("x"), HttpError(503, "busy"))
    outcomes = [stream(server.url) for _ in range(2)]
    outcomes.append(stream(f"http://127.0.0.1:{closed_port()}", retry=NO_RETRY))
    adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY, retry=STEADY)
    assert repr(adapter) == f"DeepSeekAdapter(base_url={server.url!r}, api_key=<set>)"
    for outcome in outcomes:
        assert outcome.error is not None
        for event in outcome.events:
            assert CANARY_KEY not in repr(event)
            if isinstance(event, RetryNotice):
                assert CANARY_KEY not in error_chain(event.error)
    # key_never_logged checks every log record, httpx's and httpcore's debug lines included


# -- cancellation and connections ----------------------------------------------------------------


def test_cancel_mid_stream_lets_cancelled_error_through_and_closes_the_connection(
    server: StubServer,
) -> None:
    # Stalled after its first text: the answer cannot reach [DONE] before the cancel lands.
    server.enqueue(Stall(60, after_text="Partial"))

    async def main() -> bool:
        adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY)
        first_text = asyncio.Event()

        async def consume() -> None:
            async for event in adapter.stream(request()):
                if isinstance(event, TextDelta):
                    first_text.set()

        task = asyncio.create_task(consume())
        await first_text.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_for(lambda: server.connections_closed == 1, "the server to see the close")
        await adapter.close()
        return task.cancelled()

    # Cancellation is the loop's to name (dsh_core.agent.cancel): the adapter neither hides it nor
    # turns it into an error.
    assert asyncio.run(main())


def test_cancel_during_backoff_ends_at_once(server: StubServer) -> None:
    server.enqueue(HttpError(503, "busy"), Answer("never asked for"))

    async def main() -> list[Event]:
        slow = RetryPolicy(base_delay=60, max_delay=60, jitter=False)
        adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY, retry=slow)
        events: list[Event] = []
        retrying = asyncio.Event()

        async def consume() -> None:
            async for event in adapter.stream(request()):
                events.append(event)
                if isinstance(event, RetryNotice):
                    retrying.set()

        task = asyncio.create_task(consume())
        await retrying.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await adapter.close()
        return events

    events = asyncio.run(main())
    assert [type(e) for e in events] == [RetryNotice]
    assert len(server.requests) == 1


def test_cancel_while_waiting_for_the_response() -> None:
    got_request = threading.Event()
    closed: list[str] = []

    def silent(conn: socket.socket, server: FaultServer) -> None:
        """Reads the request, never answers, and notes when the client closes."""
        read_request(conn)
        got_request.set()
        while conn.recv(65536):  # until the client closes
            pass
        closed.append("closed")

    async def main() -> list[str]:
        with FaultServer(silent) as server:
            adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY)
            task = asyncio.create_task(collect(adapter))
            await asyncio.to_thread(got_request.wait)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await wait_for(lambda: closed == ["closed"], "the server to see the close")
            await adapter.close()
            return closed

    assert asyncio.run(main()) == ["closed"]


def test_abandoning_the_stream_closes_the_connection(server: StubServer) -> None:
    # Stalled after its first text: the stream cannot end by itself before it is abandoned.
    server.enqueue(Stall(60, after_text="Partial"))

    async def main() -> str:
        adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY)
        events = adapter.stream(request())
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        await wait_for(lambda: server.connections_closed == 1, "the server to see the close")
        text = (await collect(adapter)).text  # the adapter is still usable
        await adapter.close()
        return text

    assert asyncio.run(main()) == "You said: hello"
    assert server.connections_opened == 2


def test_connection_is_reused_across_requests(server: StubServer) -> None:
    trailer = b": after done, read to the end\n\n"
    server.enqueue(
        Answer("one"),
        HttpError(429, "slow down"),  # an error body is read too
        RawStream((chunk_event({"content": "three"}), b"data: [DONE]\n\n", trailer)),
        Answer("four"),
    )

    async def main() -> list[str]:
        adapter = DeepSeekAdapter(
            base_url=server.url, api_key=CANARY_KEY, clock=ManualClock(autojump=True)
        )
        try:
            return [(await collect(adapter)).text for _ in range(3)]
        finally:
            await adapter.close()

    assert asyncio.run(main()) == ["one", "three", "four"]
    assert len(server.requests) == 4
    assert server.connections_opened == 1


def test_a_shared_client_is_used_and_left_open(server: StubServer) -> None:
    async def main() -> bool:
        async with httpx.AsyncClient() as client:
            adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY, client=client)
            assert (await collect(adapter)).text == "You said: hello"
            await adapter.close()
            return client.is_closed

    assert asyncio.run(main()) is False


def test_stream_after_close_is_a_usage_error(server: StubServer) -> None:
    async def main() -> None:
        adapter = DeepSeekAdapter(base_url=server.url, api_key=CANARY_KEY)
        await adapter.close()
        with pytest.raises(UsageError):
            await collect(adapter)

    asyncio.run(main())


def test_plain_http_needs_no_certificate_store(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = DeepSeekAdapter(base_url="http://127.0.0.1:1", api_key=None)
    verify = plain._verify()
    assert isinstance(verify, ssl.SSLContext)
    assert verify.verify_mode == ssl.CERT_REQUIRED and verify.check_hostname
    assert DeepSeekAdapter(base_url="https://api.deepseek.com", api_key=None)._verify() is True
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    assert plain._verify() is True


def test_empty_events_are_heartbeats_not_malformed(server: StubServer) -> None:
    """WHATWG dispatches `data:` with empty data; a proxy may send it. It carries no chunk."""
    server.enqueue(
        RawStream(
            (
                b"data:\n\n",
                b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
                b"data: \n\n",
                b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
                b"data: [DONE]\n\n",
            )
        )
    )
    outcome = stream(server.url)
    assert outcome.error is None
    assert outcome.text == "hi"


# -- wire gaps (SPEC section 5) ------------------------------------------------------------------

DONE = b"data: [DONE]\n\n"


def usage_event() -> bytes:
    usage = {"prompt_tokens": 9, "completion_tokens": 3}
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


@pytest.mark.parametrize(("reason", "finish"), [("stop", "stop"), ("length", "max-tokens")])
def test_a_finish_reason_then_a_clean_end_without_done_is_complete(
    server: StubServer, reason: str, finish: FinishReason
) -> None:
    server.enqueue(
        RawStream((chunk_event({"content": "All of it."}), chunk_event({}, reason), usage_event()))
    )
    outcome = stream(server.url)
    assert outcome.error is None
    assert outcome.text == "All of it."
    assert outcome.kinds == ["TextDelta", "Usage", "Finish"]
    assert outcome.events[-1] == Finish(finish)
    assert len(server.requests) == 1


def test_a_clean_end_without_a_finish_reason_is_stream_closed(server: StubServer) -> None:
    server.enqueue(RawStream((chunk_event({"content": "Half"}), usage_event())))
    outcome = stream(server.url)
    assert outcome.text == "Half"
    assert outcome.error is not None and outcome.error.code == "STREAM_CLOSED"
    assert outcome.rendered == f"DeepSeek API stream from {server.url} ended before [DONE]"
    assert outcome.retries == []


def test_reasoning_without_text_is_an_empty_answer(server: StubServer) -> None:
    server.enqueue(
        RawStream((chunk_event({"reasoning_content": "Let me think."}, "stop"), DONE)),
        Answer("never asked for"),
    )
    outcome = stream(server.url)  # reasoning shown (a terminal): no retry
    assert outcome.reasoning == "Let me think."
    assert outcome.error is not None and outcome.error.code == "EMPTY_RESPONSE"
    assert outcome.rendered == "DeepSeek API sent an empty answer"
    assert outcome.retries == [] and len(server.requests) == 1


def test_hidden_reasoning_without_text_is_retried_like_any_empty_answer(
    server: StubServer,
) -> None:
    server.enqueue(
        RawStream((chunk_event({"reasoning_content": "Hmm."}, "stop"), DONE)),
        Answer("second try"),
    )
    outcome = stream(server.url, reasoning_shown=False)
    assert outcome.kinds == ["ReasoningDelta", "RetryNotice", "TextDelta", "Usage", "Finish"]
    (retry,) = outcome.retries
    assert isinstance(retry.error, LlmError) and retry.error.code == "EMPTY_RESPONSE"
    assert outcome.text == "second try"


@pytest.mark.parametrize(("reasoning_shown", "retried"), [(False, True), (True, False)])
def test_a_cut_after_reasoning_is_retried_only_when_it_was_hidden(
    server: StubServer, reasoning_shown: bool, retried: bool
) -> None:
    server.enqueue(
        RawStream((chunk_event({"reasoning_content": "Thinking"}),), end=False),
        Answer("second try"),
    )
    outcome = stream(server.url, reasoning_shown=reasoning_shown)
    assert outcome.reasoning.startswith("Thinking")
    if retried:
        assert [r.error.code for r in outcome.retries if isinstance(r.error, LlmError)] == [
            "TRANSPORT"
        ]
        assert outcome.error is None and outcome.text == "second try"
    else:
        assert outcome.retries == [] and len(server.requests) == 1
        assert outcome.error is not None and outcome.error.code == "TRANSPORT"
        assert outcome.rendered == f"DeepSeek API stream from {server.url} failed: {PEER_CLOSED}"


@pytest.mark.parametrize(
    ("data", "message", "code"),
    [
        ({"error": {"message": "Content Exists Risk", "type": "invalid_request_error"}},
         "Content Exists Risk", "CONTENT_FILTER"),
        ({"type": "error", "code": "insufficient_quota", "message": "Out of credit"},
         "Out of credit", "QUOTA"),
        ({"type": "error", "code": "context_length_exceeded", "message": "Too long"},
         "Too long", "CONTEXT_WINDOW_EXCEEDED"),
        ({"error": "Model overloaded"}, "Model overloaded", "SERVER"),
        ("upstream connection reset", "upstream connection reset", "SERVER"),
    ],
)  # fmt: skip
def test_a_named_error_event_fails_the_turn_with_the_servers_message(
    server: StubServer, data: object, message: str, code: str
) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    error = f"event: error\ndata: {text}\n\n".encode()
    # Some servers end the body right after it; others go on: neither may hide the error.
    server.enqueue(RawStream((chunk_event({"content": "Some text"}), error, DONE)))
    outcome = stream(server.url)
    assert outcome.text == "Some text"
    assert outcome.error is not None and outcome.error.code == code
    assert outcome.rendered == f"DeepSeek API reported an error in the stream: {message}"
    assert outcome.error.request_id == "stub-1"
    assert len(server.requests) == 1


def test_a_named_error_event_before_any_text_is_retried_when_transient(server: StubServer) -> None:
    error = b'event: error\ndata: {"type": "error", "message": "Overloaded"}\n\n'
    server.enqueue(RawStream((b": keep-alive\n\n", error)), Answer("second try"))
    outcome = stream(server.url)
    assert [error_chain(r.error) for r in outcome.retries] == [
        "DeepSeek API reported an error in the stream: Overloaded"
    ]
    assert outcome.text == "second try"


def gateway_page(status: int, reason: str, content_type: str | None, body: str) -> Any:
    """A fault handler answering every request with ``body`` under ``status``."""
    payload = body.encode()
    head = f"HTTP/1.1 {status} {reason}\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    head += f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"

    def handler(conn: socket.socket, server: FaultServer) -> None:
        read_request(conn)
        conn.sendall(head.encode() + payload)

    return handler


NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


@pytest.mark.parametrize(
    "content_type", ["application/json", "text/plain; charset=utf-8", "text/html", None]
)
@pytest.mark.parametrize(
    "body",
    [
        NGINX_502,
        "<!DOCTYPE html><html><head><title>Bad gateway | example.com</title></head></html>",
        json.dumps({"error": {"message": NGINX_502}}),  # a gateway wrapping the page
    ],
)
def test_an_html_page_never_lands_in_the_outcome_line(content_type: str | None, body: str) -> None:
    with FaultServer(gateway_page(502, "Bad Gateway", content_type, body)) as gateway:
        outcome = stream(gateway.url, retry=NO_RETRY)
    assert outcome.error is not None and outcome.error.code == "SERVER"
    assert outcome.error.status == 502
    assert outcome.rendered == "DeepSeek API returned HTTP 502 Bad Gateway"


def test_an_html_page_under_a_status_python_does_not_name() -> None:
    page = "<!DOCTYPE html><html><body>Balance your load</body></html>"  # words not read
    handler = gateway_page(520, "Web Server Returned an Unknown Error", "text/plain", page)
    with FaultServer(handler) as gateway:
        outcome = stream(gateway.url, retry=NO_RETRY)
    assert outcome.error is not None and outcome.error.code == "SERVER"
    assert outcome.rendered == "DeepSeek API returned HTTP 520 Web Server Returned an Unknown Error"


def test_a_plain_text_error_body_still_gives_its_first_line() -> None:
    handler = gateway_page(503, "Service Unavailable", "text/plain", "upstream overloaded\nretry")
    with FaultServer(handler) as gateway:
        outcome = stream(gateway.url, retry=NO_RETRY)
    assert (
        outcome.rendered
        == "DeepSeek API returned HTTP 503 Service Unavailable: upstream overloaded"
    )


# -- proxies: a 407 routed on its status, never on words -----------------------------------------


def refuse_connect(status: int, reason: str) -> Any:
    """A proxy that answers every request (a CONNECT, or a forwarded POST) with ``status``."""

    def handler(conn: socket.socket, server: FaultServer) -> None:
        read_request(conn)
        conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n\r\n".encode())

    return handler


@pytest.mark.parametrize(("scheme", "variable"), [("http", "HTTP_PROXY"), ("https", "HTTPS_PROXY")])
def test_a_proxy_that_wants_credentials_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, scheme: str, variable: str
) -> None:
    base = f"{scheme}://127.0.0.1:{closed_port()}"
    with FaultServer(answer_407) as proxy:
        monkeypatch.setenv(variable, proxy.url)
        outcome = stream(base)
        connections = proxy.connections
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.error.status == 407
    assert outcome.rendered == (
        f"DeepSeek API request to {base} failed: 407 Proxy Authentication Required"
    )
    assert isinstance(outcome.error.__cause__, httpx.ProxyError)
    assert outcome.retries == [] and connections == 1


def test_a_proxy_refusing_connect_for_another_reason_is_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = f"https://127.0.0.1:{closed_port()}"
    retry = RetryPolicy(max_retries=2, base_delay=0.001, jitter=False)
    with FaultServer(refuse_connect(503, "Service Unavailable")) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        outcome = stream(base, retry=retry)
        connections = proxy.connections
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.error.status == 503
    assert outcome.rendered == f"DeepSeek API request to {base} failed: 503 Service Unavailable"
    assert len(outcome.retries) == 2 and connections == 3


# -- tool calls on the wire (SPEC section 7) -----------------------------------------------------

ODD_ARGUMENTS = '{"a": 1,  "b":"\\u00e9" ,"c" :[ ], "d": "\\"q\\"\\n"}'
"""Arguments as a model may write them: odd spacing, escapes. Kept exactly."""


def tool_event(*fragments: dict[str, Any], finish_reason: str | None = None) -> bytes:
    return chunk_event({"tool_calls": list(fragments)}, finish_reason)


def fragment(index: int, **fields: Any) -> dict[str, Any]:
    """A ``delta.tool_calls`` item: ``id``/``type`` at its top, ``name``/``arguments`` inside."""
    item: dict[str, Any] = {"index": index}
    for key in ("id", "type"):
        if key in fields:
            item[key] = fields.pop(key)
    if fields:
        item["function"] = fields
    return item


def calls_of(outcome: Outcome) -> list[ToolCall]:
    return [e.call for e in outcome.events if isinstance(e, ToolCallRequest)]


def test_one_tool_call(server: StubServer) -> None:
    pieces = [ODD_ARGUMENTS[i : i + 5] for i in range(0, len(ODD_ARGUMENTS), 5)]
    server.enqueue(
        RawStream(
            (
                tool_event(fragment(0, id="call_0", type="function", name="read", arguments="")),
                *(tool_event(fragment(0, arguments=piece)) for piece in pieces),
                chunk_event({}, "tool_calls"),
                usage_event(),
                DONE,
            ),
        )
    )
    outcome = stream(server.url)
    assert outcome.error is None
    assert outcome.kinds == ["Usage", "ToolCallRequest", "Finish"]
    assert calls_of(outcome) == [ToolCall("call_0", "read", ODD_ARGUMENTS)]
    assert outcome.events[-1] == Finish("tool-calls")
    assert len(server.requests) == 1  # an answer with no text is not empty: never retried


def test_several_calls_in_one_step_interleaved(server: StubServer) -> None:
    server.enqueue(
        RawStream(
            (
                chunk_event({"content": "Looking."}),
                tool_event(fragment(1, id="call_b", type="function", name="glob")),
                tool_event(fragment(0, id="call_a", type="function", name="read", arguments="{")),
                tool_event(
                    fragment(1, arguments='{"pattern": "*.py"}'), fragment(0, arguments='"')
                ),
                tool_event(fragment(2, id="call_c", name="grep", arguments="{}")),
                tool_event(fragment(0, arguments='file_path": "a"}')),
                chunk_event({}, "tool_calls"),
                DONE,
            ),
            delay=0.005,  # each piece its own network read
        )
    )
    outcome = stream(server.url)
    assert outcome.text == "Looking."
    # In index order, whatever order their fragments came in.
    assert calls_of(outcome) == [
        ToolCall("call_a", "read", '{"file_path": "a"}'),
        ToolCall("call_b", "glob", '{"pattern": "*.py"}'),
        ToolCall("call_c", "grep", "{}"),
    ]
    assert outcome.events[-1] == Finish("tool-calls")


def test_a_one_megabyte_argument_string_in_many_fragments(server: StubServer) -> None:
    content = "".join(f'line {i}: é \\ "quoted" \u2028\n' for i in range(40_000))
    arguments = json.dumps({"file_path": "big.txt", "content": content})
    assert len(arguments) > 1_000_000
    events = [tool_event(fragment(0, id="call_big", type="function", name="write"))]
    events += [
        tool_event(fragment(0, arguments=arguments[i : i + 3000]))
        for i in range(0, len(arguments), 3000)
    ]
    # Sixteen events per HTTP chunk, as a server flushes under load.
    body = [b"".join(events[i : i + 16]) for i in range(0, len(events), 16)]
    server.enqueue(RawStream((*body, chunk_event({}, "tool_calls"), DONE)))
    outcome = stream(server.url)
    assert outcome.error is None
    assert calls_of(outcome) == [ToolCall("call_big", "write", arguments)]


def test_a_length_finish_with_calls_pending_is_max_tokens(server: StubServer) -> None:
    server.enqueue(
        RawStream(
            (
                tool_event(fragment(0, id="c", name="write", arguments='{"content": "ab')),
                chunk_event({}, "length"),
                DONE,
            )
        )
    )
    outcome = stream(server.url)
    assert calls_of(outcome) == [ToolCall("c", "write", '{"content": "ab')]
    assert outcome.events[-1] == Finish("max-tokens")


@pytest.mark.parametrize(
    ("delta", "what"),
    [
        ({"tool_calls": {"index": 0, "id": "c"}}, "has malformed tool_calls"),
        ({"tool_calls": [{"id": "c", "function": {"name": "read"}}]},
         "has a tool call without an integer index"),
        ({"tool_calls": [{"index": 0, "function": {"arguments": 5}}]},
         "has tool call arguments that are not a string"),
    ],
)  # fmt: skip
def test_malformed_tool_calls_are_malformed_responses(
    server: StubServer, delta: dict[str, Any], what: str
) -> None:
    data = json.dumps({"choices": [{"delta": delta}]})
    server.enqueue(Malformed(data), Answer("never asked for"))
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "MALFORMED_RESPONSE"
    assert outcome.rendered == f"DeepSeek API stream event {what}: {data!r}"
    assert outcome.retries == [] and len(server.requests) == 1


def test_a_call_without_a_name_by_the_end_is_malformed(server: StubServer) -> None:
    server.enqueue(
        RawStream(
            (tool_event(fragment(0, id="c", arguments="{}"), finish_reason="tool_calls"), DONE)
        )
    )
    outcome = stream(server.url)
    assert outcome.error is not None and outcome.error.code == "MALFORMED_RESPONSE"
    assert outcome.rendered == "DeepSeek API sent tool call 0 without a name"
    assert calls_of(outcome) == []


def test_a_cut_after_a_call_fragment_is_not_retried(server: StubServer) -> None:
    server.enqueue(
        RawStream((tool_event(fragment(0, id="c", name="bash", arguments='{"comm')),), end=False),
        Answer("never asked for"),
    )
    outcome = stream(server.url, reasoning_shown=False)
    assert outcome.error is not None and outcome.error.code == "TRANSPORT"
    assert outcome.rendered == f"DeepSeek API stream from {server.url} failed: {PEER_CLOSED}"
    assert calls_of(outcome) == []  # a call cut short is never handed over
    assert outcome.retries == [] and len(server.requests) == 1


def test_the_next_request_carries_calls_reasoning_and_results(server: StubServer) -> None:
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
    chat = ChatRequest(
        model="deepseek-v4-flash",
        messages=(
            SystemMessage("You are dsh."),
            UserMessage("read a and b"),
            AssistantMessage(
                "",
                reasoning="Two files.",
                tool_calls=(
                    ToolCall("call_a", "read", ODD_ARGUMENTS),
                    ToolCall("call_b", "read", '{"file_path":"b"}'),
                ),
            ),
            ToolMessage("call_a", "1\tfirst"),
            ToolMessage("call_b", ""),
            AssistantMessage("Now b again.", tool_calls=(ToolCall("call_c", "read", "{}"),)),
            ToolMessage("call_c", "1\tsecond"),
            AssistantMessage("Both read.", reasoning="not sent: no tool calls"),
            UserMessage("thanks"),
        ),
        tools=(ToolSpec("read", "Read a file.", schema),),
        thinking=True,
    )
    outcome = stream(server.url, chat)
    assert outcome.error is None  # the stub checks DeepSeek's two 400 rules too
    sent = server.requests[0]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {"name": "read", "description": "Read a file.", "parameters": schema},
        }
    ]
    assert sent["messages"] == [
        {"role": "system", "content": "You are dsh."},
        {"role": "user", "content": "read a and b"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "read", "arguments": ODD_ARGUMENTS}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "read", "arguments": '{"file_path":"b"}'}},
            ],
            "reasoning_content": "Two files.",
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "1\tfirst"},
        {"role": "tool", "tool_call_id": "call_b", "content": "(no output)"},
        {
            "role": "assistant",
            "content": "Now b again.",
            "tool_calls": [
                {"id": "call_c", "type": "function",
                 "function": {"name": "read", "arguments": "{}"}},
            ],
            "reasoning_content": "",
        },
        {"role": "tool", "tool_call_id": "call_c", "content": "1\tsecond"},
        {"role": "assistant", "content": "Both read."},
        {"role": "user", "content": "thanks"},
    ]  # fmt: skip
