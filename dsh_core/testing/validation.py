"""DeepSeek's two 400 rules for a conversation with tool calls, as a pure check of a request body.

1. An assistant message with ``tool_calls`` is followed immediately by one ``tool`` message per
   call id, nothing between them; a ``tool`` message answers a call of the message before it.
2. In thinking mode, an assistant message with ``tool_calls`` carries its ``reasoning_content``
   (a string, ``""`` allowed) in every later request.

The texts are the ones DeepSeek (and, for an unasked tool message, OpenAI) answer with, so a
client that breaks a rule against the stub fails as it would against the real API::

    problem = validate_request(payload, reasoned_call_ids={"call_3_0"})
    if problem is not None:
        ...  # HTTP 400 with problem as error.message
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from .chat_request import call_ids, messages_of, thinking_enabled

__all__ = [
    "REASONING_NOT_PASSED_BACK",
    "TOOL_MESSAGES_MISSING",
    "TOOL_MESSAGE_UNASKED",
    "validate_request",
]

TOOL_MESSAGES_MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
)
"""DeepSeek's text: a call left unanswered, or another message between the calls and results."""

TOOL_MESSAGE_UNASKED = (
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'."
)
"""OpenAI's text: a ``tool`` message that answers no call of the message before it."""

REASONING_NOT_PASSED_BACK = (
    'The "reasoning_content" in the thinking mode must be passed back to the API.'
)
"""DeepSeek's text: a tool-calling assistant message without its reasoning, in thinking mode."""


def validate_request(payload: Any, reasoned_call_ids: Container[str] = frozenset()) -> str | None:
    """The error message for the first rule the request breaks, in message order; else None.

    Thinking mode is the request's ``"thinking": {"type": "enabled"}``, or, for one message,
    a call id among ``reasoned_call_ids`` (calls the server streamed after reasoning).
    """
    thinking = thinking_enabled(payload)
    # The ids of the last tool-calling message not answered yet; None once another message came.
    unanswered: list[str] | None = None
    for message in messages_of(payload):
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if unanswered is None or call_id not in unanswered:
                return TOOL_MESSAGE_UNASKED
            unanswered.remove(call_id)
            continue
        if unanswered:
            return TOOL_MESSAGES_MISSING
        ids = call_ids(message)
        needs_reasoning = thinking or any(call_id in reasoned_call_ids for call_id in ids)
        if ids and needs_reasoning and not isinstance(message.get("reasoning_content"), str):
            return REASONING_NOT_PASSED_BACK
        unanswered = ids if ids else None
    return TOOL_MESSAGES_MISSING if unanswered else None
