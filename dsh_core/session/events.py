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

The everyday tools (SPEC 16) add, during their call: ``todo/write {turn, todos: [{content,
status}]}`` (fsynced: the latest list is what compaction keeps) and ``job/start {turn, job_id,
command, output_file}``; and before a step's request, ``job/end {turn, job_id, status,
exit_code?, notice}`` for a background job that ended since (fsynced: ``notice`` is what the
model is told, as a user message).

``system/prompt {text}`` is written once per session, before its first turn. A compaction
(SPEC 11) writes three lines, each fsynced, before a step of a turn or, for ``/compact``,
between turns (``turn`` is then null)::

    compaction/start   {turn, trigger, tokens, window?, error?}
    compaction/summary {turn, summary, replaces_through, tokens_before, tokens_after, <usage>}
    compaction/end     {turn}

A prune (:mod:`dsh_core.session.pruned`) writes ``compaction/prune``, in force once written.

The summary replaces what the model sees through event ``replaces_through`` (a ``seq``) only
once ``compaction/end`` is written: a compaction cut short leaves the history as it was.

Checkpoints and undo (SPEC 14, :mod:`dsh_core.session.undo`): ``checkpoint`` before a turn's
first call that can change files, ``turn/changes`` at its end, and between turns ``undo``,
``redo`` and ``rewind``.

A line of a type
this version does not know is kept as an :class:`UnknownEvent`; a line of a known type whose
fields are wrong is damage (:func:`parse_record` raises ``ValueError`` saying what is wrong).

How a record becomes ``data`` and back follows from its fields (:mod:`dsh_core.session.codec`); only
``tool/result`` and ``turn/end``, whose lines are shaped differently from their records, write
and read themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar, Literal, get_args

from ..errors import TOOL_FAILED, FailureRecord, HarnessError
from ..model.seam import ToolCall, Usage
from ..records import record
from .codec import (
    FLAT,
    Codec,
    decode,
    decoder,
    encode,
    read_bool,
    read_failure,
    read_int,
    read_optional_str,
    read_str,
)
from .jobs import JobEnded, JobStarted
from .pruned import CompactionPrune, PrunedResult
from .undo import CheckpointTaken, RedoDone, Rewound, TurnChanges, UndoDone

__all__ = [
    "APPROVAL_OUTCOMES",
    "END_KINDS",
    "FORGOTTEN",
    "TODO_STATUSES",
    "ApprovalDecided",
    "ApprovalOutcome",
    "AssistantStep",
    "CompactionEnd",
    "CompactionPrune",
    "CompactionStart",
    "CompactionSummary",
    "CompactionTrigger",
    "EndKind",
    "JobEnded",
    "JobStarted",
    "PrunedResult",
    "Record",
    "RetryScheduled",
    "SessionEvent",
    "StepUsage",
    "SystemPrompt",
    "Todo",
    "TodoStatus",
    "TodoWrite",
    "ToolCallStarted",
    "ToolOutput",
    "ToolResult",
    "TurnEnd",
    "TurnStart",
    "UnknownEvent",
    "UserText",
    "parse_record",
    "record_type",
]

EndKind = Literal[
    "completed",  # the model answered
    "error",  # a failure: ``failure`` says which (SPEC section 5)
    "aborted",  # cancelled: ``reason`` is user, shutdown, ...
    "rejected",  # refused before it ran: ``reason`` says what to do
    "interrupted",  # left open by a process that died; closed by the next load
    "max-tokens",  # the answer reached the output token limit
    "max-steps",  # the turn reached the step limit
    "max-cost",  # the next request would have passed --max-cost: ``reason`` says by how much
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

CompactionTrigger = Literal[
    "pressure",  # before a step, the conversation had passed 80% of the window
    "overflow",  # the server refused the conversation as too long (``error`` says how)
    "manual",  # /compact
]

_STEP_ONE = {"absent": 1}
"""Field metadata for ``step``: logs written before steps existed had one step per turn."""


@record
class TurnStart(Codec):
    """A turn begins."""

    TYPE: ClassVar[str] = "turn/start"
    turn: int
    """1 for the first turn of a session."""
    model: str = field(metadata={"absent": ""})


@record
class UserText(Codec):
    """The person's message (``user/message``)."""

    TYPE: ClassVar[str] = "user/message"
    turn: int
    text: str


@record
class SystemPrompt(Codec):
    """The system prompt, recorded once per session so that a resume sends the same one."""

    TYPE: ClassVar[str] = "system/prompt"
    text: str


@record
class AssistantStep(Codec):
    """What one step of the model produced (``assistant/message``).

    Written for every step that finished, and for a step cut off after it had shown text or
    reasoning (``interrupted``); a cut-off step never has tool calls (they are complete only
    when the step's stream ends).
    """

    TYPE: ClassVar[str] = "assistant/message"
    turn: int
    step: int = field(metadata=_STEP_ONE)
    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    interrupted: bool = False


@record
class ApprovalDecided(Codec):
    """How a call that needed approval was decided."""

    TYPE: ClassVar[str] = "approval/decided"
    turn: int
    call_id: str
    outcome: ApprovalOutcome
    reason: str | None = None
    """With ``rejected``: what the person said the model should do instead, if anything."""


@record
class ToolCallStarted(Codec):
    """A call starts running (``tool/call``); fsynced first when the tool can change anything."""

    TYPE: ClassVar[str] = "tool/call"
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


@record
class ToolOutput:
    """What a call produced, as the model will read it; a tool returns it, the log keeps it."""

    content: str
    """The text sent to the model; ``Error: <chain>`` for a failure."""
    failure: FailureRecord | None = None
    """Set when the call failed; its message is what ``content`` quotes."""
    exit_code: int | None = None
    """A command's exit status."""
    truncated: bool = False
    """``content`` was cut to the cap; ``output_file`` holds all of it."""
    output_file: str | None = None

    @classmethod
    def failed(cls, exc: BaseException, *, content_after: str = "") -> ToolOutput:
        """A failure as the model reads it: ``Error: <error_chain>``, then any partial output."""
        record = FailureRecord.from_exception(exc)
        if not isinstance(exc, HarnessError):
            record = FailureRecord(TOOL_FAILED, record.message)
        content = record.as_tool_result
        if content_after:
            content = f"{content}\n{content_after}"
        return cls(content, record)


@record
class ToolResult:
    """A call's result as the model receives it (``tool/result``); fsynced."""

    TYPE: ClassVar[str] = "tool/result"
    turn: int
    step: int
    call_id: str
    output: ToolOutput

    @classmethod
    def failed(cls, turn: int, step: int, call_id: str, failure: FailureRecord) -> ToolResult:
        """A failure as the model reads it: ``Error: <error_chain>`` (SPEC section 7)."""
        return cls(turn, step, call_id, ToolOutput(failure.as_tool_result, failure))

    @property
    def content(self) -> str:
        """Exactly what the model is sent (``Error: <error_chain>`` for a failure)."""
        return self.output.content

    @property
    def is_error(self) -> bool:
        return self.output.failure is not None

    @property
    def error(self) -> FailureRecord | None:
        """For a failure: its code and ``error_chain`` message."""
        return self.output.failure

    @property
    def exit_code(self) -> int | None:
        """For a command: its exit status."""
        return self.output.exit_code

    @property
    def truncated(self) -> bool:
        """The output was cut to the cap; ``output_file`` holds all of it."""
        return self.output.truncated

    @property
    def output_file(self) -> str | None:
        return self.output.output_file

    def to_data(self) -> dict[str, Any]:
        """The output's fields after ``is_error``; its failure is called ``error``."""
        data: dict[str, Any] = {
            "turn": self.turn,
            "step": self.step,
            "call_id": self.call_id,
            "is_error": self.is_error,
        }
        for key, value in encode(self.output).items():
            data["error" if key == "failure" else key] = value
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolResult:
        # The failure is read from ``error``, never from a ``failure`` key a hand-edited line
        # may have: only then is a copy of the data without it needed.
        output: ToolOutput = decode(
            ToolOutput, {**data, "failure": None} if "failure" in data else data
        )
        if read_bool(data, "is_error"):  # it decides: a hand-edited line may say otherwise
            if data.get("error") is not None:
                failure = read_failure(data, "error")
            else:
                failure = FailureRecord(TOOL_FAILED, output.content)
            output = dataclasses.replace(output, failure=failure)
        turn, step = read_int(data, "turn"), read_int(data, "step")
        return cls(turn, step, read_str(data, "call_id"), output)


@record
class StepUsage(Codec):
    """Token counts of one step, as the provider reported them (``usage``)."""

    TYPE: ClassVar[str] = "usage"
    turn: int
    step: int = field(metadata=_STEP_ONE)
    usage: Usage = field(default_factory=Usage, metadata=FLAT)


@record
class RetryScheduled(Codec):
    """A transient failure before anything was shown; the step's request is sent again."""

    TYPE: ClassVar[str] = "retry"
    turn: int
    step: int = field(metadata=_STEP_ONE)
    attempt: int
    max_retries: int
    delay: float
    failure: FailureRecord = field(metadata=FLAT)


@record
class CompactionStart(Codec):
    """A compaction begins: the summary request is about to be sent (fsynced)."""

    TYPE: ClassVar[str] = "compaction/start"
    turn: int | None
    """The turn it runs in; None for ``/compact`` between turns."""
    trigger: CompactionTrigger
    tokens: int
    """The conversation's size as dsh reckoned it (the last ``prompt_tokens`` and an estimate
    of what was added since)."""
    window: int | None = None
    """The context window that applied; None when none is known."""
    error: FailureRecord | None = None
    """For ``overflow``: the server's refusal, whose words may state the window."""


@record
class CompactionSummary(Codec):
    """The model's summary, and what it replaces (fsynced); in force once the end is written."""

    TYPE: ClassVar[str] = "compaction/summary"
    turn: int | None
    summary: str
    replaces_through: int
    """The ``seq`` of the last event the summary replaces; the events after it (the kept
    exchanges) are sent as they were, after the summary."""
    tokens_before: int
    tokens_after: int
    """The conversation's size before, and as estimated after (the next request measures it)."""
    usage: Usage = field(default_factory=Usage, metadata=FLAT)
    """The summary request's token counts."""


@record
class CompactionEnd(Codec):
    """The summary is in force from here on (fsynced)."""

    TYPE: ClassVar[str] = "compaction/end"
    turn: int | None


TodoStatus = Literal["pending", "in_progress", "completed"]
TODO_STATUSES: tuple[TodoStatus, ...] = get_args(TodoStatus)


@record
class Todo:
    """One item of the model's checklist (``todo_write``)."""

    content: str
    status: TodoStatus


@record
class TodoWrite:
    """The model's whole checklist, as its latest ``todo_write`` set it (fsynced)."""

    TYPE: ClassVar[str] = "todo/write"
    turn: int
    todos: tuple[Todo, ...]

    def to_data(self) -> dict[str, Any]:
        todos = [{"content": todo.content, "status": todo.status} for todo in self.todos]
        return {"turn": self.turn, "todos": todos}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TodoWrite:
        raw = data.get("todos")
        if not isinstance(raw, list):
            raise ValueError("todos is not a list")
        todos = []
        for item in raw:
            if not isinstance(item, dict):
                raise ValueError("a todo is not an object")
            status = read_str(item, "status")
            if status not in TODO_STATUSES:
                raise ValueError(f"unknown status {status!r}")
            todos.append(Todo(read_str(item, "content"), status))
        return cls(read_int(data, "turn"), tuple(todos))


@record
class TurnEnd:
    """How a turn ended: what ``turn/end`` stores and the loop returns."""

    TYPE: ClassVar[str] = "turn/end"
    turn: int
    """1 for the first turn of a session."""
    kind: EndKind
    failure: FailureRecord | None = None
    """For ``error``: the code, ``error_chain`` message, and the server's details."""
    reason: str | None = None
    """For ``aborted`` (``user``, ``shutdown``, ...), ``rejected`` (what to do next) and
    ``max-cost`` (the limit and the spend)."""
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
        kind = read_str(reason, "kind")
        text = read_optional_str(reason, "reason")
        turn = read_int(data, "turn")
        if kind not in END_KINDS:
            return cls(turn, "other", reason=text, other_kind=kind)
        failure = FailureRecord.from_json(reason) if kind == "error" else None
        return cls(turn, kind, failure=failure, reason=text)  # type: ignore[arg-type]


@record
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
    | CompactionStart
    | CompactionSummary
    | CompactionEnd
    | CompactionPrune
    | TodoWrite
    | JobStarted
    | JobEnded
    | CheckpointTaken
    | TurnChanges
    | UndoDone
    | RedoDone
    | Rewound
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
        CompactionStart,
        CompactionSummary,
        CompactionEnd,
        CompactionPrune,
        TodoWrite,
        JobStarted,
        JobEnded,
        CheckpointTaken,
        TurnChanges,
        UndoDone,
        RedoDone,
        Rewound,
    )
}


@record
class SessionEvent:
    """One line of the log after the header: a record and where and when it was written."""

    seq: int
    """Position in the log, from 0 without gaps."""
    time: str
    """When it was appended, UTC, ``2026-11-30T09:15:02.123Z``."""
    record: Record
    """What happened."""

    @property
    def type(self) -> str:
        """The line's type: ``turn/start``, ``user/message``, ..."""
        return record_type(self.record)

    @property
    def data(self) -> dict[str, Any]:
        """The line's payload, as written."""
        return self.record.to_data()

    def to_json(self) -> dict[str, Any]:
        """The whole line as a JSON object: ``{type, seq, time, data}``."""
        return {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}


FORGOTTEN = SessionEvent(-1, "", UnknownEvent("forgotten", {}))
"""What an event a compaction replaced reads as once the log let go of it in memory
(:meth:`dsh_core.session.SessionLog.forget`); the file still holds it."""


def record_type(record: Record) -> str:
    """The line type of ``record`` (``turn/start``, ...)."""
    return record.type if isinstance(record, UnknownEvent) else record.TYPE


def parse_record(type: str, data: Mapping[str, Any]) -> Record:
    """The record for one line; ``ValueError`` says what is wrong with a known type's fields."""
    read = _READERS.get(type)
    if read is None:
        cls = _KNOWN.get(type)
        if cls is None:
            return UnknownEvent(type, data)
        read = _READERS[type] = decoder(cls)
    record: Record = read(data)
    return record


_READERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {}
"""Each known type's ``from_data`` as one function, found on its first line."""
