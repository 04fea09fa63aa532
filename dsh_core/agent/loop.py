"""The agent loop: one conversation bound to one session log, run a turn at a time.

    conversation = Conversation(model, log, model_name="deepseek-v4-flash", toolbox=tools)
    end = await conversation.run_turn("fix the failing test", on_event=show)
    if end.kind == "error":
        print(f"[turn failed {end.failure.code}] {end.failure.message}")

A turn is one or more *steps*; a step is one request to the model. When the answer asks for
tool calls, the loop runs them (:mod:`dsh_core.agent.calls`: free reads side by side, anything else
alone, results in the model's order) and sends their results in the next step, until the model
answers without calls, the step limit is reached, a step fails, or the turn is cancelled. What
each step writes, and when it is fsynced, is listed in :mod:`dsh_core.session.events`; the design
note is ``docs/notes/2026-12-01-agent-steps.md``.

Every turn ends with exactly one :class:`~dsh_core.session.events.TurnEnd`, and before it, every
call the model asked for has its result in the log, so the next request is always valid: calls not
run get ``ABORTED_BEFORE_DISPATCH`` (cancelled), ``TOOL_NOT_RUN`` (output limit) or the refusal.

Long sessions (SPEC 11): :attr:`Conversation.keeper` compacts before a step past 80% of the
window, and once after a context-window refusal (the step is then retried); see
:mod:`dsh_core.agent.compaction`. :meth:`Conversation.compact` does it on demand.

Secrets (SPEC 10.5): what the log stores and the model is sent is masked where it enters the
loop (:mod:`dsh_core.masking`): the model's text, reasoning and calls as they stream in, the
user's message, the system prompt and every tool result. Failures are masked by
``error_chain``.

Cancellation (:mod:`dsh_core.agent.cancel`): :meth:`Conversation.cancel` records a reason and
interrupts the turn wherever it waits, on the model, on an approval question or on a running
tool: ``CancelledError`` unwinds the steps, the turn ends ``aborted`` with that reason, and
``run_turn`` returns normally. A cancellation that did not come through :meth:`cancel`
(``asyncio.run`` shutting down, a timeout around ``run_turn``) is recorded as ``aborted``,
reason ``cancelled``, and then propagates, because whoever cancelled the task is waiting for it
to stop. Whatever ends a turn, :func:`~dsh_core.session.closing.answer_unanswered` answers the calls
it left before ``turn/end`` is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..checkpoints.turns import CheckpointNote as CheckpointNote
from ..errors import (
    ABORTED,
    CONTEXT_WINDOW_EXCEEDED,
    SESSION_LOG,
    TOOL_NOT_RUN,
    Code,
    FailureRecord,
    HarnessError,
    SessionLogError,
    UsageError,
)
from ..fileio import format_size
from ..masking import mask
from ..model.seam import ChatModel, ChatRequest, Event, Message, RetryNotice
from ..session import SessionLog
from ..session.closing import answer_unanswered, closing_records
from ..session.events import (
    Record,
    RetryScheduled,
    StepUsage,
    SystemPrompt,
    ToolOutput,
    TurnEnd,
    TurnStart,
    UserText,
)
from ..tools.base import SandboxEscape, Toolbox
from . import compaction
from .approval import ApprovalPolicy
from .calls import Nested as Nested
from .calls import StepCalls, cancelled_failure
from .calls import ToolFinished as ToolFinished
from .calls import ToolProgress as ToolProgress
from .calls import ToolStarting as ToolStarting
from .cancel import Cancellation, external_reason
from .compaction import REPL_WINDOW_ADVICE, Compacted, Compacting, WindowAdvice, WindowKeeper
from .history import History
from .step import MaskedStream, Step, close_stream

if TYPE_CHECKING:
    from ..checkpoints.turns import Checkpoints
    from .budget import Budget

__all__ = [
    "DEFAULT_INPUT_LIMIT",
    "DEFAULT_MAX_STEPS",
    "CheckpointNote",
    "Compacted",
    "Compacting",
    "Conversation",
    "LoopEvent",
    "Nested",
    "NoteSource",
    "Observer",
    "PreTurnHook",
    "ToolFinished",
    "ToolProgress",
    "ToolStarting",
    "TurnFailed",
]

logger = logging.getLogger(__name__)
# A library must not print: without this, Python's last-resort handler writes our warnings to
# stderr when the application has not configured logging.
logger.addHandler(logging.NullHandler())

DEFAULT_INPUT_LIMIT = 256 * 1024
"""Bytes (UTF-8) one user message may have."""

DEFAULT_MAX_STEPS = 50
"""Model requests one turn may make (``--max-steps``)."""


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """Live event: the turn ended ``error``; sent after ``turn/end`` is written."""

    error: BaseException
    """The raw exception, for consumers that route on it; render it with ``error_chain``."""


LoopEvent = (
    Event
    | ToolStarting
    | ToolFinished
    | ToolProgress
    | Nested
    | TurnFailed
    | Compacting
    | Compacted
    | CheckpointNote
)
"""What an observer of :meth:`Conversation.run_turn` receives, in order."""

Observer = Callable[[LoopEvent], None]

PreTurnHook = Callable[["Conversation", str], str | None]
"""Runs before a turn is sent; returns a reason to reject the turn (say what to do), or None."""

NoteSource = Callable[[int], Sequence[Record]]
"""What happened meanwhile that the model must hear of in its next request (a background job
that ended, SPEC 16): records for turn N, asked for before each step's request and written
then (fsynced), never between a call and its result."""


class _Turn:
    """The turn being run: where it stands, for whatever ends it."""

    __slots__ = ("first", "number", "observer", "step")

    def __init__(self, number: int, first: int) -> None:
        self.number = number
        self.first = first
        """Where its ``turn/start`` is among the log's events."""
        self.step: Step | None = None
        """The step being streamed or whose calls are running."""
        self.observer: Observer = _ignore


class Conversation:
    """A conversation bound to one session log; its history is derived from that log.

    ``model_name``, ``max_tokens``, ``thinking`` and ``reasoning_effort`` may be changed between
    turns (``/model``, ``/think``).
    """

    def __init__(
        self,
        model: ChatModel,
        log: SessionLog,
        *,
        model_name: str,
        max_tokens: int | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        toolbox: Toolbox | None = None,
        approval: ApprovalPolicy | None = None,
        system_prompt: str | None = None,
        input_limit: int = DEFAULT_INPUT_LIMIT,
        context_window: int | None = None,
        auto_compact: bool = True,
        window_advice: WindowAdvice = REPL_WINDOW_ADVICE,
        thinking: bool | None = None,
        reasoning_effort: str | None = None,
        hooks: Sequence[PreTurnHook] = (),
        notes: Sequence[NoteSource] = (),
        checkpoints: Checkpoints | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.model = model
        self.log = log
        self.model_name = model_name
        self.max_tokens = max_tokens
        self.max_steps = max_steps
        """Model requests one turn may make; the turn ends ``max-steps`` before one more."""
        self.toolbox = toolbox if toolbox is not None else Toolbox()
        self.approval = approval if approval is not None else ApprovalPolicy()
        self.system_prompt = system_prompt
        """Written to a session that has none when its first turn starts; a resumed session
        keeps the one it recorded."""
        self.input_limit = input_limit
        """Bytes (UTF-8) one user message may have; larger ones are rejected."""
        self.context_window = context_window
        """Tokens a request may hold, whatever the model's facts say; None: the model's."""
        self.auto_compact = auto_compact
        """Off: a turn that does not fit is rejected (or fails), not compacted."""
        self.window_advice = window_advice
        """What whoever reads a turn's rejection can do about a conversation that no longer
        fits, in their words (the REPL's commands by default)."""
        self.thinking = thinking
        """Ask for thinking mode (True) or against it (False); None: the model's default."""
        self.reasoning_effort = reasoning_effort
        self.hooks: tuple[PreTurnHook, ...] = (
            Conversation.check_input_size,
            Conversation.check_context_window,
            *hooks,
        )
        """Pre-turn checks, built-ins first; the first reason returned rejects the turn."""
        self.notes: tuple[NoteSource, ...] = tuple(notes)
        """Asked before each step's request; what they return is written, then sent."""
        self.checkpoints = checkpoints
        """Checkpoints before a turn's first change, and its changes at its end (SPEC 14);
        None: off (``--no-checkpoints``)."""
        self.budget = budget  # --max-cost (SPEC 15); None: no limit
        self._cancellation: Cancellation | None = None
        """The running turn's; None when idle."""
        self._log_failure: FailureRecord | None = None
        """Why the log last refused a write, while the turn it left open is still open."""
        self._history = History()
        self.keeper = WindowKeeper(self, self._history)
        """The context window: its size now, and compaction."""

    @property
    def history(self) -> list[Message]:
        """The messages the next request carries, derived from the log (a fresh list)."""
        self._history.update(self.log.events)
        return self._history.messages()

    @property
    def running(self) -> bool:
        """True while ``run_turn`` is in progress."""
        return self._cancellation is not None

    def last_turn_end(self) -> TurnEnd | None:
        """The most recent ``turn/end`` in the log, e.g. one a resume closed as interrupted."""
        for event in reversed(self.log.events):
            if isinstance(event.record, TurnEnd):
                return event.record
        return None

    # -- checks before a turn ----------------------------------------------------------------

    def check_input_size(self, text: str) -> str | None:
        """Built-in hook: refuse a message larger than ``input_limit`` bytes."""
        size = len(text.encode("utf-8", "surrogatepass"))
        return self._too_large(size) if size > self.input_limit else None

    def check_context_window(self, text: str) -> str | None:
        """Built-in hook: refuse a turn that cannot fit the window (with ``auto_compact``, not
        even once compacted)."""
        return self.keeper.turn_problem(text)

    def _too_large(self, size: int) -> str:
        return (
            f"the message is {format_size(size)}, over the limit of "
            f"{format_size(self.input_limit)} per message: shorten it, or send it in parts"
        )

    def reject_oversized(self, size: int) -> TurnEnd:
        """Record a turn rejected for a message of ``size`` bytes that was never read whole.

        For front doors that stop reading an over-long line: the text is not needed.
        """
        if self._cancellation is not None:
            raise UsageError("a turn is already running in this conversation")
        with self._noting_log_failure():
            self._close_open_turn()
            turn = self._start()
            return self._end(TurnEnd(turn.number, "rejected", reason=self._too_large(size)), turn)

    # -- running a turn ------------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """End the running turn as ``aborted`` with ``reason``; a no-op when idle.

        Call it on the event loop's thread (``loop.add_signal_handler`` does). The first reason
        wins; later calls during the same turn change nothing.
        """
        if self._cancellation is not None:
            self._cancellation.cancel(reason)

    async def run_turn(self, text: str, *, on_event: Observer | None = None) -> TurnEnd:
        """Run one turn for the user's ``text``; return how it ended (also in the log).

        Raises SessionLogError when the log cannot be written, UsageError when a turn is
        already running, and re-raises a cancellation that did not come through ``cancel``
        after recording it.
        """
        with self._running():
            return await self._run(self._start(), text, on_event or _ignore)

    async def compact(
        self, *, on_event: Observer | None = None, focus: str | None = None
    ) -> Compacted | compaction.NotCompacted:
        """Compact now, between turns (``/compact [focus]``): prune, then a summary on ``focus``;
        ``NotCompacted`` says why not. Raises ``HarnessError`` (``CONTEXT_WINDOW_EXCEEDED``, or
        ``ABORTED`` after :meth:`cancel`) and SessionLogError."""
        with self._running() as cancellation:
            try:
                on = on_event or _ignore
                return await self.keeper.compact(None, "manual", cancellation, on, focus=focus)
            except asyncio.CancelledError:
                if cancellation.reason is None or cancellation.foreign():
                    raise
                raise HarnessError(
                    f"compaction cancelled ({cancellation.reason})", ABORTED
                ) from None

    @contextlib.contextmanager
    def _running(self) -> Iterator[Cancellation]:
        """A turn (or a compaction) runs: cancellable, after a turn a failed write left open
        was closed."""
        if self._cancellation is not None:
            raise UsageError("a turn is already running in this conversation")
        task = asyncio.current_task()
        if task is None:
            raise UsageError("a turn must be awaited inside an asyncio task")
        self._cancellation = Cancellation(task)
        try:
            with self._noting_log_failure():
                self._close_open_turn()
                yield self._cancellation
        finally:
            self._cancellation = None

    @property
    def _cancel(self) -> Cancellation:
        assert self._cancellation is not None, "only while a turn runs"
        return self._cancellation

    @contextlib.contextmanager
    def _noting_log_failure(self) -> Iterator[None]:
        """Remember why the log refused a write, to end the turn it left open with it."""
        try:
            yield
        except SessionLogError as exc:
            self._log_failure = FailureRecord.from_exception(exc)
            raise

    def _close_open_turn(self) -> None:
        """End a turn that a failed log write left open, before starting the next.

        Only an earlier ``SessionLogError`` leaves one (a loaded log's open turn was closed as
        ``interrupted`` by the load). Its calls are answered as a load would answer them, so
        the history stays valid. If the log still cannot be written, this raises again and the
        new turn does not start, so turns never nest in the log.
        """
        events = self.log.events
        for index in range(len(events) - 1, -1, -1):
            record = events[index].record
            if isinstance(record, TurnEnd):
                return
            if isinstance(record, TurnStart):
                failure = self._log_failure or FailureRecord(
                    SESSION_LOG, "the end of this turn could not be written"
                )
                records = [event.record for event in events[index:]]
                end = TurnEnd(record.turn, "error", failure)
                self.log.extend(closing_records(records, end), durable=True)
                self._log_failure = None
                return

    def _start(self) -> _Turn:
        """Write the next turn's ``turn/start`` (and the system prompt, in a fresh session)."""
        if self.system_prompt is not None and not self.log.events:
            self.log.append(SystemPrompt(mask(self.system_prompt)))  # AGENTS.md may hold a key
        number = self._next_turn()
        return _Turn(number, self.log.append(TurnStart(number, self.model_name)).seq)

    async def _run(self, turn: _Turn, text: str, on_event: Observer) -> TurnEnd:
        turn.observer = on_event
        try:
            rejection = next((r for hook in self.hooks if (r := hook(self, text))), None)
        except Exception as exc:  # a broken hook fails its turn, it does not crash the program
            return self._fail(turn, exc, on_event)
        if rejection is not None:
            return self._end(TurnEnd(turn.number, "rejected", reason=rejection), turn)
        # One fsync covers both lines: turn/start and the message are on disk before the
        # request leaves.
        self.log.append(UserText(turn.number, mask(text)), durable=True)
        try:
            return await self._steps(turn, on_event)
        except BaseException as exc:
            # From here on nothing awaits: a second cancellation cannot cut the record short.
            return self._ended_by(exc, turn, on_event)

    async def _steps(self, turn: _Turn, on_event: Observer) -> TurnEnd:
        number = 0
        while True:
            self._cancel.check()
            number += 1
            if number > self.max_steps:
                return self._end(TurnEnd(turn.number, "max-steps"), turn)
            if self.budget is not None and (over := self.budget.refuses(self)):
                return self._end(TurnEnd(turn.number, "max-cost", reason=over), turn)
            await self.keeper.before_step(turn, number, self._cancel, on_event)
            if self.budget is not None and (over := self.budget.refuses(self)):  # a summary's cost
                return self._end(TurnEnd(turn.number, "max-cost", reason=over), turn)
            self._write_notes(turn)
            step = turn.step = Step(number)
            try:
                await self._stream(turn, step, on_event)
            except HarnessError as exc:
                # Refused as too long: compact once (summarising what fit), then try again.
                if exc.code != CONTEXT_WINDOW_EXCEEDED or not self.auto_compact or step.shown:
                    raise
                await self.keeper.compact(
                    turn.number, "overflow", self._cancel, on_event, exc, turn_start=turn.first
                )
                step = turn.step = Step(number)
                await self._stream(turn, step, on_event)
            limited = step.finish is not None and step.finish.reason == "max-tokens"
            self._record_step(turn, step, interrupted=False)
            if not step.calls:
                return self._end(
                    TurnEnd(turn.number, "max-tokens" if limited else "completed"), turn
                )
            calls = StepCalls(
                self.log,
                self.toolbox,
                self.approval,
                self._cancel,
                turn.number,
                number,
                on_event,
                before_change=self._checkpoint(turn),
            )
            if limited:
                not_run = _not_run(TOOL_NOT_RUN, "not run: the output token limit was reached")
                for call in step.calls:
                    calls.answer(call, not_run)
                return self._end(TurnEnd(turn.number, "max-tokens"), turn)
            await calls.run(step.calls)

    def _write_notes(self, turn: _Turn) -> None:
        """What the :attr:`notes` have for the model, in the log before the request."""
        records = [record for source in self.notes for record in source(turn.number)]
        if records:
            self.log.extend(records, durable=True)

    def _checkpoint(self, turn: _Turn) -> Callable[[], Awaitable[ToolOutput | None]] | None:
        """What runs before a call that can change files: the turn's checkpoint (SPEC 14)."""
        if self.checkpoints is None:
            return None
        checkpoints = self.checkpoints
        return lambda: checkpoints.before_change(turn.number, self.log, turn.observer)

    def request(self, messages: tuple[Message, ...]) -> ChatRequest:
        """The request a step of this conversation sends, carrying ``messages``."""
        return ChatRequest(
            model=self.model_name,
            messages=messages,
            tools=self.toolbox.specs,
            max_tokens=self.max_tokens,
            thinking=self.thinking,
            reasoning_effort=self.reasoning_effort,
        )

    async def _stream(self, turn: _Turn, step: Step, on_event: Observer) -> None:
        self._history.update(self.log.events)
        request = self.request(tuple(self._history.messages()))
        masked = MaskedStream()
        cancellation = self._cancel
        with cancellation.phase():
            stream = self.model.stream(request)
            try:
                async for received in stream:
                    for event in masked(received):
                        step.add(event)
                        if isinstance(event, RetryNotice):
                            self._note_retry(turn.number, step.number, event)
                        on_event(event)
                    cancellation.check()
            finally:
                # However the stream ended (cut, cancelled, without a Finish), the text it held
                # back was no secret: shown and recorded like the rest.
                for event in masked.held():
                    step.add(event)
                    on_event(event)
                await close_stream(stream)

    def _record_step(self, turn: _Turn, step: Step, *, interrupted: bool) -> None:
        step.recorded = True
        self.log.append(step.record(turn.number, interrupted=interrupted))
        if step.usage is not None:
            self.log.append(StepUsage(turn.number, step.number, step.usage))

    # -- how a turn ends -----------------------------------------------------------------------

    def _ended_by(self, exc: BaseException, turn: _Turn, on_event: Observer) -> TurnEnd:
        """Record the end that ``exc`` means; return it, or re-raise what is not ours to stop.

        Once the turn was cancelled, by :meth:`cancel` or from outside, whatever unwound the
        steps (``CancelledError``, or a failure the cancellation caused) ends it ``aborted``;
        a cancellation from outside then propagates. Otherwise an ``Exception`` is a failure.
        """
        cancellation = self._cancel
        foreign = cancellation.foreign()
        if isinstance(exc, SandboxEscape) and not foreign:
            return self._fail(turn, exc, on_event)  # even after Ctrl-C: the run must stop
        if cancellation.reason is None and not foreign and isinstance(exc, Exception):
            if isinstance(exc, SessionLogError):
                raise exc
            return self._fail(turn, exc, on_event)
        reason = cancellation.reason or external_reason(exc)
        end = self._end(TurnEnd(turn.number, "aborted", reason=reason), turn)
        if isinstance(exc, Exception | asyncio.CancelledError) and not foreign:
            return end
        logger.warning(
            "turn %d of session %s aborted from outside: %s", turn.number, self.log.id, reason
        )
        if isinstance(exc, Exception):
            raise asyncio.CancelledError from exc  # what the canceller is waiting for
        raise exc

    def _fail(self, turn: _Turn, exc: Exception, on_event: Observer) -> TurnEnd:
        failure = FailureRecord.from_exception(exc)
        logger.warning(
            "turn %d of session %s failed [%s]: %s",
            turn.number,
            self.log.id,
            failure.code,
            failure.message,
        )
        end = self._end(TurnEnd(turn.number, "error", failure), turn)
        on_event(TurnFailed(exc))
        return end

    def _end(self, end: TurnEnd, turn: _Turn) -> TurnEnd:
        """Write what the turn left unwritten, then ``turn/end`` durably.

        The step being streamed is kept if it showed anything; calls not answered yet are
        answered (``ABORTED`` for one that had started, ``ABORTED_BEFORE_DISPATCH`` for the
        rest), so every call in the log has its result. Synchronous by design: nothing can cut
        it short.
        """
        step = turn.step
        if step is not None and not step.recorded and step.shown:
            self._record_step(turn, step, interrupted=True)
        if end.kind == "aborted":
            reason = end.reason or "cancelled"
            stopped, not_run = cancelled_failure(reason, True), cancelled_failure(reason, False)
        else:  # a failure outside the tools (the observer, the log) ended the turn
            stopped = FailureRecord(ABORTED, f"stopped: the turn ended {end.kind}")
            not_run = FailureRecord(TOOL_NOT_RUN, f"not run: the turn ended {end.kind}")
        records = [event.record for event in self.log.events[turn.first :]]
        results = answer_unanswered(
            records, turn.number, lambda call, started: stopped if started else not_run
        )
        changes = (
            self.checkpoints.at_turn_end(turn.number, turn.observer) if self.checkpoints else []
        )
        self.log.extend([*results, *changes, end], durable=True)
        return end

    def _note_retry(self, turn: int, step: int, notice: RetryNotice) -> None:
        failure = FailureRecord.from_exception(notice.error)
        logger.info(
            "turn %d: retry %d of %d in %.1f s after: %s",
            turn,
            notice.attempt,
            notice.max_retries,
            notice.delay,
            failure.message,
        )
        self.log.append(
            RetryScheduled(turn, step, notice.attempt, notice.max_retries, notice.delay, failure)
        )

    def _next_turn(self) -> int:
        for event in reversed(self.log.events):
            record = event.record
            if isinstance(record, TurnStart | TurnEnd):
                return record.turn + 1
        return 1


def _ignore(event: LoopEvent) -> None:
    """The observer when the caller has none."""


def _not_run(code: Code, message: str) -> ToolOutput:
    """A call answered without running: ``Error: <message>``."""
    return ToolOutput.failed(HarnessError(message, code))
