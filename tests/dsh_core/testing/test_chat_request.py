"""Reading a chat-completions request body of any shape."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core.testing.chat_request import (
    call_ids,
    content_text,
    last_user_index,
    last_user_text,
    messages_of,
    thinking_enabled,
    tool_calls_of,
)


def test_messages_of_keeps_only_objects() -> None:
    assert messages_of({"messages": [{"role": "user"}, 1, None]}) == [{"role": "user"}]
    assert messages_of({"messages": "x"}) == messages_of([]) == messages_of(None) == []


def test_the_last_user_message() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": [{"type": "text", "text": "thr"}, {"text": "ee"}, 5]},
        {"role": "tool", "content": "four"},
    ]
    assert last_user_index(messages) == 2
    assert last_user_text({"messages": messages}) == "three"
    assert last_user_index([{"role": "system"}]) == -1
    assert last_user_text({"messages": [{"role": "system", "content": "x"}]}) == ""


@pytest.mark.parametrize(("content", "text"), [("a", "a"), (None, ""), (3, ""), ([], "")])
def test_content_text(content: Any, text: str) -> None:
    assert content_text(content) == text


def test_tool_calls_only_of_assistant_messages() -> None:
    calls = [{"id": "a"}, "junk", {"id": 5}, {}]
    assert tool_calls_of({"role": "assistant", "tool_calls": calls}) == [{"id": "a"}, {"id": 5}, {}]
    assert tool_calls_of({"role": "user", "tool_calls": calls}) == []
    assert tool_calls_of({"role": "assistant", "tool_calls": None}) == []
    assert call_ids({"role": "assistant", "tool_calls": calls}) == ["a", "", ""]


@pytest.mark.parametrize(
    ("payload", "enabled"),
    [
        ({"thinking": {"type": "enabled"}}, True),
        ({"thinking": {"type": "disabled"}}, False),
        ({"thinking": "enabled"}, False),
        ({}, False),
        (None, False),
    ],
)
def test_thinking_enabled(payload: Any, enabled: bool) -> None:
    assert thinking_enabled(payload) is enabled
