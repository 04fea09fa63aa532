"""What the model sees, derived from the session log.

:class:`History` folds the log's records, as they are appended, into the messages of the next
request. The rules (SPEC sections 6 and 8):

- A turn counts once it ended with an answer (``completed``, ``max-tokens``, ``max-steps``),
  or once the model said anything in it: text cut off by a failure is kept, and a turn that ran
  any tool stays whatever its end, because its effects are real.
- A turn that failed, was cancelled or rejected before any answer is left out: its question
  would otherwise ride along with the next one. It stays in the log.
- Every assistant message with tool calls is followed by one tool message per call, in order,
  nothing between them. The log guarantees the pairs (:mod:`dsh_core.session.closing` answers
  every call left without a result, at a turn's end by the loop and, for a dead process's
  turn, at load).
- Two plain messages of one role in a row (possible in logs from before ``EMPTY_RESPONSE``
  covered reasoning-only answers, and after a compaction's checkpoint) are sent as one, joined
  by a blank line; tool-calling assistant messages and tool messages are never merged.
- A background job's end (``job/end``, written before a step's request) is a user message: the
  model hears of it in its next request. ``todo/write`` sends nothing (the call and its result
  already carry the list) but is kept: :attr:`History.todos` is the latest list, which a
  compaction sends verbatim (SPEC 11, 16).
- Undo (SPEC 14): an ``undo`` or ``redo`` between turns is told to the model as a user-role
  note naming the files that went back (:func:`undo_note`), which the next message joins; a
  ``rewind`` withdraws its turn and every later one: the history is folded again from the
  start without them (the log keeps them). Turns a compaction summarised cannot be rewound.
- Pruning (SPEC 11, issue 29): a ``compaction/prune`` sends each tool result it names as its
  stub from then on (:attr:`History.results` lists the results sent whole and stubbed).
- Compaction (SPEC 11): once ``compaction/end`` is folded, the model sees the system prompt,
  the summary as a user-role checkpoint closed by an end line (:func:`checkpoint_message`; the
  latest user request, when the summary replaced it, and the todo list go in it verbatim), then the
  messages of the events after ``replaces_through``, folded again by these same rules. A compaction
  without its end (cut short by a crash or a failure) changes nothing.

For compaction and the window it also keeps what it costs to say: the running estimate, the
:class:`Mark` places where the conversation may be cut (never between a call and its result),
and the :class:`Measure` of the last answered request (its ``prompt_tokens``).

Folding is incremental: a turn costs the same at turn 1,000 as at turn 10.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from ..errors import CONTEXT_WINDOW_EXCEEDED, FailureRecord
from ..model.models import stated_window
from ..model.seam import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from ..records import record
from ..session.events import (
    ApprovalDecided,
    AssistantStep,
    CompactionEnd,
    CompactionPrune,
    CompactionStart,
    CompactionSummary,
    JobEnded,
    JobStarted,
    Record,
    RetryScheduled,
    SessionEvent,
    StepUsage,
    SystemPrompt,
    Todo,
    TodoWrite,
    ToolCallStarted,
    ToolResult,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    UserText,
)
from ..session.undo import CheckpointTaken, RedoDone, Rewound, TurnChanges, UndoDone

__all__ = [
    "CHECKPOINT_END",
    "CHECKPOINT_HEADING",
    "MESSAGE_OVERHEAD_TOKENS",
    "History",
    "Mark",
    "Measure",
    "Result",
    "SessionUsage",
    "checkpoint_message",
    "estimate_tokens",
    "message_tokens",
    "reading_form",
    "undo_note",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens each message costs beyond its text (role and separators), for the estimate."""


def estimate_tokens(text: str) -> int:
    """A rough token count: DeepSeek's rule of thumb, 0.3 per ASCII and 0.6 per other character.

    It only counts what was added since the last measured request (and, after a compaction,
    until the next one): the server's ``prompt_tokens`` has the last word. Its error is in
    ``docs/notes/2026-12-01-long-sessions.md``.
    """
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars * 0.3 + (len(text) - ascii_chars) * 0.6)


def message_tokens(message: Message) -> int:
    """The estimated cost of one message in a request."""
    tokens = estimate_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS
    if isinstance(message, AssistantMessage) and message.tool_calls:
        tokens += estimate_tokens(message.reasoning or "")  # sent back with the calls
        for call in message.tool_calls:
            tokens += estimate_tokens(call.name) + estimate_tokens(call.arguments)
            tokens += MESSAGE_OVERHEAD_TOKENS
    return tokens


# The checkpoint's words live in .checkpoint; re-exported here, where they were first.
from .checkpoint import CHECKPOINT_END as CHECKPOINT_END  # noqa: E402
from .checkpoint import CHECKPOINT_HEADING as CHECKPOINT_HEADING  # noqa: E402
from .checkpoint import checkpoint_message as checkpoint_message  # noqa: E402
from .checkpoint import reading_form as reading_form  # noqa: E402

NOTE_PATHS = 50
"""Paths an undo note names; the rest are counted."""


def undo_note(record: UndoDone | RedoDone) -> str:
    """What the model is told of an undo or a redo: which files went back, which were left."""

    def named(paths: tuple[str, ...]) -> str:
        more = f" and {len(paths) - NOTE_PATHS} more" if len(paths) > NOTE_PATHS else ""
        return ", ".join(paths[:NOTE_PATHS]) + more

    if isinstance(record, UndoDone):
        said = (
            "[dsh: the user ran /undo: the changes an earlier turn made to these files were "
            f"taken back, and they are as they were before it: {named(record.restored)}."
        )
    else:
        said = (
            "[dsh: the user ran /redo: the changes /undo had taken back are in place again in "
            f"these files: {named(record.restored)}."
        )
    if record.conflicts:
        said += f" Left as they are (changed since): {named(record.conflicts)}."
    return said + " Read a file again before you change it.]"


@record
class Mark:
    """A place the conversation may be cut: before a user message, or before a step that
    follows tool results. Never between a tool call and its result, and never right after a
    user message (a message appended there would be merged into it)."""

    seq: int
    """The event the part after the cut starts with."""
    count: int
    """Messages before the cut, the system prompt included."""
    tokens: int
    """Estimated tokens of those messages."""


@record
class Result:
    """A tool result the conversation sends, for a prune to weigh."""

    seq: int
    """Its ``tool/result`` event."""
    call_id: str
    tool: str
    """The name of the call it answers, as the model wrote it (``?`` when unknown)."""
    chars: int
    """Characters of its content as sent."""
    tokens: int
    """Its estimated tokens as sent now (its stub's, once pruned)."""
    output_file: str | None
    """Where its whole output already is (a cut command output), or None."""
    content: str
    """What the model was sent: what a prune saves to a file when ``output_file`` is None."""
    pruned: bool = False


@record
class Measure:
    """The last answered request, as the server counted it."""

    prompt_tokens: int
    estimate: int
    """The estimate of the messages it carried (tools not included)."""
    seq: int
    """Its step's ``assistant/message``: the request carried the events before it."""


@dataclass(slots=True)
class SessionUsage:
    """A session's tokens over every answered request, summaries included (``/usage``)."""

    prompt_tokens: int = 0
    cache_hit_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    compactions: int = 0

    @property
    def cache_miss_tokens(self) -> int:
        return self.prompt_tokens - self.cache_hit_tokens

    def add(self, usage: Usage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.cache_hit_tokens += usage.cached_tokens
        self.completion_tokens += usage.completion_tokens
        self.requests += 1


def _mergeable(before: Message, after: Message) -> bool:
    if isinstance(before, UserMessage) and isinstance(after, UserMessage):
        return True
    return (
        isinstance(before, AssistantMessage)
        and isinstance(after, AssistantMessage)
        and not before.tool_calls
        and not after.tool_calls
    )


def _join(messages: list[Message], message: Message) -> Message | None:
    """Append ``message``, or merge it into the last one when allowed; the merged message."""
    if messages and _mergeable(messages[-1], message):
        last = messages[-1]
        joined = f"{last.content}\n\n{message.content}"
        merged: Message = (
            UserMessage(joined)
            if isinstance(last, UserMessage)
            else AssistantMessage(joined, getattr(last, "reasoning", None))
        )
        messages[-1] = merged
        return last
    messages.append(message)
    return None


def _append(messages: list[Message], message: Message) -> int:
    """Append or merge ``message``; the change in estimated tokens."""
    replaced = _join(messages, message)
    if replaced is None:
        return message_tokens(message)
    return message_tokens(messages[-1]) - message_tokens(replaced)


class History:
    """The messages the next request carries, kept up to date from the log's events."""

    def __init__(self) -> None:
        self._system: SystemMessage | None = None
        self._committed: list[Message] = []
        """The messages of the turns that count (after a compaction: its checkpoint first)."""
        self._committed_tokens = 0
        self._open: list[Message] = []
        """The messages of the turn that has started and not ended."""
        self._open_tokens = 0
        self._read = 0
        """Log events already folded in."""
        self._marks: list[Mark] = []
        """Where the conversation may be cut, since the last compaction, oldest first."""
        self.measure: Measure | None = None
        """The last answered request since the last compaction; None before one."""
        self.compacted = False
        """A compaction is in force: the first message after the system prompt is its
        checkpoint."""
        self._step: tuple[int, int] | None = None
        """(estimate before it, seq) of the last ``assistant/message``, for its usage."""
        self._model = ""
        """The model of the turn being folded."""
        self._stated: dict[str, int] = {}
        """The smallest window a server stated for each model, in a context-window refusal."""
        self._pending: tuple[int, CompactionSummary | None] | None = None
        """A compaction begun (the seq of its start) and its summary, until its end."""
        self.usage = SessionUsage()
        """Added up as the log's usage is folded in, so it outlives what the log lets go of."""
        self.todos: tuple[Todo, ...] = ()
        """The model's checklist as its latest ``todo_write`` left it (empty before one)."""
        self._withdrawn: set[int] = set()
        """Turns a ``rewind`` withdrew: their events are not folded."""
        self._results: list[Result] = []
        """The tool results of the turns that count, since the last compaction, oldest first."""
        self._open_results: list[Result] = []
        """Those of the open turn."""
        self._names: dict[str, str] = {}
        """The tool each call of the open turn names, by call id."""
        self.latest_request: tuple[int, str] | None = None
        """The seq and text of the latest user message (kept verbatim by a compaction)."""

    def update(self, events: Sequence[SessionEvent]) -> None:
        """Fold in the events appended since the last call (the log is append-only)."""
        while self._read < len(events):
            event = events[self._read]
            self._read += 1
            self._fold(event.record, event.seq)
            if isinstance(event.record, CompactionEnd):
                self._compacted(events, event.seq)
            elif isinstance(event.record, Rewound):
                self._rewound(events, event.seq, event.record.to_turn)

    def messages(self) -> list[Message]:
        """The system prompt, the turns that count, then the open turn (a fresh list)."""
        messages: list[Message] = [] if self._system is None else [self._system]
        messages.extend(self._committed)
        if self._open:  # already merged among themselves: only the first may join the past
            _join(messages, self._open[0])
            messages.extend(self._open[1:])
        return messages

    @property
    def tokens(self) -> int:
        """Estimated tokens of the system prompt and the turns that ended."""
        system = message_tokens(self._system) if self._system is not None else 0
        return system + self._committed_tokens

    @property
    def open_tokens(self) -> int:
        """Estimated tokens of the turn being run."""
        return self._open_tokens

    @property
    def system_tokens(self) -> int:
        """Estimated tokens of the system prompt alone."""
        return message_tokens(self._system) if self._system is not None else 0

    def marks(self) -> list[Mark]:
        """Where the conversation may be cut since the last compaction, oldest first; the end
        of the conversation is the last one when it is a place to cut."""
        end = self._mark_here(self._read)
        return [*self._marks, end] if end is not None else list(self._marks)

    @property
    def results(self) -> list[Result]:
        """The tool results the next request sends, whole or stubbed, oldest first."""
        return [*self._results, *self._open_results]

    def stated_window(self, model: str) -> int | None:
        """The window a server stated for ``model`` in this session's refusals, if any."""
        return self._stated.get(model)

    def _open_with(self, message: Message) -> None:
        self._open_tokens += _append(self._open, message)

    def _mark_here(self, seq: int) -> Mark | None:
        """A mark before event ``seq``, when the messages so far end where a cut may be."""
        last = self._open[-1] if self._open else self._committed[-1] if self._committed else None
        if isinstance(last, UserMessage) or (
            isinstance(last, AssistantMessage) and last.tool_calls  # its results come next
        ):
            return None
        merged = bool(
            self._open and self._committed and _mergeable(self._committed[-1], self._open[0])
        )
        count = (self._system is not None) + len(self._committed) + len(self._open) - merged
        return Mark(seq, count, self.tokens + self._open_tokens)

    def _learn(self, failure: FailureRecord | None) -> None:
        if failure is None or failure.code != CONTEXT_WINDOW_EXCEEDED:
            return
        window = stated_window(failure.message)
        if window is not None:
            self._stated[self._model] = min(window, self._stated.get(self._model, window))

    def _fold(self, record: Record, seq: int, *, again: bool = False) -> None:
        """Fold one record; ``again`` while a compaction's kept events are folded anew (their
        usage measured requests that carried what the summary replaced)."""
        if self._withdrawn and getattr(record, "turn", None) in self._withdrawn:
            return
        match record:
            case SystemPrompt(text=text):
                self._system = SystemMessage(text)
            case TurnStart(model=model):
                self._open, self._open_tokens = [], 0
                self._open_results, self._names = [], {}
                self._model = model
            case UserText(text=text):
                self._open, self._open_tokens = [], 0
                self._open_results = []
                self.latest_request = (seq, text)
                if (mark := self._mark_here(seq)) is not None:
                    self._marks.append(mark)
                self._open_with(UserMessage(text))
            case AssistantStep():
                if record.step > 1 and (mark := self._mark_here(seq)) is not None:
                    self._marks.append(mark)
                self._step = None if again else (self.tokens + self._open_tokens, seq)
                if record.text or record.tool_calls:
                    reasoning = record.reasoning if record.tool_calls else None
                    self._open_with(AssistantMessage(record.text, reasoning, record.tool_calls))
                self._names.update((call.id, call.name) for call in record.tool_calls)
            case StepUsage(usage=usage):
                if not again:
                    self.usage.add(usage)
                if self._step is not None and usage.prompt_tokens > 0:
                    self.measure = Measure(usage.prompt_tokens, *self._step)
                self._step = None
            case ToolResult(call_id=call_id, content=content):
                answer = ToolMessage(call_id, content)
                self._open_with(answer)
                name = self._names.get(call_id, "?")
                tokens = message_tokens(answer)
                output = record.output_file
                self._open_results.append(
                    Result(seq, call_id, name, len(content), tokens, output, content)
                )
            case TurnEnd(kind=kind):
                said = any(not isinstance(m, UserMessage) for m in self._open)
                if said or kind in ("completed", "max-tokens", "max-steps"):
                    for message in self._open:
                        self._committed_tokens += _append(self._committed, message)
                    self._results.extend(self._open_results)
                self._open, self._open_tokens = [], 0
                self._open_results, self._names = [], {}
                self._learn(record.failure)
            case CompactionStart():
                self._pending = (seq, None)
                self._learn(record.error)
            case CompactionSummary():
                if not again:
                    self.usage.add(record.usage)
                if self._pending is not None:
                    self._pending = (self._pending[0], record)
            case CompactionPrune():
                self._prune({item.call_id: item.stub for item in record.results})
            case CompactionEnd():
                if not again:
                    self.usage.compactions += 1  # update() applies it: that needs the events
            case TodoWrite(todos=todos):
                self.todos = todos
            case JobEnded(notice=notice):
                self._open_with(UserMessage(notice))
            case UndoDone() | RedoDone():
                if record.restored and not self._withdrawn.issuperset(record.turns):
                    self._committed_tokens += _append(
                        self._committed, UserMessage(undo_note(record))
                    )
            case ToolCallStarted() | ApprovalDecided() | RetryScheduled() | JobStarted():
                pass  # bookkeeping: the model does not see it
            case CheckpointTaken() | TurnChanges() | Rewound():
                pass  # the files' bookkeeping; a rewind is applied by update()
            case UnknownEvent():
                pass  # from a newer dsh: what it means for the history is unknown here
            case _:
                assert_never(record)

    def _prune(self, stubs: dict[str, str]) -> None:
        """Send the results named in ``stubs`` as their stubs; the marks after them shrink."""
        saved: list[tuple[int, int]] = []  # (seq, tokens saved) of each result stubbed
        for results, messages, is_open in (
            (self._results, self._committed, False),
            (self._open_results, self._open, True),
        ):
            for index, result in enumerate(results):
                stub = stubs.get(result.call_id)
                if stub is None or result.pruned:
                    continue
                where = next(
                    (
                        at
                        for at, message in enumerate(messages)
                        if isinstance(message, ToolMessage)
                        and message.tool_call_id == result.call_id
                    ),
                    None,
                )
                if where is None:
                    continue  # not sent any more (summarised): nothing to replace
                messages[where] = ToolMessage(result.call_id, stub)
                tokens = message_tokens(messages[where])
                change = tokens - result.tokens
                if is_open:
                    self._open_tokens += change
                else:
                    self._committed_tokens += change
                saved.append((result.seq, -change))
                results[index] = dataclasses.replace(result, tokens=tokens, content="", pruned=True)
        if saved:
            self._marks = [
                dataclasses.replace(
                    mark, tokens=mark.tokens - sum(d for seq, d in saved if seq < mark.seq)
                )
                for mark in self._marks
            ]

    def _rewound(self, events: Sequence[SessionEvent], end: int, to_turn: int) -> None:
        """Withdraw ``to_turn`` and the turns after it (up to event ``end``): fold the log
        again without them, the usage already counted kept."""
        started = (event.record for event in events[:end] if isinstance(event.record, TurnStart))
        withdrawn = self._withdrawn | {record.turn for record in started if record.turn >= to_turn}
        usage, stated = self.usage, self._stated
        self.__init__()  # type: ignore[misc]
        self.usage, self._stated, self._withdrawn = usage, stated, withdrawn
        for event in events[: end + 1]:
            self._read += 1
            self._fold(event.record, event.seq, again=True)
            if isinstance(event.record, CompactionEnd):
                self._compacted(events, event.seq)

    def _compacted(self, events: Sequence[SessionEvent], end: int) -> None:
        """Put the summary in force: the checkpoint, then the kept events folded anew."""
        pending, self._pending = self._pending, None
        summary = pending[1] if pending is not None else None
        if pending is None or summary is None:
            return  # an end without its start and summary (a hand-edited log): no effect
        start = pending[0]
        if not -1 <= summary.replaces_through < start:
            return  # it names events it cannot replace: keep the history whole
        latest, todos = self.latest_request, self.todos
        self._committed, self._open = [], []
        self._committed_tokens = self._open_tokens = 0
        self._results, self._open_results = [], []
        self._marks, self.measure, self._step = [], None, None
        self.compacted = True
        # The latest request verbatim when the summary replaced it (else it is kept as it was).
        request = (
            latest[1] if latest is not None and latest[0] <= summary.replaces_through else None
        )
        checkpoint = checkpoint_message(summary.summary, request=request, todos=todos)
        self._committed_tokens += _append(self._committed, checkpoint)
        for event in events[summary.replaces_through + 1 : start]:
            self._fold(event.record, event.seq, again=True)
        self._pending = None  # the kept events hold no compaction of their own
        if (mark := self._mark_here(end + 1)) is not None:
            self._marks.append(mark)
