"""The fault matrix: every failure SPEC section 5 names, and the faults around HTTP, end to end.

Each case runs dsh on a pipe with two input lines: the one that meets the fault and the next
one. It checks the exact outcome line (a precise pattern where the OS or a library words it),
the exit status, the ``turn/end`` the log stores, no traceback, and that the next line is still
served. The front door runs in-process (``tests/harness.py``: ``main`` on in-memory streams,
real sockets to real servers), its retry waits on a ``ManualClock`` that jumps, so the real
backoff schedule (0.5 s base, full jitter, 4 retries) costs no time. What needs the process
runs the real dsh: a signal that ends a turn that cannot end by itself. What waits in real time
on purpose (``DSH_TIMEOUT`` running out) is marked slow with them.

Not here, and why: a read timeout or an idle stream ending as ``TIMEOUT``. The defaults are 60 s
for the response headers and 120 s between events, not configurable from the front door, so a
server that never answers holds a turn for 5 x 60 s plus backoff. The tests below show instead
that such a turn can always be ended at once with SIGINT or SIGTERM.
"""

from __future__ import annotations

import re
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsh_core.testing import (
    Answer,
    Behaviour,
    Cut,
    Disconnect,
    Empty,
    EndWithoutDone,
    HttpError,
    InBandError,
    KeepAlives,
    Malformed,
    ManualClock,
    RawStream,
    Stall,
    StubServer,
    WrongContentType,
    closed_port,
)
from tests.conftest import CANARY_KEY
from tests.harness import SkippingClock, run_in_process
from tests.reliability.conftest import (
    OVERSIZED_LINE,
    OVERSIZED_OUTCOME,
    Live,
    Run,
    assert_sane,
    child_env,
)
from tests.reliability.faults import (
    FaultServer,
    answer_407,
    bad_chunk_after_text,
    hang,
    not_tls,
    read_request,
    self_signed_context,
    short_content_length,
    sse_event,
)
from tests.support import wait_until

TWO_LINES = b"the fault\nthe next line\n"
PROXY_SECRET = "proxy-secret-4f1d"
"""A password in a proxy URL: it must not be shown anywhere."""


def dsh(env: dict[str, str], *, stdin: bytes) -> Run:
    """dsh in-process on ``stdin``; its retry waits on a clock that jumps (no time passes)."""
    return run_in_process(env, stdin=stdin, clock=ManualClock(autojump=True))


def retry_notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("dsh: retrying in ")]


_NEXT_STEPS = {
    "AUTH": "check DEEPSEEK_API_KEY",
    "QUOTA": "top up the account's balance",
    "TRANSPORT": "check --base-url, the network and HTTPS_PROXY, then try again",
    "TIMEOUT": "try again, or raise --timeout",
}
STOPPING = frozenset({"AUTH", "QUOTA"})
"""Failures after which a pipe sends no more lines (SPEC 12)."""


def next_step(code: str, status: object = None) -> str:
    """What the outcome line of a failure a person can act on ends with (SPEC 12)."""
    if status in (404, 405, 501):
        step: str | None = "check --base-url: dsh adds /chat/completions to it"
    elif code.startswith("HTTP_4"):
        step = "check --base-url and --model"
    else:
        step = _NEXT_STEPS.get(code)
    return f" (next: {step})" if step else ""


def assert_turn_failed(run: Run, line: str, code: str, index: int = 0) -> dict[str, object]:
    """The outcome line and the log's turn/end say the same thing; returns the turn/end."""
    end = run.turn_ends()[index]
    assert end["kind"] == "error"
    assert end["code"] == code
    step = next_step(code, end.get("status"))
    assert f"[turn failed {end['code']}] {end['message']}{step}" == line
    return end


# Faults inside HTTP, served by the stub: none of these is retried.


@dataclass(frozen=True)
class StubCase:
    id: str
    behaviour: Behaviour
    code: str
    message: str
    """The outcome message; ``{url}`` stands for the stub's base URL."""
    shown: str = ""
    """Answer text shown before the failure (then stored as an interrupted answer)."""
    status: int | None = None


STUB_CASES = [
    StubCase(
        "401",
        HttpError(401, "Authentication Fails, Your api key is invalid"),
        "AUTH",
        "DeepSeek API returned HTTP 401 Unauthorized: "
        "Authentication Fails, Your api key is invalid",
        status=401,
    ),
    StubCase(
        "403",
        HttpError(403, "Your region is not supported"),
        "AUTH",
        "DeepSeek API returned HTTP 403 Forbidden: Your region is not supported",
        status=403,
    ),
    StubCase(
        "402",
        HttpError(402, "Insufficient Balance"),
        "QUOTA",
        "DeepSeek API returned HTTP 402 Payment Required: Insufficient Balance",
        status=402,
    ),
    StubCase(
        "400-quota-wording",
        HttpError(400, "Your monthly quota is exhausted"),
        "QUOTA",
        "DeepSeek API returned HTTP 400 Bad Request: Your monthly quota is exhausted",
        status=400,
    ),
    StubCase(
        "400-context",
        HttpError(400, "This model's maximum context length is 65536 tokens"),
        "CONTEXT_WINDOW_EXCEEDED",
        "DeepSeek API returned HTTP 400 Bad Request: "
        "This model's maximum context length is 65536 tokens",
        status=400,
    ),
    StubCase(
        "400",
        HttpError(400, "Invalid 'messages': empty"),
        "INVALID_REQUEST",
        "DeepSeek API returned HTTP 400 Bad Request: Invalid 'messages': empty",
        status=400,
    ),
    StubCase(
        "413",
        HttpError(413, "Request body too large"),
        "INVALID_REQUEST",
        "DeepSeek API returned HTTP 413 Request Entity Too Large: Request body too large",
        status=413,
    ),
    StubCase(
        "422",
        HttpError(422, "Failed to deserialize the JSON body"),
        "INVALID_REQUEST",
        "DeepSeek API returned HTTP 422 Unprocessable Entity: Failed to deserialize the JSON body",
        status=422,
    ),
    StubCase(
        "404-html",
        HttpError(404, raw_body="<html><body><h1>404</h1>nginx</body></html>"),
        "HTTP_404",
        "DeepSeek API returned HTTP 404 Not Found",
        status=404,
    ),
    StubCase(
        "418",
        HttpError(418, "I refuse"),
        "HTTP_418",
        "DeepSeek API returned HTTP 418 I'm a Teapot: I refuse",
        status=418,
    ),
    StubCase(
        "end-without-done",
        EndWithoutDone("A partial answer"),
        "STREAM_CLOSED",
        "DeepSeek API stream from {url} ended before [DONE]",
        shown="A partial answer",
    ),
    StubCase(
        "cut-after-text",
        Cut("This answer is cut off in the mid"),
        "TRANSPORT",
        "DeepSeek API stream from {url} failed: peer closed connection without sending "
        "complete message body (incomplete chunked read)",
        shown="This answer is cut off in the mid",
    ),
    StubCase(
        "not-json",
        Malformed(),
        "MALFORMED_RESPONSE",
        "DeepSeek API stream event is not valid JSON: "
        '\'{"choices": [{"delta": {"content": "oops"\': '
        "Expecting ',' delimiter: line 1 column 42 (char 41)",
    ),
    StubCase(
        "not-an-object",
        Malformed("[1, 2]"),
        "MALFORMED_RESPONSE",
        "DeepSeek API stream event is not a JSON object: '[1, 2]'",
    ),
    StubCase(
        "gigantic-malformed-line",
        RawStream((b"data: " + b"{" * 2_000_000 + b"\n\n",)),
        "MALFORMED_RESPONSE",
        "DeepSeek API stream event is not valid JSON: "
        + repr("{" * 120)
        + "...: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    ),
    StubCase(
        "content-type-html",
        WrongContentType(),
        "MALFORMED_RESPONSE",
        "DeepSeek API answered with content type 'text/html; charset=utf-8', not an event stream",
        status=200,
    ),
    StubCase(
        "content-type-json-error",
        WrongContentType('{"error": {"message": "Insufficient Balance"}}', "application/json"),
        "QUOTA",
        "DeepSeek API reported an error in the stream: Insufficient Balance",
    ),
    StubCase(
        "content-type-plain",
        WrongContentType("OK", "text/plain"),
        "MALFORMED_RESPONSE",
        "DeepSeek API answered with content type 'text/plain', not an event stream",
        status=200,
    ),
    StubCase(
        "in-band-content-risk",
        InBandError("Content Exists Risk", code="content_filter"),
        "CONTENT_FILTER",
        "DeepSeek API reported an error in the stream: Content Exists Risk",
    ),
    StubCase(
        "in-band-context",
        InBandError("maximum context length exceeded"),
        "CONTEXT_WINDOW_EXCEEDED",
        "DeepSeek API reported an error in the stream: maximum context length exceeded",
    ),
    StubCase(
        "in-band-server-after-text",
        InBandError("Internal error", after_text="Some text", code="server_error"),
        "SERVER",
        "DeepSeek API reported an error in the stream: Internal error",
        shown="Some text",
    ),
    StubCase(
        "finish-content-filter",
        Answer("Risky words", finish_reason="content_filter"),
        "CONTENT_FILTER",
        "DeepSeek API stopped the answer: finish_reason content_filter",
        shown="Risky words",
    ),
    StubCase(
        "finish-insufficient-resource",
        Answer("Busy", finish_reason="insufficient_system_resource"),
        "SERVER",
        "DeepSeek API stopped the answer: finish_reason insufficient_system_resource",
        shown="Busy",
    ),
]


@pytest.mark.parametrize("case", STUB_CASES, ids=lambda case: case.id)
def test_stub_fault(case: StubCase, stub: StubServer, home: Path) -> None:
    stub.enqueue(case.behaviour)
    run = dsh(child_env(stub.url, home), stdin=TWO_LINES)
    message = case.message.replace("{url}", stub.url)
    line = f"[turn failed {case.code}] {message}{next_step(case.code, case.status)}"
    shown = f"{case.shown}\n" if case.shown else ""
    assert run.returncode == 1, run.stderr
    assert retry_notices(run.stderr) == []
    end = assert_turn_failed(run, line, case.code)
    assert end.get("status") == case.status
    assert str(end.get("request_id", "")).startswith("stub-")
    if case.code in STOPPING:  # every next line would meet it too: none is sent
        assert run.stdout == f"{shown}{line}\n"
        assert len(run.turn_ends()) == 1
        assert len(stub.requests) == 1
        assert_sane(run)
        return
    assert run.stdout == f"{shown}{line}\nYou said: the next line\n"
    assert run.turn_ends()[1] == {"kind": "completed"}
    answers = run.of_type("assistant/message")
    if case.shown:
        assert answers[0] == {"turn": 1, "step": 1, "text": case.shown, "interrupted": True}
    else:
        assert [a["turn"] for a in answers] == [2]
    assert len(stub.requests) == 2
    # A failed turn without an answer is not sent again; one with shown text is, with it.
    messages = stub.requests[-1]["messages"]
    sent = [(m["role"], m["content"]) for m in messages if m["role"] != "system"]
    earlier = [("user", "the fault"), ("assistant", case.shown)] if case.shown else []
    assert sent == [*earlier, ("user", "the next line")]
    assert_sane(run)


# Faults around HTTP, from purpose-built servers; none of these is retried.


@dataclass(frozen=True)
class ServerCase:
    id: str
    handler: Callable[..., None]
    pattern: str
    """The outcome line as a regex; ``{url}`` stands for the server's base URL (escaped)."""
    shown: str


SERVER_CASES = [
    ServerCase(
        "bad-chunk-framing",
        bad_chunk_after_text,
        r"\[turn failed TRANSPORT\] DeepSeek API stream from {url} failed: "
        r"illegal chunk header: .*zz-not-a-chunk-size.*",
        "Some text, then ",
    ),
    ServerCase(
        "content-length-not-kept",
        short_content_length,
        r"\[turn failed TRANSPORT\] DeepSeek API stream from {url} failed: peer closed "
        r"connection without sending complete message body \(received \d+ bytes, "
        r"expected \d+\)",
        "Half an answer",
    ),
]


@pytest.mark.parametrize("case", SERVER_CASES, ids=lambda case: case.id)
def test_framing_fault(case: ServerCase, home: Path) -> None:
    with FaultServer(case.handler) as server:
        run = dsh(child_env(server.url, home), stdin=TWO_LINES)
        connections = server.connections
    pattern = case.pattern.format(url=re.escape(server.url)) + re.escape(next_step("TRANSPORT"))
    lines = run.stdout.splitlines()
    # Both lines meet the same server: each shows its text, then fails; neither is retried.
    assert lines[0] == case.shown and lines[2] == case.shown
    assert re.fullmatch(pattern, lines[1]) and re.fullmatch(pattern, lines[3]), run.stdout
    assert len(lines) == 4
    assert run.returncode == 1
    assert connections == 2
    assert retry_notices(run.stderr) == []
    for index, line in enumerate((lines[1], lines[3])):
        assert_turn_failed(run, line, "TRANSPORT", index)
    answers = run.of_type("assistant/message")
    assert [a["text"] for a in answers] == [case.shown, case.shown]
    assert all(a["interrupted"] for a in answers)
    assert_sane(run)


def test_certificate_not_trusted_is_not_retried(home: Path, tmp_path: Path) -> None:
    context = self_signed_context(tmp_path)
    if context is None:
        pytest.skip("no openssl to make a certificate with")
    with FaultServer(hang, tls=context) as server:
        base = f"https://127.0.0.1:{server.port}"
        run = dsh(child_env(base, home), stdin=TWO_LINES)
        connections = server.connections
    pattern = (
        re.escape(f"[turn failed TRANSPORT] DeepSeek API request to {base} failed: ")
        + r"\[SSL: CERTIFICATE_VERIFY_FAILED\] certificate verify failed: "
        r"self[- ]signed certificate \(_ssl\.c:\d+\)" + re.escape(next_step("TRANSPORT"))
    )
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and all(re.fullmatch(pattern, line) for line in lines), run.stdout
    assert run.returncode == 1
    assert connections == 2  # a permanent failure: one try per turn
    assert retry_notices(run.stderr) == []
    assert_turn_failed(run, lines[0], "TRANSPORT")
    assert_sane(run)


def test_key_that_cannot_be_a_header(stub: StubServer, home: Path) -> None:
    env = child_env(stub.url, home, DEEPSEEK_API_KEY=f"{CANARY_KEY} pasted twice")
    run = dsh(env, stdin=TWO_LINES)
    # A key that can never be sent is a startup failure: one line, exit 2, no session.
    assert run.stderr == (
        "dsh: startup failed: The DeepSeek API key contains spaces or characters "
        "not allowed in an HTTP header: check DEEPSEEK_API_KEY\n"
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert stub.requests == []
    assert not (home / "sessions").exists()
    assert_sane(run)


# Retried once, then answered: the notice, the log's retry event, the answer.


@dataclass(frozen=True)
class RetryCase:
    id: str
    behaviour: Behaviour
    code: str
    message: str


RETRY_CASES = [
    RetryCase(
        "429",
        HttpError(429, "Rate limit reached for requests", retry_after=0),
        "RATE_LIMIT",
        "DeepSeek API returned HTTP 429 Too Many Requests: Rate limit reached for requests",
    ),
    RetryCase(
        "500-html",
        HttpError(500, raw_body="<html><body>Internal Server Error</body></html>"),
        "SERVER",
        "DeepSeek API returned HTTP 500 Internal Server Error",
    ),
    RetryCase(
        "503",
        HttpError(503, "Server overloaded, please try again later."),
        "SERVER",
        "DeepSeek API returned HTTP 503 Service Unavailable: "
        "Server overloaded, please try again later.",
    ),
    RetryCase(
        "disconnect",
        Disconnect(),
        "TRANSPORT",
        "DeepSeek API request to {url} failed: Server disconnected without sending a response.",
    ),
    RetryCase(
        "cut-before-text",
        Cut(""),
        "TRANSPORT",
        "DeepSeek API stream from {url} failed: peer closed connection without sending "
        "complete message body (incomplete chunked read)",
    ),
    RetryCase("empty", Empty(), "EMPTY_RESPONSE", "DeepSeek API sent an empty answer"),
    RetryCase(
        "end-without-done-before-text",
        EndWithoutDone(""),
        "STREAM_CLOSED",
        "DeepSeek API stream from {url} ended before [DONE]",
    ),
]


@pytest.mark.parametrize("case", RETRY_CASES, ids=lambda case: case.id)
def test_retried_once_then_answered(case: RetryCase, stub: StubServer, home: Path) -> None:
    stub.enqueue(case.behaviour)
    run = dsh(child_env(stub.url, home), stdin=TWO_LINES)
    message = case.message.replace("{url}", stub.url)
    assert run.stdout == "You said: the fault\nYou said: the next line\n"
    assert run.returncode == 0
    (notice,) = retry_notices(run.stderr)
    assert re.fullmatch(
        r"dsh: retrying in \d\.\d s \(retry 1 of 4\): " + re.escape(message), notice
    ), notice
    (retry,) = run.of_type("retry")
    assert (retry["turn"], retry["attempt"], retry["code"], retry["message"]) == (
        1,
        1,
        case.code,
        message,
    )
    assert 0 <= retry["delay"] <= 0.5
    assert run.turn_ends() == [{"kind": "completed"}, {"kind": "completed"}]
    assert len(stub.requests) == 3
    assert_sane(run)


def test_keep_alive_comments_are_not_a_fault(stub: StubServer, home: Path) -> None:
    stub.enqueue(KeepAlives(4, 0.05, Answer("Thanks for waiting.")))
    run = dsh(child_env(stub.url, home), stdin=TWO_LINES)
    assert run.stdout == "Thanks for waiting.\nYou said: the next line\n"
    assert run.returncode == 0
    assert run.turn_ends() == [{"kind": "completed"}, {"kind": "completed"}]
    assert_sane(run)


# Retried until the retries run out: the whole backoff schedule, on a clock that jumps.


@dataclass
class Exhausted:
    """One retried-to-exhaustion run and what its fault server saw."""

    run: Run
    base: str
    connections: int
    detail: str = ""


def _exhausted_runs(tmp: Path) -> dict[str, Exhausted]:
    with StubServer() as empty:
        empty.enqueue(*[Empty()] * 5)
        refused_proxy = closed_port()
        unreached = f"http://127.0.0.1:{closed_port()}"
        proxied = child_env(
            unreached, tmp / "proxy-refuses", HTTP_PROXY=f"http://127.0.0.1:{refused_proxy}"
        )
        return {
            "proxy-refuses": Exhausted(
                dsh(proxied, stdin=b"the fault\n" + OVERSIZED_LINE),
                unreached,
                0,
                str(refused_proxy),
            ),
            "empty": Exhausted(
                dsh(child_env(empty.url, tmp / "empty"), stdin=TWO_LINES),
                empty.url,
                len(empty.requests),
            ),
        }


@pytest.fixture(scope="module")
def exhausted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exhausted]:
    return _exhausted_runs(tmp_path_factory.mktemp("exhausted"))


EXHAUSTED_PATTERNS = {
    "proxy-refuses": (
        "TRANSPORT",
        r"DeepSeek API request to {base} failed: All connection attempts failed: "
        r"\[Errno 111\] Connect call failed \('127\.0\.0\.1', {detail}\)",
    ),
    "empty": ("EMPTY_RESPONSE", r"DeepSeek API sent an empty answer"),
}


@pytest.mark.parametrize("name", list(EXHAUSTED_PATTERNS))
def test_retried_until_the_retries_run_out(name: str, exhausted: dict[str, Exhausted]) -> None:
    case = exhausted[name]
    run = case.run
    code, template = EXHAUSTED_PATTERNS[name]
    message = template.format(base=re.escape(case.base), detail=case.detail)
    lines = run.stdout.splitlines()
    step = re.escape(next_step(code))
    assert re.fullmatch(rf"\[turn failed {code}\] {message}{step}", lines[0]), run.stdout
    notices = retry_notices(run.stderr)
    assert [n.split("(retry ")[1][0] for n in notices] == ["1", "2", "3", "4"], run.stderr
    # The first notice of the request shows the chain; the others, the same, say only when.
    assert re.fullmatch(rf"dsh: retrying in \d\.\d s \(retry 1 of 4\): {message}", notices[0])
    assert all(re.fullmatch(r"dsh: retrying in \d\.\d s \(retry \d of 4\)", n) for n in notices[1:])
    assert run.returncode == 1
    assert_turn_failed(run, lines[0], code)
    assert len(run.of_type("retry")) == 4
    if name == "empty":
        # The stub answers the next line; the failed message travels with it.
        assert lines[1:] == ["You said: the next line"]  # the failed question is not resent
        assert case.connections == 6  # requests: five tries, then the next line
        assert run.turn_ends()[1] == {"kind": "completed"}
    else:
        assert lines[1:] == [OVERSIZED_OUTCOME]  # the session goes on with the next line
        assert run.turn_ends()[1]["kind"] == "rejected"
        if name != "proxy-refuses":
            assert case.connections == 5  # one try and four retries
    assert PROXY_SECRET not in run.stdout + run.stderr
    assert PROXY_SECRET.encode() not in run.log_path().read_bytes()
    assert_sane(run)


# A turn that cannot end by itself soon ends at once on SIGINT or SIGTERM.


SIGNALS = [(signal.SIGINT, 130, "user"), (signal.SIGTERM, 143, "shutdown")]


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status", "reason"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_server_that_never_answers(sig: int, status: int, reason: str, home: Path) -> None:
    asked = threading.Event()

    def hang_once_asked(conn: socket.socket, server: FaultServer) -> None:
        """:func:`hang`, telling the test when the whole request has arrived."""
        read_request(conn)
        asked.set()
        server.stopping.wait()

    with FaultServer(hang_once_asked) as server:
        live = Live(child_env(server.url, home))
        try:
            live.send(b"hello?\n")
            # The request is sent and dsh waits for the response (30 s: a hang guard).
            assert asked.wait(timeout=30), "dsh never sent its request"
            run = live.finish(sig)
        finally:
            live.kill()
    assert run.stdout == f"[turn aborted] {reason}\n"
    assert run.returncode == status
    assert run.turn_ends() == [{"kind": "aborted", "reason": reason}]
    assert run.of_type("assistant/message") == []
    assert_sane(run)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status", "reason"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_stream_that_stalls_after_some_text(
    sig: int, status: int, reason: str, stub: StubServer, home: Path
) -> None:
    stub.enqueue(Stall(600, after_text="Some text, then silence"))
    live = Live(child_env(stub.url, home))
    try:
        live.send(b"hello?\n")
        live.read_until(b"silence")
        run = live.finish(sig)
    finally:
        live.kill()
    assert run.stdout == f"Some text, then silence\n[turn aborted] {reason}\n"
    assert run.returncode == status
    assert run.turn_ends() == [{"kind": "aborted", "reason": reason}]
    assert run.of_type("assistant/message") == [
        {"turn": 1, "step": 1, "text": "Some text, then silence", "interrupted": True}
    ]
    assert_sane(run)


# With --timeout / DSH_TIMEOUT short, the same two faults end by themselves.


@pytest.mark.slow
def test_server_that_never_answers_times_out_after_retries(home: Path) -> None:
    clock = SkippingClock()  # each of the five 0.5 s timeouts in real time, the waits between none
    with FaultServer(hang) as server:
        run = run_in_process(
            child_env(server.url, home, DSH_TIMEOUT="0.5"),
            stdin=b"hello?\n" + OVERSIZED_LINE,
            clock=clock,
        )
        # dsh timed out without needing the server to accept: the last connection may still
        # be in the listener's queue when dsh exits.
        wait_until(lambda: server.connections >= 5, "the server to accept every connection")
        connections = server.connections
    lines = run.stdout.splitlines()
    assert lines == [
        f"[turn failed TIMEOUT] DeepSeek API request to {server.url} timed out waiting for a "
        f"response after 0.5 s{next_step('TIMEOUT')}",
        OVERSIZED_OUTCOME,
    ], run.stdout
    assert len(retry_notices(run.stderr)) == 4
    assert len(clock.slept) == 4
    assert connections == 5  # one try and four retries
    assert run.returncode == 1
    assert_turn_failed(run, lines[0], "TIMEOUT")
    assert_sane(run)


@pytest.mark.slow
def test_stream_that_stalls_after_some_text_times_out_without_retry(
    stub: StubServer, home: Path
) -> None:
    # 2 s: the headers and the text, from a stub thread of this process, have time to arrive
    # on a loaded machine; the stall (600 s) still ends only by the timeout.
    stub.enqueue(Stall(600, after_text="Some text, then silence"))
    env = child_env(stub.url, home, DSH_TIMEOUT="2")
    run = run_in_process(env, stdin=b"hello?\n" + OVERSIZED_LINE)  # the loop's own clock
    lines = run.stdout.splitlines()
    assert lines == [
        "Some text, then silence",
        f"[turn failed TIMEOUT] DeepSeek API stream from {stub.url} timed out: nothing "
        f"received for 2 s{next_step('TIMEOUT')}",
        OVERSIZED_OUTCOME,
    ], run.stdout
    assert retry_notices(run.stderr) == []  # text was shown: never retried
    assert run.of_type("assistant/message") == [
        {"turn": 1, "step": 1, "text": "Some text, then silence", "interrupted": True}
    ]
    assert run.returncode == 1
    assert_turn_failed(run, lines[1], "TIMEOUT")
    assert_sane(run)


@pytest.mark.slow
def test_429_with_retry_after_beyond_the_cap(stub: StubServer, home: Path) -> None:
    """Retry-After: 3600 is honoured only up to the 30 s cap; the wait ends on SIGINT."""
    stub.enqueue(HttpError(429, "Rate limit reached for requests", retry_after=3600))
    live = Live(child_env(stub.url, home))
    try:
        live.send(b"hello?\n")
        notice = live.read_until(b"\n", stream="stderr")
        run = live.finish(signal.SIGINT)
    finally:
        live.kill()
    assert notice.decode() == (
        "dsh: retrying in 30.0 s (retry 1 of 4): DeepSeek API returned HTTP 429 Too Many "
        "Requests: Rate limit reached for requests\n"
    )
    assert run.stdout == "[turn aborted] user\n"
    assert run.returncode == 130
    (retry,) = run.of_type("retry")
    assert (retry["code"], retry["status"], retry["retry_after"], retry["delay"]) == (
        "RATE_LIMIT",
        429,
        3600.0,
        30.0,
    )
    assert run.turn_ends() == [{"kind": "aborted", "reason": "user"}]
    assert len(stub.requests) == 1
    assert_sane(run)


# Gigantic lines.


def test_gigantic_line_of_text(stub: StubServer, home: Path) -> None:
    """One 8 MiB delta on one SSE line arrives whole; the next turn no longer fits the default
    model's 1,048,576 tokens, and nothing before the answer could be summarised."""
    text = "0123456789abcdef" * (1 << 19)
    stub.enqueue(RawStream((sse_event(text), sse_event("", "stop"), b"data: [DONE]\n\n")))
    run = dsh(child_env(stub.url, home), stdin=TWO_LINES)
    answer, rejection, rest = run.stdout.split("\n")
    assert (answer, rest) == (text, "")
    assert re.fullmatch(
        r"\[turn rejected\] the conversation no longer fits the model's context window "
        r"\(about 2,5\d\d,\d\d\d tokens, the window is 1,048,576; compacting cannot help: "
        r"the request for its summary would not fit either\): start a fresh session \(send the "
        r"rest to a new dsh run, without --continue or --resume\), or shorten the message",
        rejection,
    ), rejection
    assert run.returncode == 1
    assert len(stub.requests) == 1
    assert run.of_type("assistant/message")[0] == {"turn": 1, "step": 1, "text": text}
    assert_sane(run)


def test_endless_line_is_refused(stub: StubServer, home: Path) -> None:
    """A line that never ends is refused at the decoder's cap (16 Mi characters), not held."""
    piece = b"y" * (1 << 20)
    # 48 MiB without a newline, then the connection stays open: only the cap ends the turn.
    stub.enqueue(RawStream((b"data: " + piece, *[piece] * 47), end=False))
    run_ = dsh(child_env(stub.url, home), stdin=b"one\n")  # a hang here is the test's timeout
    assert re.fullmatch(
        r"\[turn failed MALFORMED_RESPONSE\] DeepSeek API stream from "
        + re.escape(stub.url)
        + r" sent a line that never ends: a stream line passed 16,777,216 characters "
        r"without ending\n",
        run_.stdout,
    ), run_.stdout
    assert_sane(run_)


# TLS spoken to a plain-HTTP port: an https:// URL that should be http://. Not retried.


def test_tls_against_plain_http_is_a_transport_failure_not_retried(home: Path) -> None:
    with FaultServer(not_tls) as plain:
        base = f"https://127.0.0.1:{plain.port}"
        run = dsh(child_env(base, home), stdin=b"the fault\n" + OVERSIZED_LINE)
        connections = plain.connections
    lines = run.stdout.splitlines()
    assert re.fullmatch(
        rf"\[turn failed TRANSPORT\] DeepSeek API request to {re.escape(base)} failed: "
        r"\[SSL: WRONG_VERSION_NUMBER\] wrong version number \(_ssl\.c:\d+\)"
        + re.escape(next_step("TRANSPORT")),
        lines[0],
    ), run.stdout
    assert lines[1:] == [OVERSIZED_OUTCOME]  # the session goes on with the next line
    assert retry_notices(run.stderr) == []
    assert connections == 1
    assert run.returncode == 1
    assert_turn_failed(run, lines[0], "TRANSPORT")
    assert_sane(run)


# A proxy that wants credentials: a transport failure, and not retried (it will not change).


@pytest.mark.parametrize(("scheme", "variable"), [("http", "HTTP_PROXY"), ("https", "HTTPS_PROXY")])
def test_proxy_407_is_a_transport_failure_not_retried(
    home: Path, scheme: str, variable: str
) -> None:
    base = f"{scheme}://127.0.0.1:{closed_port()}"
    with FaultServer(answer_407) as proxy:
        proxy_url = f"http://proxyuser:{PROXY_SECRET}@127.0.0.1:{proxy.port}"
        run = dsh(
            child_env(base, home, **{variable: proxy_url}),
            stdin=b"the fault\n" + OVERSIZED_LINE,
        )
        connections = proxy.connections
    lines = run.stdout.splitlines()
    assert lines == [
        f"[turn failed TRANSPORT] DeepSeek API request to {base} failed: "
        f"407 Proxy Authentication Required{next_step('TRANSPORT')}",
        OVERSIZED_OUTCOME,  # the session goes on with the next line
    ], run.stdout
    assert retry_notices(run.stderr) == []
    assert connections == 1
    assert PROXY_SECRET not in run.stdout + run.stderr
    assert run.returncode == 1
    assert_turn_failed(run, lines[0], "TRANSPORT")
    assert_sane(run)


def test_base_url_with_an_impossible_port_is_a_startup_failure(home: Path) -> None:
    run = dsh(child_env("http://127.0.0.1:99999", home), stdin=b"hello\n")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith("dsh: startup failed: DEEPSEEK_BASE_URL ")
    assert run.stderr.count("\n") == 1
