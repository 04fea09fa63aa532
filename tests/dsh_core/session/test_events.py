"""The session log's records: what each writes, key by key, and what each reads back."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core.errors import FailureRecord
from dsh_core.model.seam import ToolCall, Usage
from dsh_core.session.events import (
    ApprovalDecided,
    AssistantStep,
    Record,
    RetryScheduled,
    StepUsage,
    SystemPrompt,
    ToolCallStarted,
    ToolOutput,
    ToolResult,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    UserText,
    parse_record,
    record_type,
)

CALL = ToolCall("call_1", "read", '{"file_path": "a.txt"}')
FAILURE = FailureRecord("RATE_LIMIT", "busy", status=429, retry_after=2.5)

# Each record, and its data exactly as a line holds it (key order included: the fixtures
# replay byte for byte).
WRITTEN: list[tuple[Record, dict[str, Any]]] = [
    (TurnStart(1, "deepseek-v4-flash"), {"turn": 1, "model": "deepseek-v4-flash"}),
    (UserText(1, "hi"), {"turn": 1, "text": "hi"}),
    (SystemPrompt("You are dsh."), {"text": "You are dsh."}),
    (AssistantStep(1, 1, "Hello"), {"turn": 1, "step": 1, "text": "Hello"}),
    (
        AssistantStep(1, 2, "", "thought", (CALL,), interrupted=True),
        {
            "turn": 1,
            "step": 2,
            "text": "",
            "reasoning": "thought",
            "tool_calls": [{"id": "call_1", "name": "read", "arguments": CALL.arguments}],
            "interrupted": True,
        },
    ),
    (
        ApprovalDecided(1, "call_1", "allowed-always"),
        {"turn": 1, "call_id": "call_1", "outcome": "allowed-always"},
    ),
    (
        ApprovalDecided(1, "call_2", "rejected", "use uv instead"),
        {"turn": 1, "call_id": "call_2", "outcome": "rejected", "reason": "use uv instead"},
    ),
    (
        ToolCallStarted(1, 1, "call_1", "read", "{}"),
        {"turn": 1, "step": 1, "call_id": "call_1", "name": "read", "arguments": "{}"},
    ),
    (
        ToolResult(1, 1, "call_1", ToolOutput("ok")),
        {"turn": 1, "step": 1, "call_id": "call_1", "is_error": False, "content": "ok"},
    ),
    (
        ToolResult(1, 1, "c", ToolOutput("Error: x\ntail", FailureRecord("TOOL_FAILED", "x"))),
        {
            "turn": 1,
            "step": 1,
            "call_id": "c",
            "is_error": True,
            "content": "Error: x\ntail",
            "error": {"code": "TOOL_FAILED", "message": "x"},
        },
    ),
    (
        ToolResult(2, 3, "c", ToolOutput("out", None, 0, True, "/o/c.txt")),
        {
            "turn": 2,
            "step": 3,
            "call_id": "c",
            "is_error": False,
            "content": "out",
            "exit_code": 0,
            "truncated": True,
            "output_file": "/o/c.txt",
        },
    ),
    (
        StepUsage(1, 1, Usage(5, 2)),
        {
            "turn": 1,
            "step": 1,
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
        },
    ),
    (
        RetryScheduled(1, 1, 1, 4, 0.5, FAILURE),
        {
            "turn": 1,
            "step": 1,
            "attempt": 1,
            "max_retries": 4,
            "delay": 0.5,
            "code": "RATE_LIMIT",
            "message": "busy",
            "status": 429,
            "retry_after": 2.5,
        },
    ),
    (
        TurnEnd(1, "error", FailureRecord("AUTH", "bad key", status=401)),
        {
            "turn": 1,
            "reason": {"kind": "error", "code": "AUTH", "message": "bad key", "status": 401},
        },
    ),
    (
        TurnEnd(2, "aborted", reason="user"),
        {"turn": 2, "reason": {"kind": "aborted", "reason": "user"}},
    ),
]


@pytest.mark.parametrize(("record", "data"), WRITTEN, ids=lambda v: type(v).__name__)
def test_what_each_record_writes_and_reads_back(record: Record, data: dict[str, Any]) -> None:
    written = record.to_data()
    assert written == data
    assert list(written) == list(data)  # in this order
    assert parse_record(record_type(record), data) == record


def test_every_record_type_is_covered() -> None:
    written = {record_type(record) for record, _ in WRITTEN}
    assert written == {
        "turn/start",
        "user/message",
        "system/prompt",
        "assistant/message",
        "approval/decided",
        "tool/call",
        "tool/result",
        "usage",
        "retry",
        "turn/end",
    }


def test_lines_from_before_steps_read_as_step_one() -> None:
    assert parse_record("assistant/message", {"turn": 3, "text": "a"}) == AssistantStep(3, 1, "a")
    assert parse_record("usage", {"turn": 3, "prompt_tokens": 9}) == StepUsage(3, 1, Usage(9))
    retry = {"turn": 3, "attempt": 1, "max_retries": 4, "delay": 1, "code": "SERVER"}
    assert parse_record("retry", retry) == RetryScheduled(
        3, 1, 1, 4, 1.0, FailureRecord("SERVER", "")
    )
    assert parse_record("turn/start", {"turn": 3}) == TurnStart(3, "")


def test_a_missing_or_null_optional_field_takes_its_default() -> None:
    data = {"turn": 1, "step": 1, "text": "a", "reasoning": None, "tool_calls": None}
    assert parse_record("assistant/message", data) == AssistantStep(1, 1, "a")


@pytest.mark.parametrize(
    ("kind", "data", "why"),
    [
        ("user/message", {"text": "hi"}, "no turn"),
        ("user/message", {"turn": "1", "text": "hi"}, "turn is not an integer"),
        ("user/message", {"turn": True, "text": "hi"}, "turn is not an integer"),
        ("user/message", {"turn": 1, "text": 7}, "text is not a string"),
        ("assistant/message", {"turn": 1, "step": None, "text": ""}, "step is not an integer"),
        (
            "assistant/message",
            {"turn": 1, "text": "", "tool_calls": {}},
            "tool_calls is not a list",
        ),
        ("assistant/message", {"turn": 1, "text": "", "tool_calls": [1]}, "not an object"),
        ("assistant/message", {"turn": 1, "text": "", "interrupted": 1}, "not true or false"),
        ("approval/decided", {"turn": 1, "call_id": "c", "outcome": "maybe"}, "unknown outcome"),
        ("retry", {"turn": 1, "attempt": 1, "max_retries": 1, "delay": "1"}, "not a number"),
        (
            "tool/result",
            {"turn": 1, "step": 1, "call_id": "c", "is_error": True, "content": "", "error": "x"},
            "error is not an object",
        ),
        (
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "call_id": "c",
                "is_error": False,
                "content": "",
                "exit_code": 1.5,
            },
            "exit_code is not an integer",
        ),
        ("turn/end", {"turn": 1}, "without a reason object"),
    ],
)
def test_a_known_type_with_wrong_fields_says_what_is_wrong(
    kind: str, data: dict[str, Any], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        parse_record(kind, data)


def test_is_error_decides_whether_a_result_failed() -> None:
    # A hand-edited line may carry one without the other: it reads as it renders.
    failed = {"turn": 1, "step": 1, "call_id": "c", "is_error": True, "content": "Error: no"}
    result = parse_record("tool/result", failed)
    assert isinstance(result, ToolResult) and result.is_error
    assert result.error == FailureRecord("TOOL_FAILED", "Error: no")
    fine = {**failed, "is_error": False, "error": {"code": "TOOL_FAILED", "message": "no"}}
    result = parse_record("tool/result", fine)
    assert isinstance(result, ToolResult) and not result.is_error and result.error is None
    unsaid = {"turn": 1, "step": 1, "call_id": "c", "content": "ok"}
    assert parse_record("tool/result", unsaid) == ToolResult(1, 1, "c", ToolOutput("ok"))


def test_a_type_this_version_does_not_know_is_kept() -> None:
    record = parse_record("note/added", {"text": "from a newer dsh"})
    assert record == UnknownEvent("note/added", {"text": "from a newer dsh"})
    assert record_type(record) == "note/added"
    assert record.to_data() == {"text": "from a newer dsh"}
