"""Showing one turn: model text, reasoning, tool lines, notices and the outcome line.

Everything bound for stdout goes through one buffer written once per event-loop iteration, so
the waiting indicator, its erasure, notices, tool lines and text keep their order, and a long
answer costs a few hundred writes, not one per delta.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO, assert_never

from dsh_core.agent.loop import (
    CheckpointNote,
    Compacted,
    Compacting,
    LoopEvent,
    Nested,
    ToolFinished,
    ToolProgress,
    ToolStarting,
    TurnFailed,
)
from dsh_core.chain import error_chain
from dsh_core.model.seam import (
    Finish,
    KeepAlive,
    ReasoningDelta,
    RetryNotice,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    Usage,
)
from dsh_core.session.events import Todo, ToolResult, TurnEnd

from .render import (
    compacted_line,
    neutralise,
    outcome_line,
    output_tail,
    retry_notice,
    todo_mark,
    tool_call_line,
    tool_result_line,
    usage_line,
    writable,
)

if TYPE_CHECKING:
    from .terminal.markdown import AnswerMarkdown

__all__ = ["NESTED", "TurnView"]

NESTED = "  "
"""What a subagent's tool lines begin with, under the call that runs it."""


class TurnView:
    """Shows one turn's live events.

    ``terminal`` decides the decoration: neutralised model text, reasoning shown dim, a
    waiting indicator, tool lines and notices on stdout; on a pipe, text passes through as
    data, and tool lines and notices go to stderr as ``dsh:`` lines, so stdout holds only the
    answers and outcome lines.
    """

    WAITING = "… waiting for the model"
    BUSY = "… server busy, waiting"
    COMPACTING = "… compacting the conversation"
    TICK = 1.0
    """Seconds between two updates of a running tool's line (and before the first)."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        terminal: bool,
        show_reasoning: bool,
        colour: bool = False,
        on_output_error: Callable[[OSError], None] | None = None,
        usage: bool = True,
        markdown: AnswerMarkdown | None = None,
        meter: Callable[[Usage | None], Sequence[str]] | None = None,
    ) -> None:
        """``usage``: end a turn that ran its course with the usage notice (not ``--quiet``);
        ``markdown``: a colour terminal's renderer of the answer's finished blocks (SPEC 17);
        ``meter``: what the usage notice says of the turn's tokens, after them (its dollars,
        how full the context is: SPEC 15)."""
        self._out = out
        self._meter = meter
        self._markdown = markdown
        self._usage = usage
        self._err = err
        self._terminal = terminal
        self._show_reasoning = show_reasoning
        self._colour = colour
        self._pending: list[str] = []
        self._flush_scheduled = False
        self._in_reasoning = False
        self._at_line_start = True
        self._waiting = ""
        """The indicator on screen now, to be erased before anything else is written."""
        self._on_output_error = on_output_error
        self.output_error: OSError | None = None
        """Why stdout refused a write; from then on, output is dropped."""
        self._running: dict[str, ToolStarting] = {}
        """The calls announced and not finished yet, by id (free reads run side by side)."""
        self._asked: set[str] = set()
        """The calls the approval question was asked about (it showed their preview)."""
        self._tool_started = 0.0
        self._progress: dict[str, str] = {}
        """What each running call last said of how far it is, by id (MCP progress)."""
        self._ticker: asyncio.TimerHandle | None = None
        """The next update of the running tool's line."""
        self.begin()

    def begin(self) -> None:
        """A turn starts: its tokens, time and retries are counted from here (``--json`` keeps
        one view for the whole run)."""
        self.usage: Usage | None = None
        """The turn's tokens, summed over its steps."""
        self._retry_chain: str | None = None
        """What the last retry notice of this request said failed."""
        self.started = time.monotonic()

    # Output plumbing.

    def _write(self, text: str) -> None:
        if not text:
            return
        self._clear_waiting()
        self._pending.append(text)
        self._at_line_start = text.endswith("\n")
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        text = "".join(self._pending)
        self._pending.clear()
        if self.output_error is not None:
            return
        try:
            if text:
                self._out.write(text)
            self._out.flush()
        except OSError as exc:  # a full disk, a closed descriptor: nothing more can be shown
            self.output_error = exc
            if self._on_output_error is not None:
                self._on_output_error(exc)

    def notice(self, text: str) -> None:
        """A side remark (retry, usage, a tool line): on stdout on a terminal, else stderr.

        Notices carry server and model words, so they are neutralised like model text.
        """
        self._remark(text, dim=True)

    def _remark(self, text: str, *, dim: bool) -> None:
        text = neutralise(text)
        if self._terminal:
            line = (self._dim(text) if dim else text) + "\n"
            if self._markdown is not None and self._markdown.live:
                self._write(self._markdown.interject(line))  # above the answer's plain tail
                return
            self._end_line()
            self._write(line)
        else:
            self.flush()
            self._to_stderr(f"dsh: {text}\n")

    def _to_stderr(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # stderr is only a side channel
            self._err.write(writable(text))
            self._err.flush()

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self._colour else text

    def _end_line(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def show_waiting(self, text: str = WAITING) -> None:
        """The terminal's 'model is working' indicator, erased by whatever is written next."""
        if not self._terminal or not self._at_line_start:
            return
        self._clear_waiting()
        self._pending.append(text)
        self._waiting = text
        self.flush()  # now: the point is to be seen while nothing else arrives

    def show_status(self, text: str) -> None:
        """A line saying what the turn waits for before its first request (MCP servers still
        starting): the live indicator on a terminal, a notice on a pipe."""
        if self._terminal:
            self.show_waiting(f"… {text}")
        else:
            self.notice(text)

    def _clear_waiting(self) -> None:
        if self._waiting:
            self._pending.append("\r" + " " * len(self._waiting) + "\r")
            self._waiting = ""

    def pause(self) -> None:
        """Put everything on screen and leave the line empty, before someone else writes."""
        self._stop_ticking()
        self._clear_waiting()
        self._end_answer()
        self._end_reasoning_if_open()
        self._end_line()
        self.flush()

    def before_question(self) -> None:
        """The approval question is about to be asked: it shows the call's preview itself."""
        self._asked.update(self._running)
        self.pause()

    def after_question(self) -> None:
        """The question was answered: the call runs now, so its line counts from here."""
        if self._running:
            self._start_ticking()

    # A running tool's live line: "… bash running 12 s (Ctrl-C to stop)", on a terminal.

    def _start_ticking(self) -> None:
        self._stop_ticking()
        self._tool_started = time.monotonic()
        if self._terminal:
            self._ticker = asyncio.get_running_loop().call_later(self.TICK, self._tick)

    def _tick(self) -> None:
        if not self._running:
            return
        seconds = int(time.monotonic() - self._tool_started)
        name = neutralise(", ".join(dict.fromkeys(e.call.name for e in self._running.values())))
        said = "; ".join(self._progress[i] for i in self._running if i in self._progress)
        said = f": {neutralise(said)}" if said else ""
        self.show_waiting(f"… {name} running {seconds} s{said} (Ctrl-C to stop)")
        self._ticker = asyncio.get_running_loop().call_later(self.TICK, self._tick)

    def _tick_now(self) -> None:
        """Show the live line now (progress came), not at the next tick."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._tick()

    def _stop_ticking(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    # Events.

    def on_event(self, event: LoopEvent) -> None:
        match event:
            case TextDelta(text=text):
                self._end_reasoning_if_open()
                self._text(text)
            case ReasoningDelta(text=text):
                self._reasoning(text)
            case KeepAlive():
                if self._waiting != self.BUSY:
                    self.show_waiting(self.BUSY)
            case RetryNotice():
                chain = error_chain(event.error)
                same = event.attempt > 1 and chain == self._retry_chain
                self._retry_chain = chain
                self.notice(retry_notice(event, same_as_before=same))
                self.show_waiting()
            case Usage():
                self.usage = _add(self.usage, event)
            case ToolStarting(call=call, summary=summary, note=note):
                # The step's text ends its line on stdout, on a pipe too: the next step's text
                # starts a line of its own (and `dsh --show` prints it the same way).
                self._end_answer()
                self._end_reasoning_if_open()
                self._end_line()
                self._remark(tool_call_line(call, summary, note), dim=False)
                if not self._running:
                    self._start_ticking()
                self._running[call.id] = event
            case ToolProgress(call=call, text=text):
                self._progress[call.id] = text
                if call.id in self._running:
                    self._tick_now()
            case ToolFinished(call=call, result=result):
                self._progress.pop(call.id, None)
                started = self._running.pop(call.id, None)
                if not self._running:
                    self._stop_ticking()
                if started is not None and call.id not in self._asked and not result.is_error:
                    self._applied(started.preview)
                self._asked.discard(call.id)
                todos = _checklist(call) if not result.is_error else None
                if todos is not None:  # the list itself says what it did (SPEC 16)
                    for todo in todos:
                        self._remark(self._todo_line(todo), dim=todo.status == "completed")
                else:
                    self._remark(tool_result_line(call, result), dim=False)
                self._output_tail(result)
                if not self._running:
                    self.show_waiting()
            case Nested(event=inner):
                # A subagent's own calls, indented under the call that runs it.
                self._end_line()
                if isinstance(inner, ToolStarting):
                    line = tool_call_line(inner.call, inner.summary, inner.note)
                else:
                    line = tool_result_line(inner.call, inner.result)
                self._remark(NESTED + line, dim=False)
            case Compacting():
                self._end_answer()
                self._end_reasoning_if_open()
                self._end_line()
                self.show_waiting(self.COMPACTING)
            case Compacted(tokens_before=before, tokens_after=after, pruned=pruned):
                # Stdout on a terminal, a notice on a pipe: the answers there stay data.
                self._remark(compacted_line(before, after, pruned), dim=False)
                self.show_waiting()
            case CheckpointNote(text=text):
                self.notice(text)
            case Finish() | ToolCallRequest() | TurnFailed():
                pass
            case _:
                assert_never(event)

    def _todo_line(self, todo: Todo) -> str:
        """One item of the model's checklist: indented under its call on a terminal, a
        ``dsh: todo`` notice on a pipe."""
        line = f"{todo_mark(todo.status)} {todo.content}"
        return f"  {line}" if self._terminal else f"todo {line}"

    def _applied(self, preview: str) -> None:
        """On a terminal, the diff of an edit that ran without a question (``[a]``, --allow):
        what changed is shown whether or not anybody was asked."""
        if self._terminal and preview:
            self._write(neutralise(preview).rstrip("\n") + "\n")

    def _output_tail(self, result: ToolResult) -> None:
        """On a terminal, the last lines of a command's output, dim, under its result line."""
        if self._terminal:
            for line in output_tail(result):
                self._write(self._dim("  " + neutralise(line)) + "\n")

    def _text(self, text: str) -> None:
        if not self._terminal:
            self._write(writable(text))
        elif self._markdown is not None:
            self._write(self._markdown.feed(neutralise(text)))
        else:
            self._write(neutralise(text))

    def _end_answer(self) -> None:
        """The answer's text is over for now: its last blocks rendered in place of their tail."""
        if self._markdown is not None:
            self._write(self._markdown.end())

    def _reasoning(self, text: str) -> None:
        if self._terminal:
            if not self._in_reasoning:
                self._end_line()
                self._write(self._dim("thinking: "))
            self._in_reasoning = True
            if text:
                self._write(self._dim(neutralise(text)))
        elif self._show_reasoning:
            self._in_reasoning = True
            self._to_stderr(neutralise(text))  # for a person, not data: nothing raw (10.9)
        else:
            self._in_reasoning = True

    def _end_reasoning_if_open(self) -> None:
        if self._in_reasoning:
            self._in_reasoning = False
            if self._terminal or self._show_reasoning:
                self._end_reasoning()

    def _end_reasoning(self) -> None:
        if self._terminal:
            self._end_line()
            self._write(self._dim("---") + "\n")
        else:
            self._to_stderr("\n")

    def finish(self, end: TurnEnd, *, steps: int | None = None) -> None:
        """End the answer's line, then the outcome line and the usage notice.

        ``steps``: the step limit, which a ``max-steps`` outcome line names.
        """
        self._stop_ticking()
        self._running.clear()
        self._asked.clear()
        self._clear_waiting()
        self._end_answer()
        self._end_reasoning_if_open()  # the turn ended while the model was still thinking
        self._end_line()
        self._outcome(end, steps)
        self.flush()
        if self._usage and end.kind in ("completed", "max-tokens", "max-steps", "max-cost"):
            meter = self._meter(self.usage) if self._meter is not None else ()
            self.notice(usage_line(self.usage, time.monotonic() - self.started, meter))
            self.flush()

    def _outcome(self, end: TurnEnd, steps: int | None) -> None:
        line = outcome_line(end, steps=steps)
        if line is not None:
            self._write(neutralise(line) + "\n")  # it may quote the server's words


def _checklist(call: ToolCall) -> tuple[Todo, ...] | None:
    """The list a ``todo_write`` call set (its result said it was set); None for other calls."""
    if call.name != "todo_write":
        return None
    import json

    from dsh_core.tools.base import ToolError
    from dsh_core.tools.interaction.todo import parse_todos

    try:
        arguments = json.loads(call.arguments or "{}")
        return parse_todos(arguments) if isinstance(arguments, dict) else None
    except (ValueError, ToolError):
        return None


def _add(total: Usage | None, step: Usage) -> Usage:
    if total is None:
        return step
    return Usage(
        total.prompt_tokens + step.prompt_tokens,
        total.completion_tokens + step.completion_tokens,
        total.cached_tokens + step.cached_tokens,
        total.reasoning_tokens + step.reasoning_tokens,
    )
