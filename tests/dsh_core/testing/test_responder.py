"""The responder's tool-call streams, over real sockets: DeepSeek's ``delta.tool_calls`` shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dsh_core.testing import REASONING_NOT_PASSED_BACK, KeepAlives, StubServer, ToolCalls
from tests.dsh_core.testing.test_stub_server import (
    assistant_with_calls,
    content,
    payloads,
    post,
    send,
    tool_calls,
)

READ = ("read", '{"file_path": "demo.txt"}')
GLOB = ("glob", '{"pattern": "*.txt"}')


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    # The stub speaks plain HTTP: no CA bundle to load (40 ms a client).
    with httpx.Client(timeout=10, verify=False) as client:
        yield client


def deltas(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        p["choices"][0]["delta"]
        for p in payloads(response)
        if isinstance(p, dict) and p.get("choices")
    ]


def fragments(response: httpx.Response) -> list[dict[str, Any]]:
    """Every ``delta.tool_calls`` entry, in arrival order (one per event, as DeepSeek)."""
    out: list[dict[str, Any]] = []
    for delta in deltas(response):
        calls = delta.get("tool_calls")
        if calls is not None:
            assert len(calls) == 1
            out += calls
    return out


def respond(server: StubServer, client: httpx.Client, behaviour: ToolCalls) -> httpx.Response:
    server.enqueue(behaviour)
    response = post(client, server)
    assert response.status_code == 200
    return response


def test_each_call_opens_with_its_id_and_name_then_arguments_in_pieces(
    server: StubServer, client: httpx.Client
) -> None:
    response = respond(server, client, ToolCalls((READ, GLOB), fragment_size=5))
    got = fragments(response)
    assert got[0] == {
        "index": 0,
        "id": "call_1_0",
        "type": "function",
        "function": {"name": "read", "arguments": ""},
    }
    pieces = [f for f in got if f["index"] == 0][1:]
    assert all(
        set(f) == {"index", "function"} and set(f["function"]) == {"arguments"} for f in pieces
    )
    assert [f["function"]["arguments"] for f in pieces] == [
        READ[1][i : i + 5] for i in range(0, len(READ[1]), 5)
    ]
    assert [f["index"] for f in got] == sorted(f["index"] for f in got)  # one call after another
    assert tool_calls(response) == [
        {"id": "call_1_0", "name": "read", "arguments": READ[1]},
        {"id": "call_1_1", "name": "glob", "arguments": GLOB[1]},
    ]
    events = payloads(response)
    assert events[-1] == "[DONE]"
    assert events[-2]["usage"]["completion_tokens"] == len(got)
    assert events[-3]["choices"][0]["finish_reason"] == "tool_calls"


def test_interleaved_calls_take_turns(server: StubServer, client: httpx.Client) -> None:
    response = respond(server, client, ToolCalls((READ, GLOB), fragment_size=4, interleaved=True))
    order = [f["index"] for f in fragments(response)]
    assert order[:6] == [0, 1, 0, 1, 0, 1]
    assert [c["arguments"] for c in tool_calls(response)] == [READ[1], GLOB[1]]


def test_text_comes_before_the_calls(server: StubServer, client: httpx.Client) -> None:
    response = respond(server, client, ToolCalls((READ,), text="Let me look."))
    kinds = ["calls" if "tool_calls" in d else "text" for d in deltas(response)[:-1]]
    assert kinds == sorted(kinds, key=lambda kind: kind == "calls")
    assert content(response) == "Let me look."


def test_reasoning_comes_first(server: StubServer, client: httpx.Client) -> None:
    response = respond(
        server, client, ToolCalls((READ,), text="Reading.", reasoning="Hmm, a file.")
    )
    streamed = deltas(response)
    assert streamed[0] == {"role": "assistant", "content": None, "reasoning_content": ""}
    kinds = [
        "reasoning" if d.get("reasoning_content") else "calls" if "tool_calls" in d else "text"
        for d in streamed[1:-1]
    ]
    assert kinds == sorted(kinds, key=["reasoning", "text", "calls"].index)
    assert content(response, "reasoning_content") == "Hmm, a file."
    assert payloads(response)[-2]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 3


def test_a_length_finish_and_empty_arguments(server: StubServer, client: httpx.Client) -> None:
    response = respond(server, client, ToolCalls((("noop", ""),), finish_reason="length"))
    assert len(fragments(response)) == 1
    assert tool_calls(response) == [{"id": "call_1_0", "name": "noop", "arguments": ""}]
    assert payloads(response)[-3]["choices"][0]["finish_reason"] == "length"


def test_arguments_are_sent_exactly_as_given(server: StubServer, client: httpx.Client) -> None:
    arguments = json.dumps({"content": "é\u2028\n" + "x" * 1000}, ensure_ascii=False)
    response = respond(server, client, ToolCalls((("write", arguments),), fragment_size=7))
    assert tool_calls(response)[0]["arguments"] == arguments


def test_calls_after_keep_alives(server: StubServer, client: httpx.Client) -> None:
    server.enqueue(KeepAlives(2, 0.0, ToolCalls((READ,))))
    response = post(client, server)
    assert response.text.startswith(": keep-alive\n\n: keep-alive\n\ndata: ")
    assert [c["name"] for c in tool_calls(response)] == ["read"]


@pytest.mark.parametrize(("reasoning", "status"), [("Hmm.", 400), (None, 200)])
def test_calls_made_after_reasoning_need_it_back(
    server: StubServer, client: httpx.Client, reasoning: str | None, status: int
) -> None:
    calls = tool_calls(respond(server, client, ToolCalls((READ,), reasoning=reasoning)))
    user = {"role": "user", "content": "hello"}
    result = {"role": "tool", "tool_call_id": calls[0]["id"], "content": "Hello"}
    response = send(client, server, [user, assistant_with_calls(calls), result])
    assert response.status_code == status
    if status == 400:
        assert response.json()["error"]["message"] == REASONING_NOT_PASSED_BACK
