"""The stub's prompt accounting: raw messages, tokens, the cache, the context window, thinking."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dsh_core.agent.compaction import SUMMARY_REQUEST
from dsh_core.testing import Answer, HttpError, StubServer
from dsh_core.testing.prompts import CACHE_UNIT, PromptCounter, count_tokens, raw_fields, raw_items
from dsh_core.testing.server import context_length_message
from dsh_core.testing.triggers import TRIGGERS, stub_summary

AUTH = {"Authorization": "Bearer sk-test"}


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def post(server: StubServer, payload: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/chat/completions", json=payload, headers=AUTH)


def answer(response: httpx.Response) -> str:
    """The text a streamed answer carries."""
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line[6:7] == "{"]
    return "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )


def request(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages), "stream": True, **extra}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_raw_fields_and_items_keep_the_bytes_as_sent() -> None:
    body = '{ "model" :"m",\n "messages": [ {"role": "user", "content": "a ] } [ \\" b"} ,{"x":1}]}'
    fields = raw_fields(body)
    assert fields["model"] == '"m"'
    assert raw_items(fields["messages"]) == [
        '{"role": "user", "content": "a ] } [ \\" b"}',
        '{"x":1}',
    ]
    assert raw_fields("not json") == {} and raw_items("[1, ") == ["1"]


def test_count_tokens_is_a_rough_bpe() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2  # a word with the space before it is one token
    assert count_tokens("internationalisation") == 4  # six letters a token
    assert count_tokens("12345") == 2 and count_tokens("a, b.") == 4
    assert count_tokens("你好") == 2


def test_a_cached_prefix_is_a_hit_in_whole_units() -> None:
    counter = PromptCounter()
    long = user("word " * 400)
    first = counter.count(json.dumps(request(long, user("one"))).encode())
    assert (first.cache_hit, first.extends_previous) == (0, None)
    counter.remember(first)
    second = counter.count(json.dumps(request(long, user("one"), user("two"))).encode())
    assert second.extends_previous is True
    assert second.cache_hit % CACHE_UNIT == 0
    assert first.tokens - CACHE_UNIT < second.cache_hit <= first.tokens
    other = counter.count(json.dumps(request(user("another"), long)).encode())
    assert (other.cache_hit, other.extends_previous) == (0, False)


def test_a_request_over_the_window_is_refused_in_deepseek_s_words(server: StubServer) -> None:
    server.enqueue(Answer("queued for a request that fits"))
    server.context_window = 100
    response = post(server, request(user("word " * 200), max_tokens=50))
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    tokens = server.served[-1].prompt.tokens
    assert message == context_length_message(100, tokens, 50)
    assert message.startswith("This model's maximum context length is 100 tokens. However, you")
    assert server.served[-1].refused == message
    server.context_window = None
    assert answer(post(server, request(user("short")))) == "queued for a request that fits"


def test_usage_reports_the_count_and_the_cache(server: StubServer) -> None:
    messages = [user("word " * 300)]
    post(server, request(*messages))
    text = post(server, request(*messages, {"role": "assistant", "content": "ok"}, user("go"))).text
    usage = next(json.loads(line[6:])["usage"] for line in text.splitlines() if '"usage"' in line)
    served = server.served[-1].prompt
    assert usage["prompt_tokens"] == served.tokens
    assert usage["prompt_cache_hit_tokens"] == served.cache_hit > 0
    assert usage["prompt_cache_miss_tokens"] == served.tokens - served.cache_hit


@pytest.mark.parametrize(("mode", "reasons"), [("enabled", True), ("disabled", False)])
def test_the_thinking_mode_decides_whether_an_answer_reasons(
    server: StubServer, mode: str, reasons: bool
) -> None:
    for word in ("think", "hello"):  # one scripted with reasoning, one without
        text = post(server, request(user(word), thinking={"type": mode})).text
        assert ('"reasoning_content":"' in text.replace('"reasoning_content":""', "")) is reasons


def test_a_summary_request_is_answered_from_its_own_queue(server: StubServer) -> None:
    server.enqueue(Answer("for the next step"))
    server.enqueue_summaries(HttpError(503, "no summary now"))
    asked = request(user("toolread"), {"role": "assistant", "content": "x"}, user(SUMMARY_REQUEST))
    assert post(server, asked).status_code == 503
    assert answer(post(server, asked)).startswith("Summary by the stub server of 2 messages")
    assert answer(post(server, request(user("hi")))) == "for the next step"
    assert [s.summary for s in server.served] == [True, True, False]


def test_the_stub_summary_holds_no_trigger_word() -> None:
    text = stub_summary([user("toolread long fail"), user(SUMMARY_REQUEST)]).lower()
    assert not any(f" {word} " in f" {text} " for word in TRIGGERS)
