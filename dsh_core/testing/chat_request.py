"""Reading a chat-completions request body as the stub server receives it: plain JSON, any shape.

A client under test may send anything, so every reader here tolerates a missing or mistyped
field (it reads as absent) rather than raising.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "call_ids",
    "content_text",
    "last_user_index",
    "last_user_text",
    "messages_of",
    "thinking_enabled",
    "thinking_mode",
    "tool_calls_of",
]


def messages_of(payload: Any) -> list[dict[str, Any]]:
    """The request's messages that are JSON objects, in order."""
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if not isinstance(messages, list):
        return []
    return [message for message in messages if isinstance(message, dict)]


def last_user_index(messages: list[dict[str, Any]]) -> int:
    """The index of the last ``user`` message; -1 when there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def last_user_text(payload: Any) -> str:
    """The text of the last ``user`` message; empty when there is none."""
    messages = messages_of(payload)
    i = last_user_index(messages)
    return content_text(messages[i].get("content")) if i >= 0 else ""


def content_text(content: Any) -> str:
    """A message's content as text: a string, or the ``text`` of its parts (OpenAI's array form)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def tool_calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an assistant message (empty for any other message)."""
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return []
    return [call for call in calls if isinstance(call, dict)]


def call_ids(message: dict[str, Any]) -> list[str]:
    """The ids of an assistant message's tool calls (a call without a string id reads as ``""``)."""
    return [
        call["id"] if isinstance(call.get("id"), str) else "" for call in tool_calls_of(message)
    ]


def thinking_enabled(payload: Any) -> bool:
    """Whether the request asks for thinking mode: ``"thinking": {"type": "enabled"}``."""
    return thinking_mode(payload) == "enabled"


def thinking_mode(payload: Any) -> str | None:
    """``thinking.type`` as the request gives it (``enabled``, ``disabled``), else None."""
    thinking = payload.get("thinking") if isinstance(payload, dict) else None
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    return kind if isinstance(kind, str) else None
