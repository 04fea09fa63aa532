"""The agent loop: one conversation bound to one session log, run a turn at a time.

    conversation = Conversation(model, log, model_name="deepseek-v4-flash", toolbox=tools)
    end = await conversation.run_turn("fix the failing test", on_event=show)
    if end.kind == "error":
        print(f"[turn failed {end.failure.code}] {end.failure.message}")

A turn is one or more *steps*; a step is one request to the model. When the answer asks for
tool calls, the loop runs them one at a time, in the model's order, and sends their results in
the next step, until the model answers without calls, the step limit is reached, a step fails,
or the turn is cancelled. What each step writes, and when it is fsynced, is listed in
:mod:`dsh_core.events`; the design note is ``docs/notes/2026-12-01-agent-steps.md``.

Every turn ends with exactly one :class:`~dsh_core.events.TurnEnd`, and before it, every call
the model asked for has its result in the log, so the next request is always valid: calls not
run get ``ABORTED_BEFORE_DISPATCH`` (cancelled), ``TOOL_NOT_RUN`` (output limit) or the refusal.

Secrets (SPEC 10.5): what the log stores and the model is sent is masked where it enters the
loop (:mod:`dsh_core.masking`): the model's text, reasoning and calls as they stream in, the
user's message, the system prompt and every tool result. Failures are masked by
``error_chain``.

Cancellation: :meth:`Conversation.cancel` records a reason and cancels the task running the
turn while it waits on the model, on an approval question or on a running tool: one cancellable
phase for all three. While a reason is set, *anything* raised out of the step (``CancelledError``,
the adapter's ``LlmError(ABORTED)``, ...) ends the turn ``aborted`` with that reason, and
``run_turn`` returns normally. A cancellation that did not come through :meth:`cancel`
(``asyncio.run`` shutting down, a timeout around ``run_turn``) is recorded as ``aborted``, reason
``cancelled``, and then propagates as ``CancelledError``, because whoever cancelled the task is
waiting for it to stop. An ``LlmError(ABORTED)`` with no cancellation pending is recorded as
``aborted`` too, never as ``error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from .approval import ApprovalPolicy, allowed
from .errors import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    CONTEXT_WINDOW_EXCEEDED,
    SESSION_LOG,
    TOOL_NOT_RUN,
    FailureRecord,
    HarnessError,
    LlmError,
    SessionLogError,
    UsageError,
)
from .events import (
    ApprovalDecided,
    AssistantStep,
    RetryScheduled,
    StepUsage,
    SystemPrompt,
    ToolCallStarted,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserText,
)
from .fileio import format_size
from .history import History, closing_records, message_tokens
from .llm import (
    ChatModel,
    ChatRequest,
    Event,
    Finish,
    KeepAlive,
    Message,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    Usage,
    UserMessage,
)
from .masking import SECRETS, StreamMasker, mask
from .session import SessionLog
from .tools.base import Toolbox, ToolError, ToolOutput

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_INPUT_LIMIT",
    "DEFAULT_MAX_STEPS",
    "Conversation",
    "LoopEvent",
    "Observer",
    "PreTurnHook",
    "ToolFinished",
    "ToolStarting",
    "TurnFailed",
]

logger = logging.getLogger(__name__)
# A library must not print: without this, Python's last-resort handler writes our warnings to
# stderr when the application has not configured logging.
logger.addHandler(logging.NullHandler())

DEFAULT_INPUT_LIMIT = 256 * 1024
"""Bytes (UTF-8) one user message may have."""

DEFAULT_CONTEXT_WINDOW = 128_000
"""Tokens: the window of DeepSeek's current chat models."""

DEFAULT_MAX_STEPS = 50
"""Model requests one turn may make (``--max-steps``)."""


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """Live event: the turn ended ``error``; sent after ``turn/end`` is written."""

    error: BaseException
    """The raw exception, for consumers that route on it; render it with ``error_chain``."""


@dataclass(frozen=True, slots=True)
class ToolStarting:
    """Live event: the model asked for ``call``; sent before it is approved and run."""

    call: ToolCall
    summary: str
    """One line: ``$ pytest -q``, ``src/app.py``."""
    note: str = ""
    """What the call runs under, e.g. ``(sandboxed: writes only /src, no network)``."""
    preview: str = ""
    """What the call will change, as the approval question shows it: a diff for ``edit``."""


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """Live event: the call's result is in the log."""

    call: ToolCall
    result: ToolResult


LoopEvent = Event | ToolStarting | ToolFinished | TurnFailed
"""What an observer of :meth:`Conversation.run_turn` receives, in order."""

Observer = Callable[[LoopEvent], None]

PreTurnHook = Callable[["Conversation", str], str | None]
"""Runs before a turn is sent; returns a reason to reject the turn (say what to do), or None."""


class _CancelRequested(Exception):
    """Raised inside the turn's own task when ``cancel`` was called from that task."""


def _external_reason(exc: BaseException) -> str:
    """The abort reason for a BaseException that did not come through ``cancel``."""
    if isinstance(exc, KeyboardInterrupt):
        return "user"
    if isinstance(exc, SystemExit):
        return "shutdown"
    return "cancelled"


async def _close_stream(stream: AsyncIterator[Event]) -> None:
    """Close an async-generator stream now, so the adapter releases its connection."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class _MaskedStream:
    """A step's events with the secrets masked (SPEC 10.5).

    Text and reasoning arrive in pieces, and a secret may be split between two: the end of a
    piece that could begin one is held back until the next event shows whether it does. What
    is held is never lost or reordered: any other event lets it out first.
    """

    __slots__ = ("reasoning", "text")

    def __init__(self) -> None:
        self.text = StreamMasker()
        self.reasoning = StreamMasker()

    def __call__(self, event: Event) -> list[Event]:
        if not SECRETS:
            return [event]
        match event:
            case TextDelta(text=text):
                shown = self.text.feed(text)
                out: Event = event if shown == text else TextDelta(shown)
                return [*self._reasoning_held(), out] if self.reasoning.holding else [out]
            case ReasoningDelta(text=text):
                shown = self.reasoning.feed(text)
                out = event if shown == text else ReasoningDelta(shown)
                return [*self._text_held(), out] if self.text.holding else [out]
            case RetryNotice():
                self.text.reset()  # the step starts over, as _Step.add does
                self.reasoning.reset()
                return [event]
            case ToolCallRequest(call=call):
                asked = ToolCall(call.id, mask(call.name), mask(call.arguments))
                return [*self.held(), ToolCallRequest(asked)]
            case _:
                return [*self.held(), event]

    def held(self) -> list[Event]:
        """What is held back, let out: the events before it ended the text."""
        return [*self._reasoning_held(), *self._text_held()]

    def _text_held(self) -> list[Event]:
        held = self.text.flush()
        return [TextDelta(held)] if held else []

    def _reasoning_held(self) -> list[Event]:
        held = self.reasoning.flush()
        return [ReasoningDelta(held)] if held else []


class _Step:
    """What the model's stream delivered so far in one step."""

    __slots__ = ("calls", "finish", "number", "reasoning", "recorded", "text", "usage")

    def __init__(self, number: int) -> None:
        self.number = number
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.usage: Usage | None = None
        self.finish: Finish | None = None
        self.recorded = False
        """Its ``assistant/message`` is in the log."""

    def add(self, event: Event) -> None:
        match event:
            case TextDelta(text=text):
                self.text.append(text)
            case ReasoningDelta(text=text):
                self.reasoning.append(text)
            case ToolCallRequest(call=call):
                self.calls.append(call)
            case Usage():
                self.usage = event  # providers send one; if more, the last is the total
            case Finish():
                self.finish = event
            case RetryNotice():
                # The failed attempt's reasoning was not shown (a pipe hides it) and is not
                # the answer: the retry starts the step over.
                self.text.clear()
                self.reasoning.clear()
            case KeepAlive():
                pass
            case _:
                assert_never(event)

    @property
    def shown(self) -> bool:
        return any(self.text) or any(self.reasoning)

    def record(self, turn: int, *, interrupted: bool) -> AssistantStep:
        return AssistantStep(
            turn=turn,
            step=self.number,
            text="".join(self.text),
            reasoning="".join(self.reasoning) or None,
            tool_calls=tuple(self.calls),
            interrupted=interrupted,
        )


class _Turn:
    """The turn being run: where it stands, for whatever ends it."""

    __slots__ = ("number", "pending", "running", "step")

    def __init__(self, number: int) -> None:
        self.number = number
        self.step: _Step | None = None
        """The step being streamed or whose calls are running."""
        self.pending: list[ToolCall] = []
        """Calls of the recorded step not answered yet, in order."""
        self.running: ToolCall | None = None
        """The call whose ``tool/call`` is written and whose result is not."""


class Conversation:
    """A conversation bound to one session log; its history is derived from that log.

    ``model_name`` and ``max_tokens`` may be changed between turns (``/model``).
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
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        hooks: Sequence[PreTurnHook] = (),
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
        """Tokens the model accepts; a step whose estimate exceeds it does not start."""
        self.hooks: tuple[PreTurnHook, ...] = (
            Conversation.check_input_size,
            Conversation.check_context_window,
            *hooks,
        )
        """Pre-turn checks, built-ins first; the first reason returned rejects the turn."""
        self._task: asyncio.Task[Any] | None = None
        self._cancellable = False
        """The turn is waiting on the model, an approval question or a tool."""
        self._cancel_reason: str | None = None
        self._cancel_sent = False
        self._log_failure: FailureRecord | None = None
        """Why the log last refused a write, while the turn it left open is still open."""
        self._history = History()

    @property
    def history(self) -> list[Message]:
        """The messages the next request carries, derived from the log (a fresh list)."""
        self._history.update(self.log.events)
        return self._history.messages()

    @property
    def running(self) -> bool:
        """True while ``run_turn`` is in progress."""
        return self._task is not None

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
        """Built-in hook: refuse a turn whose estimated request exceeds ``context_window``."""
        self._history.update(self.log.events)
        needed = self._history.tokens + message_tokens(UserMessage(text))
        return self._window_problem(needed)

    def _window_problem(self, needed: int) -> str | None:
        needed += self.max_tokens or 0  # the answer has to fit in the window too
        if needed <= self.context_window:
            return None
        return (
            f"the conversation no longer fits the model's context window (about {needed:,} "
            f"tokens estimated, the window is {self.context_window:,}): start a fresh session "
            "(/new, or dsh without --continue), or shorten the message"
        )

    def _too_large(self, size: int) -> str:
        return (
            f"the message is {format_size(size)}, over the limit of "
            f"{format_size(self.input_limit)} per message: shorten it, or send it in parts"
        )

    def reject_oversized(self, size: int) -> TurnEnd:
        """Record a turn rejected for a message of ``size`` bytes that was never read whole.

        For front doors that stop reading an over-long line: the text is not needed.
        """
        if self._task is not None:
            raise UsageError("a turn is already running in this conversation")
        with self._noting_log_failure():
            self._close_open_turn()
            turn = _Turn(self._next_turn())
            self._start(turn.number)
            return self._end(TurnEnd(turn.number, "rejected", reason=self._too_large(size)), turn)

    # -- running a turn ------------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """End the running turn as ``aborted`` with ``reason``; a no-op when idle.

        Call it on the event loop's thread (``loop.add_signal_handler`` does). The first reason
        wins; later calls during the same turn change nothing.
        """
        task = self._task
        if task is None or self._cancel_reason is not None:
            return
        self._cancel_reason = reason
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop on this thread
            current = None
        # From another task or a loop callback, the turn's task is suspended in a cancellable
        # phase: cancelling it interrupts the request, the question or the tool now. From
        # inside the turn's own task (an observer), the loop checks the reason after each
        # event instead, which avoids a cancellation left pending after the phase is over.
        if self._cancellable and current is not task:
            self._cancel_sent = True
            task.cancel()

    async def run_turn(self, text: str, *, on_event: Observer | None = None) -> TurnEnd:
        """Run one turn for the user's ``text``; return how it ended (also in the log).

        Raises SessionLogError when the log cannot be written, UsageError when a turn is
        already running, and re-raises a cancellation that did not come through ``cancel``
        after recording it.
        """
        if self._task is not None:
            raise UsageError("a turn is already running in this conversation")
        task = asyncio.current_task()
        if task is None:
            raise UsageError("run_turn must be awaited inside an asyncio task")
        self._task, self._cancel_reason, self._cancel_sent = task, None, False
        try:
            with self._noting_log_failure():
                self._close_open_turn()
                return await self._run(task, text, on_event or _ignore)
        finally:
            self._task, self._cancellable = None, False

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
                closing = closing_records(records, TurnEnd(record.turn, "error", failure))
                for item in closing[:-1]:
                    self.log.append(item)
                self.log.append(closing[-1], durable=True)
                self._log_failure = None
                return

    def _start(self, turn: int) -> None:
        if self.system_prompt is not None and not self.log.events:
            self.log.append(SystemPrompt(mask(self.system_prompt)))  # AGENTS.md may hold a key
        self.log.append(TurnStart(turn, self.model_name))

    async def _run(self, task: asyncio.Task[Any], text: str, on_event: Observer) -> TurnEnd:
        turn = _Turn(self._next_turn())
        self._start(turn.number)
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
            end = await self._steps(turn, on_event)
        except BaseException as exc:
            # From here on nothing awaits: a second cancellation cannot cut the record short.
            self._cancellable = False
            return self._ended_by(exc, task, turn, on_event)
        self._settle_cancel(task)  # the last phase finished before a late cancel could stop it
        return end

    async def _steps(self, turn: _Turn, on_event: Observer) -> TurnEnd:
        number = 0
        while True:
            self._check_cancel()
            number += 1
            if number > self.max_steps:
                return self._end(TurnEnd(turn.number, "max-steps"), turn)
            if number > 1:
                self._check_window(turn)
            step = turn.step = _Step(number)
            await self._stream(turn, step, on_event)
            limited = step.finish is not None and step.finish.reason == "max-tokens"
            self._record_step(turn, step, interrupted=False)
            if not step.calls:
                return self._end(
                    TurnEnd(turn.number, "max-tokens" if limited else "completed"), turn
                )
            if limited:
                not_run = ToolError("not run: the output token limit was reached", TOOL_NOT_RUN)
                self._answer_pending(turn, not_run, on_event)
                return self._end(TurnEnd(turn.number, "max-tokens"), turn)
            while turn.pending:
                self._check_cancel()
                await self._run_call(turn, turn.pending[0], on_event)

    def _check_cancel(self) -> None:
        if self._cancel_reason is not None:
            raise _CancelRequested

    def _check_window(self, turn: _Turn) -> None:
        self._history.update(self.log.events)
        problem = self._window_problem(self._history.tokens + self._history.open_tokens)
        if problem is not None:
            raise HarnessError(problem, CONTEXT_WINDOW_EXCEEDED)

    async def _stream(self, turn: _Turn, step: _Step, on_event: Observer) -> None:
        self._history.update(self.log.events)
        request = ChatRequest(
            model=self.model_name,
            messages=tuple(self._history.messages()),
            tools=self.toolbox.specs,
            max_tokens=self.max_tokens,
        )
        masked = _MaskedStream()
        self._cancellable = True
        try:
            stream = self.model.stream(request)
            try:
                async for received in stream:
                    for event in masked(received):
                        step.add(event)
                        if isinstance(event, RetryNotice):
                            self._note_retry(turn.number, step.number, event)
                        on_event(event)
                    self._check_cancel()
            finally:
                # However the stream ended (cut, cancelled, without a Finish), the text it held
                # back was no secret: shown and recorded like the rest.
                for event in masked.held():
                    step.add(event)
                    on_event(event)
                await _close_stream(stream)
        finally:
            self._cancellable = False

    def _record_step(self, turn: _Turn, step: _Step, *, interrupted: bool) -> None:
        step.recorded = True
        self.log.append(step.record(turn.number, interrupted=interrupted))
        if step.usage is not None:
            usage = step.usage
            self.log.append(
                StepUsage(
                    turn.number,
                    step.number,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    usage.cached_tokens,
                    usage.reasoning_tokens,
                )
            )
        turn.pending = list(step.calls)

    async def _run_call(self, turn: _Turn, call: ToolCall, on_event: Observer) -> None:
        assert turn.step is not None
        step = turn.step.number
        try:
            invocation = self.toolbox.prepare(call)
        except Exception as exc:  # bad arguments, or a tool that could not be set up
            on_event(ToolStarting(call, self.toolbox.describe(call)))
            self._answer(turn, call, ToolOutput.failed(exc), on_event)
            return
        # The prepared summary may say more than the arguments do (where a link leads).
        on_event(ToolStarting(call, invocation.summary, invocation.access.note, invocation.preview))
        self._cancellable = True
        try:
            outcome = await self.approval.decide(call, invocation)
        except asyncio.CancelledError:
            if self._cancel_reason is not None:  # Ctrl-C at the question
                self.log.append(ApprovalDecided(turn.number, call.id, "cancelled"))
            raise
        finally:
            self._cancellable = False
        if outcome is not None:
            reason = self.approval.reasons.get(call.id)  # a no with a reason: the person's words
            self.log.append(ApprovalDecided(turn.number, call.id, outcome, reason and mask(reason)))
        if not allowed(outcome):
            assert outcome is not None
            refusal = self.approval.refusal(call, invocation.access, outcome)
            self._answer(turn, call, ToolOutput.failed(refusal), on_event)
            return
        started = ToolCallStarted(turn.number, step, call.id, call.name, call.arguments)
        self.log.append(started, durable=invocation.access.changes_anything)
        turn.running = call
        self._cancellable = True
        try:
            output = await invocation.run()
        except Exception as exc:  # a tool's failure is a result for the model, never the turn's
            output = ToolOutput.failed(exc)
        finally:
            self._cancellable = False
        self._answer(turn, call, output, on_event)
        task = self._task
        if task is not None and task.cancelling() > (1 if self._cancel_sent else 0):
            # A tool that stops on cancellation returns its partial result instead of raising;
            # a cancellation that did not come through cancel() must still end the turn.
            raise asyncio.CancelledError

    def _answer(
        self, turn: _Turn, call: ToolCall, output: ToolOutput, on_event: Observer | None
    ) -> None:
        """Write the call's result (fsynced) and tell the observer."""
        assert turn.step is not None
        result = ToolResult(
            turn=turn.number,
            step=turn.step.number,
            call_id=call.id,
            is_error=output.failure is not None,
            content=mask(output.content) or "(no output)",  # a file or a command may show the key
            error=output.failure,
            exit_code=output.exit_code,
            truncated=output.truncated,
            output_file=output.output_file,
        )
        self.log.append(result, durable=True)
        turn.pending.remove(call)
        turn.running = None
        if on_event is not None:
            on_event(ToolFinished(call, result))

    def _answer_pending(self, turn: _Turn, error: HarnessError, on_event: Observer | None) -> None:
        for call in list(turn.pending):
            self._answer(turn, call, ToolOutput.failed(error), on_event)

    # -- how a turn ends -----------------------------------------------------------------------

    def _ended_by(
        self, exc: BaseException, task: asyncio.Task[Any], turn: _Turn, on_event: Observer
    ) -> TurnEnd:
        """Record the end that ``exc`` means; return it, or re-raise a foreign cancellation."""
        if self._cancel_reason is not None:
            end = self._aborted(turn, self._cancel_reason)
            if self._settle_cancel(task):
                raise asyncio.CancelledError from exc  # someone else cancelled us too
            return end
        # The adapter reports a cancelled request as LlmError(ABORTED): an abort, never an
        # error (SPEC section 5), and a cancellation still pending on the task is not ours.
        aborted_below = isinstance(exc, LlmError) and exc.code == ABORTED
        if isinstance(exc, Exception) and not aborted_below:
            if isinstance(exc, SessionLogError):
                raise exc
            return self._fail(turn, exc, on_event)
        reason = _external_reason(exc)
        end = self._aborted(turn, reason)
        if aborted_below and task.cancelling() == 0:
            return end  # nobody is waiting for this task to stop
        logger.warning(
            "turn %d of session %s aborted from outside: %s", turn.number, self.log.id, reason
        )
        if isinstance(exc, Exception):
            raise asyncio.CancelledError from exc  # what the canceller is waiting for
        raise exc

    def _aborted(self, turn: _Turn, reason: str) -> TurnEnd:
        return self._end(TurnEnd(turn.number, "aborted", reason=reason), turn)

    def _settle_cancel(self, task: asyncio.Task[Any]) -> bool:
        """Withdraw our own task.cancel(); True when other cancellations are still pending."""
        if not self._cancel_sent:
            return False
        self._cancel_sent = False
        return task.uncancel() > 0

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
        answered (``ABORTED`` for the one running, ``ABORTED_BEFORE_DISPATCH`` for the rest), so
        every call in the log has its result. Synchronous by design: nothing can cut it short.
        """
        step = turn.step
        if step is not None and not step.recorded and step.shown:
            self._record_step(turn, step, interrupted=True)
        if end.kind == "aborted":
            stopped = ToolError(f"cancelled while running ({end.reason})", ABORTED)
            not_run = ToolError(
                f"not started: the turn was cancelled ({end.reason})", ABORTED_BEFORE_DISPATCH
            )
        else:  # a failure outside the tools (the observer, the log) ended the turn
            stopped = ToolError(f"stopped: the turn ended {end.kind}", ABORTED)
            not_run = ToolError(f"not run: the turn ended {end.kind}", TOOL_NOT_RUN)
        if turn.running is not None:
            self._answer(turn, turn.running, ToolOutput.failed(stopped), None)
        if turn.pending:
            self._answer_pending(turn, not_run, None)
        self.log.append(end, durable=True)
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
