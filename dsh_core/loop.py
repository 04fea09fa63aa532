"""The agent loop: one conversation bound to one session log, run a turn at a time.

    conversation = Conversation(model, log, model_name="deepseek-v4-flash")
    end = await conversation.run_turn("hello", on_event=show)
    if end.kind == "error":
        print(f"[turn failed {end.failure.code}] {end.failure.message}")

A turn writes, in order::

    turn/start      {turn, model}                                   \\ one fsync, before the
    user/message    {turn, text}                                    / request is sent
    retry           {turn, attempt, max_retries, delay, code, message, ...}   (per retry notice)
    assistant/message {turn, text, reasoning?, interrupted?}        (see below)
    usage           {turn, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens}
    turn/end        {turn, reason: {kind, ...}}                      fsync

``assistant/message`` is written for every ``completed`` and ``max-tokens`` turn, and for an
``error`` or ``aborted`` turn only when the stream had already delivered text or reasoning; then it
carries ``interrupted: true`` and its text is part of the next request. Streamed deltas are
collected in memory and never written one by one. A ``rejected`` turn writes only
``turn/start`` and ``turn/end``: the refused message (possibly megabytes) is not stored.

Every turn ends with exactly one :class:`TurnEnd`. The failure of an ``error`` turn is stored as
a :class:`~dsh_core.errors.FailureRecord` whose message is ``error_chain`` of the exception; the
live :class:`TurnFailed` event carries the raw exception for consumers that route on it.

Cancellation: :meth:`Conversation.cancel` records a reason and cancels the task running the
turn. While a reason is set, *anything* raised out of the stream (``CancelledError``, the
adapter's ``LlmError(ABORTED)``, ...) ends the turn ``aborted`` with that reason, and
``run_turn`` returns normally: the cancellation was asked for and has been handled. A
cancellation that did not come through :meth:`Conversation.cancel` (``asyncio.run`` shutting
down, a timeout around ``run_turn``) is recorded as ``aborted``, reason ``cancelled``, and then
propagates as ``CancelledError`` (even when the adapter turned it into ``LlmError(ABORTED)``),
because whoever cancelled the task is waiting for it to stop. An ``LlmError(ABORTED)`` with no
cancellation pending is recorded as ``aborted`` too, never as ``error``, and returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ABORTED, SESSION_LOG, FailureRecord, LlmError, SessionLogError, UsageError
from .llm import (
    ChatModel,
    ChatRequest,
    Event,
    Finish,
    Message,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    Usage,
)
from .session import SessionLog

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_INPUT_LIMIT",
    "Conversation",
    "PreTurnHook",
    "TurnEnd",
    "TurnFailed",
    "estimate_tokens",
]

logger = logging.getLogger(__name__)
# A library must not print: without this, Python's last-resort handler writes our warnings to
# stderr when the application has not configured logging.
logger.addHandler(logging.NullHandler())

DEFAULT_INPUT_LIMIT = 256 * 1024
"""Bytes (UTF-8) one user message may have."""

DEFAULT_CONTEXT_WINDOW = 128_000
"""Tokens: the window of DeepSeek's current chat models."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens each message costs beyond its text (role and separators), for the estimate."""


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """How a turn ended: what ``turn/end`` stores and ``run_turn`` returns."""

    turn: int
    """1 for the first turn of a session."""
    kind: str
    """``completed``, ``error``, ``aborted``, ``rejected``, ``interrupted`` or ``max-tokens``;
    kinds from newer versions read from disk pass through unchanged."""
    failure: FailureRecord | None = None
    """For ``error``: the code, ``error_chain`` message, and the server's details."""
    reason: str | None = None
    """For ``aborted`` (``user``, ``shutdown``, ...) and ``rejected`` (what to do next)."""

    def to_json(self) -> dict[str, Any]:
        """The ``turn/end`` data: ``{turn, reason: {kind, ...}}``."""
        reason: dict[str, Any] = {"kind": self.kind}
        if self.failure is not None:
            reason.update(self.failure.to_json())
        if self.reason is not None:
            reason["reason"] = self.reason
        return {"turn": self.turn, "reason": reason}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnEnd:
        """Read ``turn/end`` data back; tolerant of kinds and fields it does not know."""
        raw = data.get("reason")
        reason: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind = str(reason.get("kind", "unknown"))
        text = reason.get("reason")
        turn = data.get("turn")
        return cls(
            turn=turn if isinstance(turn, int) else 0,
            kind=kind,
            failure=FailureRecord.from_json(reason) if kind == "error" else None,
            reason=text if isinstance(text, str) else None,
        )


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """Live event: the turn ended ``error``; sent after ``turn/end`` is written."""

    error: BaseException
    """The raw exception, for consumers that route on it; render it with ``error_chain``."""


PreTurnHook = Callable[["Conversation", str], str | None]
"""Runs before a turn is sent; returns a reason to reject the turn (say what to do), or None."""

Observer = Callable[[Event | TurnFailed], None]


class _CancelRequested(Exception):
    """Raised inside the turn's own task when ``cancel`` was called from that task."""


def estimate_tokens(text: str) -> int:
    """A rough token count: DeepSeek's rule of thumb, 0.3 per ASCII and 0.6 per other character.

    It only has to tell a conversation that clearly does not fit; the server has the last word.
    """
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars * 0.3 + (len(text) - ascii_chars) * 0.6)


def _message_tokens(message: Message) -> int:
    return estimate_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS


def _append_merged(messages: list[Message], message: Message) -> int:
    """Append ``message``, joined to the last one if it has the same role; the token change."""
    if messages and messages[-1].role == message.role:
        before = _message_tokens(messages[-1])
        messages[-1] = Message(message.role, f"{messages[-1].content}\n\n{message.content}")
        return _message_tokens(messages[-1]) - before
    messages.append(message)
    return _message_tokens(message)


def _size_text(size: int) -> str:
    """``1.2 KiB``: rounded up, so a message just over a limit never reads as equal to it."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{math.ceil(size * 10 / scale) / 10:g} {unit}"
    return f"{size} bytes"


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


class _Answer:
    """What the stream delivered so far."""

    __slots__ = ("finish", "reasoning", "text", "usage")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.usage: Usage | None = None
        self.finish: Finish | None = None

    def add(self, event: Event) -> None:
        match event:
            case TextDelta(text=text):
                self.text.append(text)
            case ReasoningDelta(text=text):
                self.reasoning.append(text)
            case Usage():
                self.usage = event  # providers send one; if more, the last is the total
            case Finish():
                self.finish = event
            case _:
                pass

    @property
    def shown(self) -> bool:
        return any(self.text) or any(self.reasoning)


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
        input_limit: int = DEFAULT_INPUT_LIMIT,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        hooks: Sequence[PreTurnHook] = (),
    ) -> None:
        self.model = model
        self.log = log
        self.model_name = model_name
        self.max_tokens = max_tokens
        self.input_limit = input_limit
        """Bytes (UTF-8) one user message may have; larger ones are rejected."""
        self.context_window = context_window
        """Tokens the model accepts; a turn whose estimate exceeds it is rejected."""
        self.hooks: tuple[PreTurnHook, ...] = (
            Conversation.check_input_size,
            Conversation.check_context_window,
            *hooks,
        )
        """Pre-turn checks, built-ins first; the first reason returned rejects the turn."""
        self._task: asyncio.Task[Any] | None = None
        self._streaming = False
        self._cancel_reason: str | None = None
        self._cancel_sent = False
        self._log_failure: FailureRecord | None = None
        """Why the log last refused a write, while the turn it left open is still open."""
        self._history: list[Message] = []
        """The messages of the turns that ended with an answer."""
        self._open_turn: list[Message] = []
        """The messages of the turn that has started but not ended."""
        self._history_read = 0
        """Log events already folded into ``_history``."""
        self._history_tokens = 0
        """``_message_tokens`` summed over ``_history``."""

    @property
    def history(self) -> list[Message]:
        """The messages the next request carries, derived from the log (a fresh list).

        A turn is part of the conversation once the model answered it: completed, stopped at
        the token limit, or cut after some text was shown (that text is kept, marked
        ``interrupted`` in the log). A turn that failed, was cancelled or was rejected before
        any answer is left out: its question would otherwise ride along with the next one and
        change its meaning. It stays in the log. Two messages of one role in a row (an answer
        with reasoning but no text) are sent as one, joined by a blank line, because some
        DeepSeek models refuse successive messages of the same role.
        """
        return self._derive_history()

    def _derive_history(self) -> list[Message]:
        # Incremental: only events appended since the last call are read, so a turn costs
        # the same at turn 1,000 as at turn 10 (the log is append-only).
        events = self.log.events
        for event in events[self._history_read :]:
            text = event.data.get("text")
            if event.type == "user/message" and isinstance(text, str):
                self._open_turn = [Message("user", text)]
            elif event.type == "assistant/message" and isinstance(text, str) and text:
                self._open_turn.append(Message("assistant", text))
            elif event.type == "turn/end":
                reason = event.data.get("reason")
                kind = reason.get("kind") if isinstance(reason, dict) else None
                answered = any(m.role == "assistant" for m in self._open_turn)
                if answered or kind in ("completed", "max-tokens"):
                    for message in self._open_turn:
                        self._history_tokens += _append_merged(self._history, message)
                self._open_turn = []
        self._history_read = len(events)
        messages = list(self._history)
        for message in self._open_turn:  # the turn being run now
            _append_merged(messages, message)
        return messages

    @property
    def running(self) -> bool:
        """True while ``run_turn`` is in progress."""
        return self._task is not None

    def last_turn_end(self) -> TurnEnd | None:
        """The most recent ``turn/end`` in the log, e.g. one a resume closed as interrupted."""
        for event in reversed(self.log.events):
            if event.type == "turn/end":
                return TurnEnd.from_json(event.data)
        return None

    def check_input_size(self, text: str) -> str | None:
        """Built-in hook: refuse a message larger than ``input_limit`` bytes."""
        size = len(text.encode("utf-8", "surrogatepass"))
        return self._too_large(size) if size > self.input_limit else None

    def check_context_window(self, text: str) -> str | None:
        """Built-in hook: refuse a turn whose estimated request exceeds ``context_window``."""
        self._derive_history()
        needed = self._history_tokens + _message_tokens(Message("user", text))
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
            f"the message is {_size_text(size)}, over the limit of "
            f"{_size_text(self.input_limit)} per message: shorten it, or send it in parts"
        )

    def reject_oversized(self, size: int) -> TurnEnd:
        """Record a turn rejected for a message of ``size`` bytes that was never read whole.

        For front doors that stop reading an over-long line: the text is not needed.
        """
        if self._task is not None:
            raise UsageError("a turn is already running in this conversation")
        with self._noting_log_failure():
            self._close_open_turn()
            turn = self._next_turn()
            self.log.append("turn/start", {"turn": turn, "model": self.model_name})
            return self._record(TurnEnd(turn, "rejected", reason=self._too_large(size)), None)

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
        # From another task or a loop callback, the turn's task is suspended inside the stream:
        # cancelling it interrupts the request now. From inside the turn's own task (an
        # observer), the loop checks the reason after each event instead, which avoids a
        # cancellation left pending after the stream has already finished.
        if self._streaming and current is not task:
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
                return await self._run(task, text, on_event)
        finally:
            self._task, self._streaming = None, False

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
        ``interrupted`` by the load). If the log still cannot be written, this raises again
        and the new turn does not start, so turns never nest in the log.
        """
        for event in reversed(self.log.events):
            if event.type == "turn/end":
                return
            if event.type == "turn/start" and isinstance(turn := event.data.get("turn"), int):
                failure = self._log_failure or FailureRecord(
                    SESSION_LOG, "the end of this turn could not be written"
                )
                self.log.append("turn/end", TurnEnd(turn, "error", failure).to_json(), durable=True)
                self._log_failure = None
                return

    async def _run(self, task: asyncio.Task[Any], text: str, on_event: Observer | None) -> TurnEnd:
        turn = self._next_turn()
        self.log.append("turn/start", {"turn": turn, "model": self.model_name})
        try:
            rejection = next((r for hook in self.hooks if (r := hook(self, text))), None)
        except Exception as exc:  # a broken hook fails its turn, it does not crash the program
            return self._fail(
                TurnEnd(turn, "error", FailureRecord.from_exception(exc)), exc, on_event
            )
        if rejection is not None:
            return self._record(TurnEnd(turn, "rejected", reason=rejection), None)
        # One fsync covers both lines: turn/start and the message are on disk before the
        # request leaves.
        self.log.append("user/message", {"turn": turn, "text": text}, durable=True)
        if self._cancel_reason is not None:
            return self._record(TurnEnd(turn, "aborted", reason=self._cancel_reason), None)

        request = ChatRequest(
            model=self.model_name,
            messages=tuple(self._derive_history()),
            max_tokens=self.max_tokens,
        )
        answer = _Answer()
        self._streaming = True
        try:
            stream = self.model.stream(request)
            try:
                async for event in stream:
                    answer.add(event)
                    if isinstance(event, RetryNotice):
                        self._note_retry(turn, event)
                    if on_event is not None:
                        on_event(event)
                    if self._cancel_reason is not None:
                        raise _CancelRequested
            finally:
                await _close_stream(stream)
        except BaseException as exc:
            # From here on nothing awaits: a second cancellation cannot cut the record short.
            self._streaming = False
            if self._cancel_reason is not None:
                end = self._record(TurnEnd(turn, "aborted", reason=self._cancel_reason), answer)
                if self._settle_cancel(task):
                    raise asyncio.CancelledError from exc  # someone else cancelled us too
                return end
            # The adapter reports a cancelled request as LlmError(ABORTED): an abort, never an
            # error (SPEC section 5), and a cancellation still pending on the task is not ours.
            aborted_below = isinstance(exc, LlmError) and exc.code == ABORTED
            if isinstance(exc, Exception) and not aborted_below:
                failure = FailureRecord.from_exception(exc)
                return self._fail(TurnEnd(turn, "error", failure), exc, on_event, answer)
            reason = _external_reason(exc)
            end = self._record(TurnEnd(turn, "aborted", reason=reason), answer)
            if aborted_below and task.cancelling() == 0:
                return end  # nobody is waiting for this task to stop
            logger.warning(
                "turn %d of session %s aborted from outside: %s", turn, self.log.id, reason
            )
            if isinstance(exc, Exception):
                raise asyncio.CancelledError from exc  # what the canceller is waiting for
            raise
        self._streaming = False
        self._settle_cancel(task)  # the stream finished before a late cancel could stop it
        limited = answer.finish is not None and answer.finish.reason == "max-tokens"
        return self._record(TurnEnd(turn, "max-tokens" if limited else "completed"), answer)

    def _settle_cancel(self, task: asyncio.Task[Any]) -> bool:
        """Withdraw our own task.cancel(); True when other cancellations are still pending."""
        if not self._cancel_sent:
            return False
        self._cancel_sent = False
        return task.uncancel() > 0

    def _fail(
        self,
        end: TurnEnd,
        exc: Exception,
        on_event: Observer | None,
        answer: _Answer | None = None,
    ) -> TurnEnd:
        assert end.failure is not None
        logger.warning(
            "turn %d of session %s failed [%s]: %s",
            end.turn,
            self.log.id,
            end.failure.code,
            end.failure.message,
        )
        self._record(end, answer)
        if on_event is not None:
            on_event(TurnFailed(exc))
        return end

    def _record(self, end: TurnEnd, answer: _Answer | None) -> TurnEnd:
        """Write what the turn produced, then ``turn/end`` durably; synchronous by design."""
        finished = end.kind in ("completed", "max-tokens")
        if answer is not None and (finished or answer.shown):
            data: dict[str, Any] = {"turn": end.turn, "text": "".join(answer.text)}
            if any(answer.reasoning):
                data["reasoning"] = "".join(answer.reasoning)
            if not finished:
                data["interrupted"] = True
            self.log.append("assistant/message", data)
        if answer is not None and answer.usage is not None:
            self.log.append("usage", {"turn": end.turn, **asdict(answer.usage)})
        self.log.append("turn/end", end.to_json(), durable=True)
        return end

    def _note_retry(self, turn: int, notice: RetryNotice) -> None:
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
            "retry",
            {
                "turn": turn,
                "attempt": notice.attempt,
                "max_retries": notice.max_retries,
                "delay": notice.delay,
                **failure.to_json(),
            },
        )

    def _next_turn(self) -> int:
        for event in reversed(self.log.events):
            if event.type in ("turn/start", "turn/end"):
                turn = event.data.get("turn")
                if isinstance(turn, int):
                    return turn + 1
        return 1
