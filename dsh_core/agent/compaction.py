"""Keeping a long conversation inside its model's context window (SPEC 11): its size, and
compaction, which replaces the older part of the conversation with the model's summary of it.

    keeper = WindowKeeper(conversation, history)     # the conversation owns one
    keeper.window, keeper.size                        # 1_048_576, 61_220
    await keeper.before_step(turn, step, cancellation, on_event)    # compacts at 80%
    await keeper.compact(turn, "overflow", cancellation, on_event, refusal)

**The size** is the last answered request's ``prompt_tokens`` (the server's own count) plus an
estimate of what was added since (:func:`~dsh_core.agent.history.estimate_tokens`). Before any
request was answered, and after a compaction until the next one is, it is the estimate alone.

**When**: before a step whose conversation passes 80% of the window (or would leave the answer
no room), and once after the server refused a request as too long (then the step is retried);
``/compact`` on demand. :class:`~dsh_core.agent.loop.Conversation` decides; this module plans and
runs.

**What is kept** (:func:`plan_compaction`): the summary request carries the conversation up to a
:class:`~dsh_core.agent.history.Mark` (never between a call and its result), all of it when it fits
in the window with room for the answer, and after a refusal only what the last answered request
carried; the exchanges after the kept mark, about 15% of the window, are sent again as they
were, after the summary. Nothing is left out: the kept part starts no later than where the
summarised part ends.

**Prune first** (:mod:`.pruning`, issue 29): every compaction first stubs the old tool results
outside the recent budget (``compaction/prune``, one fsynced line, no model request). Under
pressure that is often enough: a summary is asked for only when the pruned conversation is
still above :data:`PRUNE_ENOUGH` of the window; ``/compact`` (with its focus) and an overflow
refusal always go on to the summary.

**What a summary may cost**: at most :data:`SUMMARY_SHARE` of the window and half of what it
replaces (:func:`summary_budget`), told to the model; a longer one is cut there, and says so.
A compaction whose summary could not make the conversation smaller is not done
(:class:`NotCompacted` says why). The latest user request (when the summary replaces it), the
todo list and the system prompt (with its AGENTS.md text) are sent verbatim, not summarised.

**Durable, and all or nothing**: ``compaction/start``, ``compaction/summary`` and
``compaction/end`` are each fsynced; the history folds the summary in only at the end
(:class:`~dsh_core.agent.history.History`), so a crash or a failure at any point leaves the
conversation as it was. The design notes are ``docs/notes/2026-12-01-long-sessions.md`` and,
for pruning and what a summary may cost, ``docs/notes/2026-12-03-compaction-keeps-what-matters.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Protocol

from ..errors import CONTEXT_WINDOW_EXCEEDED, FailureRecord, HarnessError
from ..model.models import model_facts, stated_window
from ..model.seam import (
    ChatModel,
    ChatRequest,
    Event,
    Message,
    ToolSpec,
    UserMessage,
)
from ..records import record
from ..session import TOOL_OUTPUT_DIR, SessionLog
from ..session.events import (
    CompactionEnd,
    CompactionStart,
    CompactionSummary,
    CompactionTrigger,
)
from ..tools.base import Toolbox
from .cancel import Cancellation
from .history import (
    History,
    Mark,
    SessionUsage,
    checkpoint_message,
    estimate_tokens,
    message_tokens,
)
from .pruning import plan_prune, save_outputs
from .summary import SUMMARY_REQUEST, cut_summary, stream_summary, summary_request

__all__ = [
    "KEPT_SHARE",
    "PRESSURE",
    "PRUNE_ENOUGH",
    "REPL_WINDOW_ADVICE",
    "SUMMARY_REQUEST",
    "SUMMARY_SHARE",
    "Compacted",
    "Compacting",
    "NotCompacted",
    "Plan",
    "WindowAdvice",
    "WindowKeeper",
    "conversation_size",
    "needs_compaction",
    "plan_compaction",
    "summary_budget",
    "summary_request",
    "tools_tokens",
]

PRESSURE = 0.8
"""Share of the window past which a step compacts first."""
KEPT_SHARE = 0.15
"""Share of the window the most recent exchanges keep, as they were, after a compaction."""
SUMMARY_ROOM = 0.1
"""Share of the window left free for the summary itself when choosing what it summarises."""
PRUNE_ENOUGH = 0.6
"""Under pressure, a prune that leaves the conversation at or below this share of the window is
enough: no summary is asked for. (Lower than :data:`PRESSURE`, so that the next prune or summary
is some steps away: each one breaks the prompt cache once.)"""
SUMMARY_SHARE = 0.1
"""The most of the window a summary may take."""
MIN_SUMMARY = 64
"""Tokens a summary needs at least to say anything: with less room, compacting cannot shrink."""


@record
class WindowAdvice:
    """What can be done about a conversation that no longer fits, in the words of whoever is
    told: a person at the REPL or on a pipe, or the model that called a subagent."""

    compact: str | None
    """How to compact it; None where there is no way to. Offered only where automatic
    compaction is off: where it is on, it was tried or counted, and it cannot help."""
    otherwise: str
    """The other ways out (a fresh start, a shorter message)."""

    def text(self, *, can_compact: bool) -> str:
        if can_compact and self.compact:
            return f"{self.compact}, {self.otherwise}"
        return self.otherwise


REPL_WINDOW_ADVICE = WindowAdvice(
    "compact it (/compact)",
    "start a fresh session (/new, or dsh without --continue), or shorten the message",
)
"""At the REPL; a :class:`~dsh_core.agent.loop.Conversation`'s unless it is given another."""


@record
class Compacting:
    """Live event: a compaction starts (its ``compaction/start`` is on disk)."""

    trigger: CompactionTrigger


@record
class Compacted:
    """Live event: a compaction is in force (its ``compaction/end`` is on disk), or a prune
    (its ``compaction/prune`` is)."""

    tokens_before: int
    tokens_after: int
    pruned: int = 0
    """For a prune: the tool results it stubbed; 0 for a summary."""


@record
class NotCompacted:
    """A compaction that was not done, and why, in words for the person (``/compact``)."""

    reason: str


@record
class Plan:
    """What a compaction summarises and what it keeps."""

    summarised: Mark
    """The summary request carries the messages before this mark."""
    kept: Mark
    """The events from this mark on are kept as they are; the summary replaces those before."""
    kept_tokens: int
    """The system prompt, the tools and the kept exchanges, estimated: the size after the
    compaction, but for the summary."""


@functools.lru_cache(maxsize=8)
def tools_tokens(specs: tuple[ToolSpec, ...]) -> int:
    """The estimated tokens of the tools a request offers, as sent (the server counts them)."""
    sent = [
        {"type": "function", "function": {"name": t.name, "description": t.description}}
        | {"parameters": dict(t.parameters)}
        for t in specs
    ]
    return estimate_tokens(json.dumps(sent, ensure_ascii=False)) if specs else 0


def _measured(history: History, tools: int) -> int:
    """What to add to an estimate of messages for the server's count of a request holding
    them: the last measured request's ``prompt_tokens`` less the estimate of its messages (its
    tools, and the estimate's error on what it carried); before a measure, the tools."""
    measure = history.measure
    return tools if measure is None else measure.prompt_tokens - measure.estimate


def conversation_size(history: History, tools: int) -> int:
    """Tokens the next request will hold: the last ``prompt_tokens`` plus what came since.

    ``tools``: the estimated tokens of the tools offered (the server's count includes them).
    """
    return history.tokens + history.open_tokens + _measured(history, tools)


def needs_compaction(size: int, window: int | None, max_tokens: int | None) -> bool:
    """The conversation passed 80% of the window, or leaves the answer no room in it."""
    if window is None:
        return False  # no window known: the server's answer decides
    return size > PRESSURE * window or size + (max_tokens or 0) > window


def plan_compaction(
    history: History,
    *,
    window: int | None,
    tools: int,
    overflow: bool = False,
    below: int | None = None,
) -> Plan | None:
    """What to summarise and what to keep; None when nothing can be summarised.

    The summary covers as much as fits in the window with room left for the summary (all of
    the conversation, normally); after an ``overflow`` refusal, no more than the last answered
    request carried, which fit. ``below``: summarise fewer than this many (estimated) tokens
    (a summary request the server refused as too long). The kept part starts where the most
    recent exchanges fit in about 15% of the window, and no later than the summary ends.
    """
    marks = history.marks()
    fitting = marks
    if overflow:
        measure = history.measure
        fitting = [] if measure is None else [m for m in fitting if m.seq <= measure.seq]
    if window is not None:
        room = window * (1 - SUMMARY_ROOM) - _measured(history, tools)
        room -= estimate_tokens(SUMMARY_REQUEST)
        fitting = [m for m in fitting if m.tokens <= room]
    if below is not None:
        fitting = [m for m in fitting if m.tokens < below]
    # Something besides the system prompt and an earlier checkpoint must be summarised.
    floor = (history.system_tokens > 0) + history.compacted
    fitting = [m for m in fitting if m.count > floor]
    if not fitting:
        return None
    summarised = fitting[-1]
    now = history.tokens + history.open_tokens
    size = now + _measured(history, tools)
    # About 15% of the window; less for a conversation far below it (``/compact``), which must
    # come out smaller than it went in.
    share = KEPT_SHARE * min(window or size, size / PRESSURE)
    kept = next(
        (m for m in marks if m.seq <= summarised.seq and now - m.tokens <= share),
        summarised,
    )
    if kept.count <= floor:
        kept = summarised  # keeping everything would replace nothing
    return Plan(summarised, kept, history.system_tokens + tools + now - kept.tokens)


class Conversing(Protocol):
    """What a :class:`WindowKeeper` reads of its conversation, each time (it may change)."""

    log: SessionLog
    model: ChatModel
    model_name: str
    max_tokens: int | None
    context_window: int | None
    auto_compact: bool
    toolbox: Toolbox
    window_advice: WindowAdvice

    def request(self, messages: tuple[Message, ...]) -> ChatRequest: ...


Observer = Callable[[Event | Compacting | Compacted], None]


class RunningTurn(Protocol):
    """The turn a step belongs to."""

    number: int
    first: int
    """The seq of its ``turn/start``."""


SUMMARY_ATTEMPTS = 3
"""Summary requests one compaction may send: each one the server refuses as too long is sent
again summarising half as much."""


class WindowKeeper:
    """Keeps one conversation inside its context window: how full it is, the checks before a
    turn and a step, and compacting it."""

    def __init__(self, conversation: Conversing, history: History) -> None:
        self._talk = conversation
        self._history = history
        """The conversation's own, kept up to date from its log here too."""

    @property
    def window(self) -> int | None:
        """``context_window``, else the model's known window, and no more than a server's
        refusal stated in this session; None when nothing is known."""
        talk = self._talk
        self._history.update(talk.log.events)
        known = talk.context_window or model_facts(talk.model_name).context_window
        return _smallest(known, self._history.stated_window(talk.model_name))

    @property
    def size(self) -> int:
        """Tokens the next request holds: the last ``prompt_tokens`` and an estimate since."""
        self._history.update(self._talk.log.events)
        return conversation_size(self._history, tools_tokens(self._talk.toolbox.specs))

    @property
    def usage(self) -> SessionUsage:
        """The session's tokens over every answered request, summaries included."""
        self._history.update(self._talk.log.events)
        return self._history.usage

    def turn_problem(self, text: str) -> str | None:
        """Why a turn for ``text`` cannot fit the window (what to do), or None. With automatic
        compaction, what a compaction would leave of the conversation counts."""
        window = self.window
        if window is None:
            return None  # the server's answer decides
        size = self.size
        why = ""
        if self._talk.auto_compact:
            tools = tools_tokens(self._talk.toolbox.specs)
            plan = plan_compaction(self._history, window=window, tools=tools)
            if plan is not None:
                size = min(size, plan.kept_tokens)  # and a summary, which has to be short
            elif plan_compaction(self._history, window=None, tools=tools) is not None:
                # There is something to summarise, but not in a request that fits.
                why = "compacting cannot help: the request for its summary would not fit either"
        return self._problem(size + message_tokens(UserMessage(text)), window, why)

    def _problem(self, needed: int, window: int, why: str = "") -> str | None:
        needed += self._talk.max_tokens or 0  # the answer has to fit in the window too
        if needed <= window:
            return None
        why = f"; {why}" if why else ""
        advice = self._talk.window_advice.text(can_compact=not self._talk.auto_compact)
        return (
            f"the conversation no longer fits the model's context window (about {needed:,} "
            f"tokens, the window is {window:,}{why}): {advice}"
        )

    async def before_step(
        self, turn: RunningTurn, step: int, cancellation: Cancellation, on_event: Observer
    ) -> None:
        """Compact a conversation past 80% of the window: prune, and summarise only when that
        was not enough. One that was not compacted and no longer fits is not sent: a step after
        the first fails (the first was checked before the turn)."""
        window, size = self.window, self.size
        if window is None or not needs_compaction(size, window, self._talk.max_tokens):
            return
        if self._talk.auto_compact:
            compacted = await self.compact(
                turn.number, "pressure", cancellation, on_event, turn_start=turn.first
            )
            if isinstance(compacted, Compacted):
                return  # what came since is estimated: the server decides
            size = self.size
        # Nothing could be compacted: a conversation over the window is not sent.
        if step > 1 and (problem := self._problem(size, window)):
            raise HarnessError(problem, CONTEXT_WINDOW_EXCEEDED)

    def prune(self, turn: int | None, on_event: Observer) -> Compacted | None:
        """Stub the old tool results outside the recent budget (``compaction/prune``, fsynced,
        after the whole outputs are saved); None when there is nothing worth it, or the
        outputs cannot be saved (then nothing changed, and the summary has to do)."""
        talk, history = self._talk, self._history
        before = self.size
        output_dir = talk.log.path.parent / TOOL_OUTPUT_DIR
        basis = self.window or max(1, int(before / PRESSURE))
        plan = plan_prune(history, basis=basis, output_dir=output_dir)
        if plan is None:
            return None
        try:
            save_outputs(plan, output_dir)
        except OSError:
            return None  # a stub must not name a file that is not there: no prune
        talk.log.append(plan.record(turn, before), durable=True)
        history.update(talk.log.events)
        pruned = Compacted(before, self.size, len(plan.pruned))
        on_event(pruned)
        return pruned

    async def compact(
        self,
        turn: int | None,
        trigger: CompactionTrigger,
        cancellation: Cancellation,
        on_event: Observer,
        refusal: HarnessError | None = None,
        *,
        turn_start: int | None = None,
        focus: str | None = None,
    ) -> Compacted | NotCompacted:
        """Compact now: prune, then (but under pressure when the prune was enough) write
        ``compaction/start``, ask for the summary (on ``focus``, if given), then write the
        summary and ``compaction/end`` (each fsynced). The last of them done, or
        :class:`NotCompacted` when there was nothing to summarise or a summary could not shrink
        the conversation (the server then decides); after a ``refusal``, with nothing
        compacted, that raises the refusal again. A compaction that got no summary raises
        ``CONTEXT_WINDOW_EXCEEDED`` with its failure as the cause; ``CancelledError`` passes
        through: the loop owns it.

        Then the log lets go of the events the summary replaced (they stay on disk), but for
        those of the running turn, which starts at ``turn_start``: memory stays flat."""
        talk, history = self._talk, self._history
        pruned = self.prune(turn, on_event)
        if pruned is not None and trigger == "pressure":
            window = self.window
            assert window is not None  # pressure is measured against a window
            if pruned.tokens_after <= PRUNE_ENOUGH * window and not needs_compaction(
                self.size, window, talk.max_tokens
            ):
                return pruned
        size, tools = self.size, tools_tokens(talk.toolbox.specs)
        # What the plan keeps is estimated: it is weighed against the estimate of what there
        # is now, not against the server's count (like with like; the two differ by a third).
        estimate = history.tokens + history.open_tokens + tools
        error = None if refusal is None else FailureRecord.from_exception(refusal)
        stated = stated_window(error.message) if error is not None else None
        window = _smallest(self.window, stated)  # what the refusal says counts already
        plan = plan_compaction(history, window=window, tools=tools, overflow=refusal is not None)
        budget = None if plan is None else summary_budget(history, plan, estimate, window)
        if plan is None or budget is None:
            if refusal is not None and pruned is None:
                raise refusal  # nothing to summarise: the server's refusal stands as it was
            if pruned is not None:
                return pruned
            if plan is None:
                return NotCompacted("nothing to compact yet")
            return NotCompacted(
                f"not compacted: the conversation (about {size:,} tokens) is too short for a "
                "summary to make it smaller"
            )
        start = CompactionStart(turn, trigger, size, window, error)
        talk.log.append(start, durable=True)
        on_event(Compacting(trigger))
        messages = history.messages()
        for attempt in range(1, SUMMARY_ATTEMPTS + 1):
            asked = (
                *messages[: plan.summarised.count],
                UserMessage(summary_request(budget, focus)),
            )
            request = dataclasses.replace(talk.request(asked), tool_choice="none")
            try:
                summary, usage = await stream_summary(talk.model, request, cancellation, on_event)
                break
            except Exception as exc:
                # Refused as too long (the estimate ran short): summarise half as much.
                half = (plan.summarised.tokens + history.system_tokens) // 2
                smaller = plan_compaction(history, window=window, tools=tools, below=half)
                smaller_budget = (
                    None if smaller is None else summary_budget(history, smaller, estimate, window)
                )
                if (
                    not _too_long(exc)
                    or smaller is None
                    or smaller_budget is None
                    or attempt == SUMMARY_ATTEMPTS
                ):
                    raise HarnessError(_failed(start), CONTEXT_WINDOW_EXCEEDED) from exc
                plan, budget = smaller, smaller_budget
        if not summary.strip():
            empty = f"{_failed(start)}: the model's summary was empty"
            raise HarnessError(empty, CONTEXT_WINDOW_EXCEEDED)
        summary = cut_summary(summary, budget)
        estimated_after = plan.kept_tokens + message_tokens(_checkpoint(history, plan, summary))
        # Shown and logged in the server's terms: the estimate scaled as the last measure was.
        after = estimated_after * size // max(estimate, 1)
        if estimated_after >= estimate:  # the budget cannot promise it: checked on the answer
            return pruned or NotCompacted(
                f"not compacted: the summary would not make the conversation smaller (about "
                f"{size:,} -> {after:,} tokens)"
            )
        record = CompactionSummary(turn, summary, plan.kept.seq - 1, size, after, usage)
        talk.log.append(record, durable=True)
        talk.log.append(CompactionEnd(turn), durable=True)
        history.update(talk.log.events)  # in force: nothing needs what it replaced any more
        kept_from = plan.kept.seq if turn_start is None else min(plan.kept.seq, turn_start)
        talk.log.forget(kept_from - 1)
        compacted = Compacted(size, after)
        on_event(compacted)
        return compacted


def _checkpoint(history: History, plan: Plan, summary: str) -> UserMessage:
    """The checkpoint ``summary`` becomes under ``plan``, as the history will fold it."""
    latest = history.latest_request
    replaced = latest is not None and latest[0] <= plan.kept.seq - 1
    request = latest[1] if replaced and latest is not None else None
    return checkpoint_message(summary, request=request, todos=history.todos)


def summary_budget(history: History, plan: Plan, estimate: int, window: int | None) -> int | None:
    """The most tokens a summary under ``plan`` may take: :data:`SUMMARY_SHARE` of the window,
    and half of what it replaces beyond what the checkpoint carries verbatim; None when that
    leaves less than :data:`MIN_SUMMARY` (a summary could not make the conversation smaller).
    ``estimate``: the conversation's estimated size now, as ``plan.kept_tokens`` is."""
    fixed = message_tokens(_checkpoint(history, plan, ""))
    room = (estimate - plan.kept_tokens - fixed) // 2
    budget = min(int(SUMMARY_SHARE * (window or estimate / PRESSURE)), room)
    return budget if budget >= MIN_SUMMARY else None


def _smallest(*windows: int | None) -> int | None:
    return min((w for w in windows if w is not None), default=None)


def _too_long(exc: Exception) -> bool:
    return isinstance(exc, HarnessError) and exc.code == CONTEXT_WINDOW_EXCEEDED


def _failed(start: CompactionStart) -> str:
    why = {
        "pressure": f"the conversation (about {start.tokens:,} tokens) passed "
        f"{PRESSURE:.0%} of the context window" + (f" ({start.window:,})" if start.window else ""),
        "overflow": "the server refused the conversation as too long",
        "manual": "/compact",
    }[start.trigger]
    return f"{why}, and it could not be compacted"
