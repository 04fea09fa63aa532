"""StubServer: HTTP over real sockets, scripted behaviours, trigger words, tool steps, the CLI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from dsh_core.testing import (
    ESCAPE_TEXT,
    REASONING_NOT_PASSED_BACK,
    TOOL_MESSAGE_UNASKED,
    TOOL_MESSAGES_MISSING,
    TRIGGERS,
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
    RawStream,
    SlowStream,
    Stall,
    StubServer,
    ToolCalls,
    WrongContentType,
)
from dsh_core.testing.prompts import PromptCounter
from tests.support import wait_until

AUTH = {"Authorization": "Bearer sk-test"}


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    # A hang guard; and the stub speaks plain HTTP: no CA bundle to load (40 ms a client).
    with httpx.Client(timeout=30, verify=False) as client:
        yield client


def body(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": text}], **extra}


def post(client: httpx.Client, server: StubServer, text: str = "hello") -> httpx.Response:
    return client.post(f"{server.url}/chat/completions", json=body(text), headers=AUTH)


def payloads(response: httpx.Response) -> list[Any]:
    """The data of each event, JSON-decoded where it is JSON."""
    out: list[Any] = []
    for block in response.text.split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            try:
                out.append(json.loads(data))
            except ValueError:
                out.append(data)
    return out


def content(response: httpx.Response, field: str = "content") -> str:
    return "".join(
        p["choices"][0]["delta"].get(field) or ""
        for p in payloads(response)
        if isinstance(p, dict) and p.get("choices")
    )


def tool_calls(response: httpx.Response) -> list[dict[str, Any]]:
    """The streamed calls put together by index, as a client does: id, name, arguments."""
    calls: dict[int, dict[str, Any]] = {}
    for p in payloads(response):
        if not (isinstance(p, dict) and p.get("choices")):
            continue
        for fragment in p["choices"][0]["delta"].get("tool_calls") or []:
            call = calls.setdefault(fragment["index"], {"id": None, "name": None, "arguments": ""})
            call["id"] = fragment.get("id", call["id"])
            function = fragment.get("function", {})
            call["name"] = function.get("name", call["name"])
            call["arguments"] += function.get("arguments", "")
    return [calls[index] for index in sorted(calls)]


def send(
    client: httpx.Client, server: StubServer, messages: list[Any], **extra: Any
) -> httpx.Response:
    request = {"model": "deepseek-v4-flash", "messages": messages, **extra}
    return client.post(f"{server.url}/chat/completions", json=request, headers=AUTH)


def assistant_with_calls(
    calls: list[dict[str, Any]], reasoning: str | None = None, text: str = ""
) -> dict[str, Any]:
    """The assistant message a client sends back for ``calls``, arguments as received."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ],
    }
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


@dataclass
class Conversation:
    """A turn driven as an agent loop drives it: calls answered, step after step."""

    steps: list[list[tuple[str, str]]] = field(default_factory=list)
    """``(name, arguments)`` of the calls asked for at each step."""
    ids: list[str] = field(default_factory=list)
    answer: httpx.Response | None = None
    """The final answer; None when the step budget ran out first."""


def converse(
    client: httpx.Client,
    server: StubServer,
    text: str,
    result: Callable[[dict[str, Any]], str] = lambda call: f"1\tHello from {call['name']}\n2\t.",
    max_steps: int = 8,
) -> Conversation:
    messages: list[Any] = [{"role": "user", "content": text}]
    conversation = Conversation()
    for _ in range(max_steps):
        response = send(client, server, messages)
        assert response.status_code == 200, response.text
        calls = tool_calls(response)
        if not calls:
            conversation.answer = response
            break
        conversation.steps.append([(c["name"], c["arguments"]) for c in calls])
        conversation.ids += [c["id"] for c in calls]
        reasoning = content(response, "reasoning_content")
        messages.append(assistant_with_calls(calls, reasoning or None, content(response)))
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": result(c)} for c in calls]
    return conversation


# -- lifecycle and HTTP ----------------------------------------------------------------------


def test_url_and_context_manager() -> None:
    with StubServer() as server:
        assert server.url.startswith("http://127.0.0.1:")
        port = int(server.url.rsplit(":", 1)[1])
        assert port > 0
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass  # stopped: nothing listens any more


def test_start_and_stop_explicitly() -> None:
    server = StubServer()
    server.start()
    try:
        with pytest.raises(RuntimeError):
            server.start()
    finally:
        server.stop()
    server.stop()  # a second stop is harmless


def test_port_in_use_is_reported_by_start(server: StubServer) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        StubServer(port=port).start()


def test_default_answer(server: StubServer, client: httpx.Client) -> None:
    response = post(client, server, "hi there")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["x-request-id"] == "stub-1"
    assert content(response) == "You said: hi there"
    events = payloads(response)
    assert events[-1] == "[DONE]"
    # The prompt as sent, counted by the stub's stand-in tokenizer; nothing cached yet.
    sent = response.request.content
    assert events[-2]["usage"]["prompt_tokens"] == PromptCounter().count(sent).tokens > 0
    assert events[-2]["usage"]["prompt_cache_hit_tokens"] == 0
    assert events[-3]["choices"][0]["finish_reason"] == "stop"
    deltas = events[1:-3]
    assert all(len(e["choices"][0]["delta"]["content"]) <= 4 for e in deltas)


def test_records_requests_headers_and_connections(server: StubServer, client: httpx.Client) -> None:
    post(client, server, "one")
    post(client, server, "two")
    assert [r["messages"][0]["content"] for r in server.requests] == ["one", "two"]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert server.connections_opened == 1  # keep-alive
    server.requests.clear()  # a copy: the server's record is untouched
    assert len(server.requests) == 2


def test_chunked_request_body(server: StubServer, client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield json.dumps(body("streamed up")).encode()

    response = client.post(f"{server.url}/v1/chat/completions", content=chunks(), headers=AUTH)
    assert content(response) == "You said: streamed up"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/nope", 404), ("GET", "/chat/completions", 405)],
)
def test_routes(
    server: StubServer, client: httpx.Client, method: str, path: str, status: int
) -> None:
    assert client.request(method, server.url + path, headers=AUTH).status_code == status


def test_body_that_is_not_json(server: StubServer, client: httpx.Client) -> None:
    response = client.post(f"{server.url}/chat/completions", content=b"{", headers=AUTH)
    assert response.status_code == 400
    assert server.requests == []


def test_no_key_is_refused_and_the_script_kept(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Answer("scripted"))
    response = client.post(f"{server.url}/chat/completions", json=body())
    assert response.status_code == 401
    assert "error" in response.json()
    assert content(post(client, server)) == "scripted"


# -- scripted behaviours ---------------------------------------------------------------------


def test_queue_is_first_in_first_out_then_default(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Answer("first"), Answer("second"))
    assert [content(post(client, server)) for _ in range(3)] == [
        "first",
        "second",
        "You said: hello",
    ]


def test_answer_with_reasoning_and_finish_reason(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Answer("Yes.", reasoning="Hmm.", chunk_size=2, finish_reason="length"))
    response = post(client, server)
    events = payloads(response)
    assert events[0]["choices"][0]["delta"]["reasoning_content"] == ""
    assert content(response, "reasoning_content") == "Hmm."
    assert content(response) == "Yes."
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 2


def test_http_error(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(HttpError(429, "Rate limit reached", retry_after=3))
    response = post(client, server)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.headers["x-request-id"] == "stub-1"
    assert response.json()["error"]["message"] == "Rate limit reached"


def test_http_error_raw_body(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(HttpError(502, raw_body="<html>bad gateway</html>"))
    response = post(client, server)
    assert response.status_code == 502
    assert response.text == "<html>bad gateway</html>"


def test_keep_alives(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(KeepAlives(2, 0.0, Answer("ok")))
    response = post(client, server)
    assert response.text.startswith(": keep-alive\n\n: keep-alive\n\ndata: ")
    assert content(response) == "ok"


def test_stall_then_the_rest(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Stall(0.05, after_text="abc"))
    response = post(client, server)
    assert content(response) == "abc"
    assert payloads(response)[-1] == "[DONE]"


@pytest.mark.parametrize("behaviour", [Cut("abc"), RawStream((b"data: x\n\n",), end=False)])
def test_cut_mid_body(server: StubServer, client: httpx.Client, behaviour: Behaviour) -> None:
    server.enqueue(behaviour)
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        post(client, server)


def test_disconnect(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Disconnect())
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        post(client, server)


def test_malformed(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Malformed("{nope"))
    assert payloads(post(client, server))[1:] == ["{nope", "[DONE]"]


def test_in_band_error(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(InBandError("Content Exists Risk", after_text="ab", code="content_filter"))
    response = post(client, server)
    assert content(response) == "ab"
    assert payloads(response)[-1]["error"]["message"] == "Content Exists Risk"


def test_long_stream(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(LongStream(1000, events_per_chunk=7))
    response = post(client, server)
    events = payloads(response)
    assert sum(1 for e in events if isinstance(e, dict) and e.get("choices")) == 1002
    assert content(response).startswith("the quick brown fox")


def test_slow_stream(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(SlowStream("one two three", delay=0.01))
    assert content(post(client, server)) == "one two three"


def test_end_without_done(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(EndWithoutDone("partial"))
    response = post(client, server)
    assert content(response) == "partial"
    assert "[DONE]" not in response.text


def test_empty(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(Empty())
    response = post(client, server)
    assert content(response) == ""
    assert payloads(response)[-1] == "[DONE]"


def test_wrong_content_type(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(WrongContentType())
    response = post(client, server)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")


def test_raw_stream_chunks_arrive_as_sent(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(RawStream((b"data: a", b"bc\n", b"\n"), delay=0.01))
    with client.stream("POST", f"{server.url}/chat/completions", json=body(), headers=AUTH) as r:
        assert list(r.iter_raw()) == [b"data: a", b"bc\n", b"\n"]


def test_stop_ends_a_stalled_response(client: httpx.Client) -> None:
    server = StubServer()
    server.start()
    server.enqueue(Stall(60))
    with (
        client.stream("POST", f"{server.url}/chat/completions", json=body(), headers=AUTH) as r,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        server.stop()
        r.read()


def test_client_going_away_ends_the_response(server: StubServer) -> None:
    server.enqueue(Stall(60))
    with (
        httpx.Client() as client,
        client.stream("POST", f"{server.url}/chat/completions", json=body(), headers=AUTH),
    ):
        pass  # closed at once, the body unread
    # The server learns of the close asynchronously.
    wait_until(lambda: server.connections_closed >= 1, "the server to see the close")
    assert server.connections_closed == 1


# -- trigger words ---------------------------------------------------------------------------


TOOL_TRIGGERS = {
    "toolread",
    "toolbash",
    "tooledit",
    "toolfail",
    "toolmany",
    "toolchain",
    "toolsplit",
    "toolbad",
    "toolunknown",
    "toolthink",
    "toolloop",
    "toolhang",
    "tooltodo",
    "toolask",
    "tooljob",
    "toolfiles",
}


def test_every_trigger_has_a_one_line_description() -> None:
    assert set(TRIGGERS) - TOOL_TRIGGERS == {
        "think",
        "busy",
        "slow",
        "limit",
        "cut",
        "fail",
        "ratelimit",
        "malformed",
        "empty",
        "escape",
        "auth",
        "quota",
        "filter",
        "long",
    }
    assert all(description and "\n" not in description for description in TRIGGERS.values())


@pytest.mark.parametrize("word", sorted(TRIGGERS))
def test_each_trigger_changes_the_behaviour(server: StubServer, word: str) -> None:
    triggered = server._triggered(body(f"please {word.upper()} now"), b"{}")
    assert triggered != Answer(f"You said: please {word.upper()} now")


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("slow", SlowStream),
        ("busy", KeepAlives),
        ("long", LongStream),
        ("empty", Empty),
        ("malformed", Malformed),
        ("toolread", ToolCalls),
    ],
)
def test_trigger_behaviour_types(server: StubServer, word: str, expected: type) -> None:
    assert isinstance(server._triggered(body(word), b"{}"), expected)


@pytest.mark.parametrize("text", ["ratelimits", "unlimited", "cutting", "thinking", "fails"])
def test_triggers_are_whole_words(server: StubServer, client: httpx.Client, text: str) -> None:
    assert content(post(client, server, text)) == f"You said: {text}"


def test_the_first_trigger_in_the_message_wins(server: StubServer) -> None:
    assert isinstance(server._triggered(body("quota then think"), b"{}"), HttpError)
    assert isinstance(server._triggered(body("think then quota"), b"{}"), Answer)


def test_a_merged_message_counts_for_what_it_adds(server: StubServer, client: httpx.Client) -> None:
    # The loop joins a failed turn's message to the next one with a blank line.
    assert post(client, server, "auth").status_code == 401
    assert content(post(client, server, "auth\n\nhello again")) == "You said: hello again"
    assert post(client, server, "auth\n\nhello again\n\nquota").status_code == 402
    assert post(client, server, "auth").status_code == 401  # the same message again: a retry
    # A first message with blank lines of its own is all new.
    text = "review this\n\ndiff --git a b\n+line\n"
    assert content(post(client, server, text)) == f"You said: {text}"


def test_only_the_last_user_message_counts(server: StubServer, client: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "auth"},
        {"role": "assistant", "content": "quota"},
        {"role": "user", "content": "plain"},
    ]
    response = client.post(
        f"{server.url}/chat/completions", json={"model": "m", "messages": messages}, headers=AUTH
    )
    assert content(response) == "You said: plain"


@pytest.mark.parametrize(
    ("word", "status", "message"),
    [
        ("auth", 401, "Authentication Fails, Your api key is invalid"),
        ("quota", 402, "Insufficient Balance"),
        ("fail", 503, "Server overloaded, please try again later."),
    ],
)
def test_status_triggers(
    server: StubServer, client: httpx.Client, word: str, status: int, message: str
) -> None:
    response = post(client, server, word)
    assert response.status_code == status
    assert response.json()["error"]["message"] == message


def test_ratelimit_trigger_refuses_once_then_answers(
    server: StubServer, client: httpx.Client
) -> None:
    first = post(client, server, "ratelimit")
    assert first.status_code == 429 and first.headers["retry-after"] == "1"
    assert content(post(client, server, "ratelimit")) == "You said: ratelimit"


def test_escape_trigger(server: StubServer, client: httpx.Client) -> None:
    text = content(post(client, server, "escape"))
    assert text == ESCAPE_TEXT
    assert "\x1b[2J" in text and "\x1b]0;pwned\x07" in text and "\u202e" in text


def test_think_limit_cut_filter_triggers(server: StubServer, client: httpx.Client) -> None:
    assert content(post(client, server, "think"), "reasoning_content")
    limited = payloads(post(client, server, "limit"))
    assert limited[-3]["choices"][0]["finish_reason"] == "length"
    assert "error" in payloads(post(client, server, "filter"))[-1]
    with pytest.raises(httpx.RemoteProtocolError):
        post(client, server, "cut")


# -- tool steps ------------------------------------------------------------------------------

READ = ("read", '{"file_path": "demo.txt"}')
GLOB = ("glob", '{"pattern": "*.txt"}')
GREP = ("grep", '{"pattern": "Hello"}')
EDIT = (
    "edit",
    '{"file_path": "demo.txt", "old_string": "Hello", "new_string": "Hello again"}',
)


@pytest.mark.parametrize(
    ("word", "steps"),
    [
        ("toolread", [[READ]]),
        ("toolbash", [[("bash", '{"command": "ls -la"}')]]),
        ("tooledit", [[READ], [EDIT]]),
        ("toolfail", [[("read", '{"file_path": "no-such-file.txt"}')]]),
        ("toolmany", [[READ, GLOB, GREP]]),
        ("toolchain", [[READ], [GLOB], [GREP]]),
        ("toolsplit", [[READ]]),
        ("toolbad", [[("read", '{"file_path": "demo.txt"')]]),
        ("toolunknown", [[("launch_missiles", "{}")]]),
        ("toolthink", [[READ]]),
        ("toolhang", [[("bash", '{"command": "sleep 1000"}')]]),
    ],
)
def test_tool_triggers_ask_step_by_step_then_quote_the_results(
    server: StubServer, client: httpx.Client, word: str, steps: list[list[tuple[str, str]]]
) -> None:
    turn = converse(client, server, f"please {word}")
    assert turn.steps == steps
    assert turn.answer is not None
    quotes = "; ".join(f"[{name}] 1\tHello from {name}..." for step in steps for name, _ in step)
    assert content(turn.answer) == f"Tool results: {quotes}"
    assert len(server.requests) == len(steps) + 1


def test_tool_results_reach_the_answer_whatever_they_say(
    server: StubServer, client: httpx.Client
) -> None:
    turn = converse(client, server, "toolfail", result=lambda c: "Error: no such file")
    assert turn.answer is not None
    assert content(turn.answer) == "Tool results: [read] Error: no such file"


def test_toolloop_asks_for_the_same_call_at_every_step(
    server: StubServer, client: httpx.Client
) -> None:
    turn = converse(client, server, "toolloop", max_steps=6)
    assert turn.answer is None
    assert turn.steps == [[READ]] * 6
    assert len(set(turn.ids)) == 6  # a new id each step


def test_call_ids_are_unique_across_turns(server: StubServer, client: httpx.Client) -> None:
    ids = converse(client, server, "toolmany").ids + converse(client, server, "toolchain").ids
    assert len(ids) == len(set(ids)) == 6
    assert all(call_id.startswith("call_") for call_id in ids)


def test_toolsplit_sends_one_character_per_fragment(
    server: StubServer, client: httpx.Client
) -> None:
    fragments = [
        fragment["function"]["arguments"]
        for p in payloads(post(client, server, "toolsplit"))
        if isinstance(p, dict) and p.get("choices")
        for fragment in p["choices"][0]["delta"].get("tool_calls") or []
        if "id" not in fragment
    ]
    assert "".join(fragments) == READ[1]
    assert {len(fragment) for fragment in fragments} == {1}


def test_toolthink_requires_its_reasoning_back(server: StubServer, client: httpx.Client) -> None:
    user = {"role": "user", "content": "toolthink"}
    first = post(client, server, "toolthink")
    reasoning = content(first, "reasoning_content")
    assert reasoning
    calls = tool_calls(first)
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "Hello"} for c in calls]

    dropped = send(client, server, [user, assistant_with_calls(calls), *results])
    assert dropped.status_code == 400
    assert dropped.json()["error"]["message"] == REASONING_NOT_PASSED_BACK

    for kept in (reasoning, ""):  # the reasoning, or at least the field
        answer = send(client, server, [user, assistant_with_calls(calls, kept), *results])
        assert answer.status_code == 200
        assert content(answer) == "Tool results: [read] Hello"


def test_a_request_that_ends_with_results_is_answered_with_them(
    server: StubServer, client: httpx.Client
) -> None:
    server.enqueue(ToolCalls((("echo", '{"text": "hi"}'),)))
    calls = tool_calls(post(client, server, "say hi"))
    assert [(c["id"], c["name"]) for c in calls] == [("call_1_0", "echo")]
    user = {"role": "user", "content": "say hi"}
    result = {"role": "tool", "tool_call_id": "call_1_0", "content": "hi"}
    answer = send(client, server, [user, assistant_with_calls(calls), result])
    assert content(answer) == "Tool results: [echo] hi"


# -- DeepSeek's 400 rules, through the server ------------------------------------------------

CALL = {"id": "call_x", "type": "function", "function": {"name": "read", "arguments": "{}"}}
USER = {"role": "user", "content": "hello"}
CALLING = {"role": "assistant", "content": "", "tool_calls": [CALL]}
ANSWER = {"role": "tool", "tool_call_id": "call_x", "content": "ok"}


@pytest.mark.parametrize(
    ("messages", "extra", "message"),
    [
        ([USER, CALLING], {}, TOOL_MESSAGES_MISSING),
        ([USER, CALLING, USER, ANSWER], {}, TOOL_MESSAGES_MISSING),
        ([USER, ANSWER], {}, TOOL_MESSAGE_UNASKED),
        ([USER, CALLING, ANSWER], {"thinking": {"type": "enabled"}}, REASONING_NOT_PASSED_BACK),
    ],
)
def test_a_broken_history_is_refused_as_deepseek_does(
    server: StubServer,
    client: httpx.Client,
    messages: list[Any],
    extra: dict[str, Any],
    message: str,
) -> None:
    server.enqueue(Answer("scripted"))
    response = send(client, server, messages, **extra)
    assert response.status_code == 400
    assert response.headers["x-request-id"] == "stub-1"
    assert response.json() == {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    assert server.requests == [{"model": "deepseek-v4-flash", "messages": messages, **extra}]
    # The refused request left the script for the next valid one.
    assert content(send(client, server, [USER, CALLING, ANSWER])) == "scripted"


def test_a_valid_history_with_tool_calls_is_answered(
    server: StubServer, client: httpx.Client
) -> None:
    thinking_calling = {**CALLING, "reasoning_content": ""}
    response = send(client, server, [USER, thinking_calling, ANSWER], thinking={"type": "enabled"})
    assert response.status_code == 200
    assert content(response) == "Tool results: [read] ok"


def test_a_key_is_checked_before_the_history(server: StubServer, client: httpx.Client) -> None:
    request = {"model": "m", "messages": [USER, CALLING]}
    response = client.post(f"{server.url}/chat/completions", json=request)
    assert response.status_code == 401


# -- the command line ------------------------------------------------------------------------


def test_main_serves_until_interrupted() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_core.testing.stub_server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith("stub server listening on http://127.0.0.1:")
        url = first.rsplit(" ", 1)[1]
        banner = [process.stdout.readline() for _ in range(len(TRIGGERS) + 1)]
        assert [line.split()[0] for line in banner[1:]] == list(TRIGGERS)
        response = httpx.post(f"{url}/chat/completions", json=body("cli"), headers=AUTH, timeout=30)
        assert content(response) == "You said: cli"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0  # a hang guard
        assert process.stderr is not None
        assert process.stderr.read() == ""  # not even runpy's double-import warning
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


# -- Held: a response that waits for the test ------------------------------------------------


def test_held_waits_for_its_gate_without_blocking_other_requests(server: StubServer) -> None:
    gate = threading.Event()
    server.enqueue(Held(gate, Answer("after the gate")), Answer("meanwhile"))
    held: list[httpx.Response] = []

    def first() -> None:
        with httpx.Client(timeout=30) as client:  # a hang guard
            held.append(post(client, server))

    thread = threading.Thread(target=first)
    thread.start()
    try:
        wait_until(lambda: len(server.requests) == 1, "the held request to arrive")
        # The server's loop still answers: the wait does not block it.
        with httpx.Client(timeout=30) as client:
            assert content(post(client, server)) == "meanwhile"
        assert not held  # answered after a later request: it is still held
    finally:
        gate.set()
        thread.join(timeout=30)
    assert content(held[0]) == "after the gate"


def test_held_plays_a_status_or_the_rest_of_a_stream(
    server: StubServer, client: httpx.Client
) -> None:
    released = threading.Event()
    released.set()
    server.enqueue(
        Held(released, HttpError(503, "later")),
        KeepAlives(1, then=Held(released, Answer("kept alive"))),
    )
    response = post(client, server)
    assert response.status_code == 503
    assert response.json()["error"]["message"] == "later"
    response = post(client, server)
    assert response.text.startswith(": keep-alive")
    assert content(response) == "kept alive"


def test_stop_ends_a_response_held_for_ever() -> None:
    server = StubServer()
    server.start()
    server.enqueue(Held(threading.Event(), Answer("never")))
    failures: list[BaseException] = []

    def held() -> None:
        with httpx.Client(timeout=30) as client:  # a hang guard
            try:
                post(client, server)
            except httpx.HTTPError as exc:
                failures.append(exc)

    thread = threading.Thread(target=held)
    thread.start()
    try:
        wait_until(lambda: len(server.requests) == 1, "the held request to arrive")
        server.stop()  # returns: the wait is cancelled with the connection
    finally:
        thread.join(timeout=30)
    assert [type(exc) for exc in failures] == [httpx.RemoteProtocolError]
