"""DeepSeek's 400 rules for tool calls, as a pure function of the request body."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core.testing.validation import (
    REASONING_NOT_PASSED_BACK,
    TOOL_MESSAGE_UNASKED,
    TOOL_MESSAGES_MISSING,
    validate_request,
)

THINKING = {"thinking": {"type": "enabled"}}


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}


def calling(*ids: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [call(i) for i in ids], **extra}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


SYSTEM = {"role": "system", "content": "be brief"}
ANSWER = {"role": "assistant", "content": "done"}


def check(*messages: dict[str, Any], **extra: Any) -> str | None:
    return validate_request({"model": "m", "messages": list(messages), **extra})


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [user()],
        [SYSTEM, user(), ANSWER, user()],
        [user(), calling("a"), result("a")],
        [user(), calling("a"), result("a"), ANSWER, user()],
        [user(), calling("a", "b"), result("a"), result("b"), calling("c"), result("c")],
        [user(), calling("a", "b"), result("b"), result("a")],  # any order, all answered
        [user(), {**calling(), "tool_calls": []}, user()],  # no calls is no calling message
    ],
)
def test_valid_histories(messages: list[dict[str, Any]]) -> None:
    assert check(*messages) is None


@pytest.mark.parametrize(
    "messages",
    [
        [user(), calling("a")],  # the request ends before the results
        [user(), calling("a", "b"), result("a")],  # one id unanswered
        [user(), calling("a", "b"), result("a"), user()],
        [user(), calling("a"), SYSTEM, result("a")],  # something between calls and results
        [user(), calling("a"), user("more"), result("a")],
        [user(), calling("a"), ANSWER, result("a")],
    ],
)
def test_calls_must_be_answered_at_once(messages: list[dict[str, Any]]) -> None:
    assert check(*messages) == TOOL_MESSAGES_MISSING


@pytest.mark.parametrize(
    "messages",
    [
        [user(), result("a")],  # no calls at all
        [user(), ANSWER, result("a")],
        [user(), calling("a"), result("b")],  # an id that was not asked for
        [user(), calling("a"), result("a"), result("a")],  # answered twice
        [user(), calling("a"), result("a"), ANSWER, result("a")],  # an earlier message's call
        [user(), calling("a"), {"role": "tool", "content": "no id"}],
    ],
)
def test_a_tool_message_must_answer_the_calls_before_it(messages: list[dict[str, Any]]) -> None:
    assert check(*messages) == TOOL_MESSAGE_UNASKED


def test_thinking_mode_needs_the_reasoning_of_calling_messages() -> None:
    assert check(user(), calling("a"), result("a"), **THINKING) == REASONING_NOT_PASSED_BACK
    none = calling("a", reasoning_content=None)
    assert check(user(), none, result("a"), **THINKING) == REASONING_NOT_PASSED_BACK
    for reasoning in ("", "I should read it."):
        kept = calling("a", reasoning_content=reasoning)
        assert check(user(), kept, result("a"), **THINKING) is None
    # Answers without calls need no reasoning, even in thinking mode.
    assert check(user(), ANSWER, user(), **THINKING) is None


@pytest.mark.parametrize("thinking", [None, {"type": "disabled"}, "enabled", {"type": True}])
def test_out_of_thinking_mode_reasoning_is_optional(thinking: Any) -> None:
    assert check(user(), calling("a"), result("a"), thinking=thinking) is None


def test_calls_the_server_made_after_reasoning_need_it_whatever_the_mode() -> None:
    body = {"messages": [user(), calling("a"), result("a"), calling("b"), result("b")]}
    assert validate_request(body, {"b"}) == REASONING_NOT_PASSED_BACK
    assert validate_request(body, {"other"}) is None


def test_the_first_broken_rule_in_message_order_wins() -> None:
    assert check(user(), result("x"), calling("a"), **THINKING) == TOOL_MESSAGE_UNASKED
    assert check(user(), calling("a"), user(), result("x")) == TOOL_MESSAGES_MISSING
    assert check(user(), calling("a"), **THINKING) == REASONING_NOT_PASSED_BACK


@pytest.mark.parametrize(
    "payload",
    [None, [], "text", {}, {"messages": None}, {"messages": "hi"}, {"messages": [1, None, "x"]}],
)
def test_any_shape_of_body_is_read_without_raising(payload: Any) -> None:
    assert validate_request(payload) is None


def test_calls_without_a_list_or_an_id_read_as_absent_or_unanswerable() -> None:
    assert check(user(), {"role": "assistant", "tool_calls": "x"}, user()) is None
    no_id = {"role": "assistant", "tool_calls": [{"function": {"name": "read"}}]}
    assert check(user(), no_id, result("a")) == TOOL_MESSAGE_UNASKED
