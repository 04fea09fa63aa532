"""The session log's events as typed records, built and read back in one place (SPEC 6 and 8).

Each record knows its line type (``TYPE``) and its JSON ``data``::

    record = UserText(turn=1, text="hello")
    record.to_data()                           # {"turn": 1, "text": "hello"}
    parse_record("user/message", {"turn": 1, "text": "hello"}) == record

A turn is written in this order (``step`` counts the model requests of a turn from 1)::

    turn/start        {turn, model}
    user/message      {turn, text}
    retry             {turn, step, attempt, max_retries, delay, code, message, ...}   per retry
    assistant/message {turn, step, text, reasoning?, tool_calls?, interrupted?}      per step
    usage             {turn, step, prompt_tokens, completion_tokens, ...}             per step
    approval/decided  {turn, call_id, outcome, reason?}  when a call needed approval
    tool/call         {turn, step, call_id, name, arguments}   the call starts running
    tool/result       {turn, step, call_id, is_error, content, error?, exit_code?, ...}
    turn/end          {turn, reason: {kind, ...}}

``system/prompt {text}`` is written once per session, before its first turn. A line of a type
this version does not know is kept as an :class:`UnknownEvent`; a line of a known type whose
fields are wrong is damage (:func:`parse_record` raises ``ValueError`` saying what is wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

from .errors import FailureRecord
from .llm import ToolCall

__all__ = [
    "APPROVAL_OUTCOMES",
    "END_KINDS",
    "ApprovalDecided",
    "ApprovalOutcome",
    "AssistantStep",
    "EndKind",
    "Record",
    "RetryScheduled",
    "StepUsage",
    "SystemPrompt",
    "ToolCallStarted",
    "ToolResult",
    "TurnEnd",
    "TurnStart",
    "UnknownEvent",
    "UserText",
    "parse_record",
]

EndKind = Literal[
    "completed",  # the model answered
    "error",  # a failure: ``failure`` says which (SPEC section 5)
    "aborted",  # cancelled: ``reason`` is user, shutdown, ...
    "rejected",  # refused before it ran: ``reason`` says what to do
    "interrupted",  # left open by a process that died; closed by the next load
    "max-tokens",  # the answer reached the output token limit
    "max-steps",  # the turn reached the step limit
    "other",  # a kind written by a newer dsh: a normal end (SPEC section 3)
]
END_KINDS: frozenset[str] = frozenset(get_args(EndKind)) - {"other"}
"""The kinds this version writes."""

ApprovalOutcome = Literal[
    "allowed",  # the person said yes
    "allowed-always",  # yes, and for the rest of this session
    "granted-by-flag",  # --allow granted it without asking
    "rejected",  # the person said no
    "unavailable",  # it needed a question and there was no terminal to ask
    "cancelled",  # Ctrl-C at the question
]
APPROVAL_OUTCOMES: frozenset[str] = frozenset(get_args(ApprovalOutcome))


@dataclass(frozen=True, slots=True)
class TurnStart:
    """A turn begins."""

    TYPE: ClassVar[str] = "turn/start"
    turn: int
    """1 for the first turn of a session."""
    model: str

    def to_data(self) -> dict[str, Any]:
        return {"turn": self.turn, "model": self.model}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TurnStart:
        return cls(_int(data, "turn"), _str(data, "model", ""))


@dataclass(frozen=True, slots=True)
class UserText:
    """The person's message (``user/message``)."""

    TYPE: ClassVar[str] = "user/message"
    turn: int
    text: str

    def to_data(self) -> dict[str, Any]:
        return {"turn": self.turn, "text": self.text}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> UserText:
        return cls(_int(data, "turn"), _str(data, "text"))


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """The system prompt, recorded once per session so that a resume sends the same one."""

    TYPE: ClassVar[str] = "system/prompt"
    text: str

    def to_data(self) -> dict[str, Any]:
        return {"text": self.text}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> SystemPrompt:
        return cls(_str(data, "text"))


@dataclass(frozen=True, slots=True)
class AssistantStep:
    """What one step of the model produced (``assistant/message``).

    Written for every step that finished, and for a step cut off after it had shown text or
    reasoning (``interrupted``); a cut-off step never has tool calls (they are complete only
    when the step's stream ends).
    """

    TYPE: ClassVar[str] = "assistant/message"
    turn: int
    step: int
    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    interrupted: bool = False

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"turn": self.turn, "step": self.step, "text": self.text}
        if self.reasoning:
            data["reasoning"] = self.reasoning
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                for call in self.tool_calls
            ]
        if self.interrupted:
            data["interrupted"] = True
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> AssistantStep:
        raw_calls = data.get("tool_calls", [])
        if not isinstance(raw_calls, list):
            raise ValueError("tool_calls is not a list")
        calls = []
        for raw in raw_calls:
            if not isinstance(raw, dict):
                raise ValueError("a tool call is not an object")
            calls.append(ToolCall(_str(raw, "id"), _str(raw, "name"), _str(raw, "arguments")))
        return cls(
            turn=_int(data, "turn"),
            step=_int(data, "step", 1),  # logs from before steps had one step per turn
            text=_str(data, "text"),
            reasoning=_optional_str(data, "reasoning"),
            tool_calls=tuple(calls),
            interrupted=_bool(data, "interrupted"),
        )


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """How a call that needed approval was decided."""

    TYPE: ClassVar[str] = "approval/decided"
    turn: int
    call_id: str
    outcome: ApprovalOutcome
    reason: str | None = None
    """With ``rejected``: what the person said the model should do instead, if anything."""

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"turn": self.turn, "call_id": self.call_id, "outcome": self.outcome}
        if self.reason is not None:
            data["reason"] = self.reason
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ApprovalDecided:
        outcome = _str(data, "outcome")
        if outcome not in APPROVAL_OUTCOMES:
            raise ValueError(f"unknown approval outcome {outcome!r}")
        return cls(
            _int(data, "turn"),
            _str(data, "call_id"),
            outcome,  # type: ignore[arg-type]
            _optional_str(data, "reason"),
        )


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A call starts running (``tool/call``); fsynced first when the tool can change anything."""

    TYPE: ClassVar[str] = "tool/call"
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str

    def to_data(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "step": self.step,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolCallStarted:
        return cls(
            _int(data, "turn"),
            _int(data, "step"),
            _str(data, "call_id"),
            _str(data, "name"),
            _str(data, "arguments"),
        )


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A call's result as the model receives it (``tool/result``); fsynced."""

    TYPE: ClassVar[str] = "tool/result"
    turn: int
    step: int
    call_id: str
    is_error: bool
    content: str
    """Exactly what the model is sent (``Error: <error_chain>`` for a failure)."""
    error: FailureRecord | None = None
    """For a failure: its code and ``error_chain`` message."""
    exit_code: int | None = None
    """For a command: its exit status."""
    truncated: bool = False
    """The output was cut to the cap; ``output_file`` holds all of it."""
    output_file: str | None = None

    @classmethod
    def failed(cls, turn: int, step: int, call_id: str, failure: FailureRecord) -> ToolResult:
        """A failure as the model reads it: ``Error: <error_chain>`` (SPEC section 7)."""
        return cls(turn, step, call_id, True, failure.as_tool_result, error=failure)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "turn": self.turn,
            "step": self.step,
            "call_id": self.call_id,
            "is_error": self.is_error,
            "content": self.content,
        }
        if self.error is not None:
            data["error"] = self.error.to_json()
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        if self.truncated:
            data["truncated"] = True
        if self.output_file is not None:
            data["output_file"] = self.output_file
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolResult:
        error = data.get("error")
        if error is not None and not isinstance(error, dict):
            raise ValueError("error is not an object")
        exit_code = data.get("exit_code")
        if exit_code is not None and (
            not isinstance(exit_code, int) or isinstance(exit_code, bool)
        ):
            raise ValueError("exit_code is not an integer")
        return cls(
            turn=_int(data, "turn"),
            step=_int(data, "step"),
            call_id=_str(data, "call_id"),
            is_error=_bool(data, "is_error"),
            content=_str(data, "content"),
            error=FailureRecord.from_json(error) if error is not None else None,
            exit_code=exit_code,
            truncated=_bool(data, "truncated"),
            output_file=_optional_str(data, "output_file"),
        )


@dataclass(frozen=True, slots=True)
class StepUsage:
    """Token counts of one step, as the provider reported them (``usage``)."""

    TYPE: ClassVar[str] = "usage"
    turn: int
    step: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def to_data(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "step": self.step,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StepUsage:
        counts = (
            _int(data, name, 0)
            for name in ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
        )
        return cls(_int(data, "turn"), _int(data, "step", 1), *counts)


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    """A transient failure before anything was shown; the step's request is sent again."""

    TYPE: ClassVar[str] = "retry"
    turn: int
    step: int
    attempt: int
    max_retries: int
    delay: float
    failure: FailureRecord

    def to_data(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "step": self.step,
            "attempt": self.attempt,
            "max_retries": self.max_retries,
            "delay": self.delay,
            **self.failure.to_json(),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RetryScheduled:
        delay = data.get("delay")
        if not isinstance(delay, int | float) or isinstance(delay, bool):
            raise ValueError("delay is not a number")
        return cls(
            turn=_int(data, "turn"),
            step=_int(data, "step", 1),
            attempt=_int(data, "attempt"),
            max_retries=_int(data, "max_retries"),
            delay=float(delay),
            failure=FailureRecord.from_json(data),
        )


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """How a turn ended: what ``turn/end`` stores and the loop returns."""

    TYPE: ClassVar[str] = "turn/end"
    turn: int
    """1 for the first turn of a session."""
    kind: EndKind
    failure: FailureRecord | None = None
    """For ``error``: the code, ``error_chain`` message, and the server's details."""
    reason: str | None = None
    """For ``aborted`` (``user``, ``shutdown``, ...) and ``rejected`` (what to do next)."""
    other_kind: str | None = None
    """For ``other``: the kind as a newer dsh wrote it."""

    @property
    def name(self) -> str:
        """The kind as written in the log."""
        return self.other_kind if self.kind == "other" and self.other_kind else self.kind

    def to_data(self) -> dict[str, Any]:
        """``{turn, reason: {kind, ...}}``."""
        reason: dict[str, Any] = {"kind": self.name}
        if self.failure is not None:
            reason.update(self.failure.to_json())
        if self.reason is not None:
            reason["reason"] = self.reason
        return {"turn": self.turn, "reason": reason}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TurnEnd:
        reason = data.get("reason")
        if not isinstance(reason, dict):
            raise ValueError("turn/end without a reason object")
        kind = _str(reason, "kind")
        text = _optional_str(reason, "reason")
        turn = _int(data, "turn")
        if kind not in END_KINDS:
            return cls(turn, "other", reason=text, other_kind=kind)
        failure = FailureRecord.from_json(reason) if kind == "error" else None
        return cls(turn, kind, failure=failure, reason=text)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """A line of a type this version does not know (from a newer dsh): kept as it is."""

    type: str
    data: Mapping[str, Any]

    def to_data(self) -> dict[str, Any]:
        return dict(self.data)


Record = (
    TurnStart
    | UserText
    | SystemPrompt
    | AssistantStep
    | ApprovalDecided
    | ToolCallStarted
    | ToolResult
    | StepUsage
    | RetryScheduled
    | TurnEnd
    | UnknownEvent
)
"""One event of the session log."""

_KNOWN: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        TurnStart,
        UserText,
        SystemPrompt,
        AssistantStep,
        ApprovalDecided,
        ToolCallStarted,
        ToolResult,
        StepUsage,
        RetryScheduled,
        TurnEnd,
    )
}


def record_type(record: Record) -> str:
    """The line type of ``record`` (``turn/start``, ...)."""
    return record.type if isinstance(record, UnknownEvent) else record.TYPE


def parse_record(type: str, data: Mapping[str, Any]) -> Record:
    """The record for one line; ``ValueError`` says what is wrong with a known type's fields."""
    cls = _KNOWN.get(type)
    if cls is None:
        return UnknownEvent(type, data)
    record: Record = cls.from_data(data)
    return record


def _int(data: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} is not an integer" if key in data else f"no {key}")
    return value


def _str(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string" if key in data else f"no {key}")
    return value


def _optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value


def _bool(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} is not true or false")
    return value
