"""Running the calls of one step: approval, the durable events, results in the model's order.

    calls = StepCalls(log, toolbox, approval, cancellation, turn=3, step=2, on_event=show)
    await calls.run(step.calls)

The loop knows a call only by its :class:`~dsh_core.tools.Access`: a call that needs no
decision (:attr:`~dsh_core.tools.Access.free`: a read inside the working directory, a skill, a
subagent) may run beside the free calls next to it, up to :data:`MAX_CONCURRENT` at once; any
other call waits for those and runs alone, asked about first when it must be (SPEC 13). Results
are written, fsynced, in the model's order, each as soon as it and every call before it have
finished: the log never holds a result before an earlier call's.

A call is prepared (its arguments checked) just before it runs, because a check may depend on
what an earlier call did (``edit`` refuses a file that was not read). Looking ahead for free
calls prepares the next ones early; one that turns out not to be free is prepared again when
its turn comes.

While a tool runs, :func:`running_call` says which call it runs for and lets it report nested
events (a subagent's own tool calls), which reach the observer as :class:`Nested`.

Whatever stops the step (Ctrl-C, a failure of the log, a command that left what the sandbox
could not set aside: :class:`~dsh_core.tools.base.SandboxEscape`), every call it started is
answered before the exception goes on: what finished with its result, what was running with
``ABORTED`` and what never started with ``ABORTED_BEFORE_DISPATCH`` (:func:`cancelled_failure`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import ABORTED, ABORTED_BEFORE_DISPATCH, FailureRecord
from ..masking import mask
from ..model.seam import ToolCall
from ..records import record
from ..session import SessionLog
from ..session.events import ApprovalDecided, ToolCallStarted, ToolOutput, ToolResult
from ..tools.base import Invocation, SandboxEscape, Toolbox
from .approval import ApprovalPolicy, allowed
from .cancel import Cancellation

__all__ = [
    "MAX_CONCURRENT",
    "CallEvent",
    "Nested",
    "RunningCall",
    "StepCalls",
    "ToolFinished",
    "ToolProgress",
    "ToolStarting",
    "cancelled_failure",
    "running_call",
]

MAX_CONCURRENT = 8
"""Free calls of one step that run at the same time at most (SPEC 13)."""


@record
class ToolStarting:
    """Live event: the model asked for ``call``; sent before it is approved and run."""

    call: ToolCall
    summary: str
    """One line: ``$ pytest -q``, ``src/app.py``."""
    note: str = ""
    """What the call runs under, e.g. ``(sandboxed: writes only /src, no network)``."""
    preview: str = ""
    """What the call will change, as the approval question shows it: a diff for ``edit``."""


@record
class ToolFinished:
    """Live event: the call's result is in the log."""

    call: ToolCall
    result: ToolResult


@record
class ToolProgress:
    """Live event: a running call said how far it is (an MCP server's progress notification)."""

    call: ToolCall
    text: str
    """``2/5: indexing``: for the live line, as the tool said it (neutralise it to show it)."""


@record
class Nested:
    """Live event: what a tool that runs an agent of its own (``subagent``) reports of it."""

    call: ToolCall
    """The call whose tool reported it."""
    event: ToolStarting | ToolFinished
    """The nested agent's event."""


CallEvent = ToolStarting | ToolFinished | ToolProgress | Nested
"""What running a step's calls tells the observer."""


@record
class RunningCall:
    """The call a tool is running for, as :func:`running_call` gives it to the tool."""

    call: ToolCall
    report: Callable[[ToolStarting | ToolFinished], None]
    """Show an event of the tool's own agent, nested under this call."""
    progress: Callable[[str], None] = lambda text: None
    """Say how far the call is, on its live line (:class:`ToolProgress`)."""


_RUNNING: contextvars.ContextVar[RunningCall | None] = contextvars.ContextVar(
    "dsh_running_call", default=None
)


def running_call() -> RunningCall | None:
    """The call the current task runs a tool for; None outside a tool's ``run()``."""
    return _RUNNING.get()


def cancelled_failure(reason: str, started: bool) -> FailureRecord:
    """The result of a call a cancelled turn left: ``ABORTED`` if it had started, else
    ``ABORTED_BEFORE_DISPATCH``."""
    if started:
        return FailureRecord(ABORTED, f"cancelled while running ({reason})")
    return FailureRecord(ABORTED_BEFORE_DISPATCH, f"not started: the turn was cancelled ({reason})")


@dataclass
class StepCalls:
    """The calls of one step of one turn, run against ``log``."""

    log: SessionLog
    toolbox: Toolbox
    approval: ApprovalPolicy
    cancellation: Cancellation
    turn: int
    step: int
    on_event: Callable[[CallEvent], None]
    before_change: Callable[[], Awaitable[ToolOutput | None]] | None = None
    """Awaited before a call that can change files runs (the turn's checkpoint, SPEC 14); an
    output it returns answers the call instead (the checkpoint could not be taken)."""

    async def run(self, calls: Sequence[ToolCall]) -> None:
        """Run ``calls`` in the model's order, free ones side by side; every one is answered."""
        index = 0
        while index < len(calls):
            self.cancellation.check()
            together = self._free_from(calls, index)
            if together:
                await self._run_together(together)
                index += len(together)
            else:
                await self._run_alone(calls[index])
                index += 1

    def answer(self, call: ToolCall, output: ToolOutput) -> None:
        """Write the call's result (fsynced) and tell the observer."""
        content = mask(output.content) or "(no output)"  # a file or a command may show the key
        if content != output.content:
            output = dataclasses.replace(output, content=content)
        result = ToolResult(self.turn, self.step, call.id, output)
        self.log.append(result, durable=True)
        self.on_event(ToolFinished(call, result))

    def _free_from(
        self, calls: Sequence[ToolCall], index: int
    ) -> list[tuple[ToolCall, Invocation]]:
        """The free calls from ``index`` on, up to the first that is not (prepared)."""
        found: list[tuple[ToolCall, Invocation]] = []
        for call in calls[index:]:
            try:
                invocation = self.toolbox.prepare(call)
            except Exception:  # run alone, where its failure becomes its result
                break
            if not invocation.access.free and not self._granted_read(call, invocation):
                break
            found.append((call, invocation))
        return found

    def _granted_read(self, call: ToolCall, invocation: Invocation) -> bool:
        """A call that says it only reads (an MCP tool's ``readOnlyHint``) and is granted
        without a question (``--allow mcp:NAME``, an "always"): it may run with the reads."""
        access = invocation.access
        return access.read_only and self.approval.unasked(call, access) is not None

    @contextlib.contextmanager
    def _running(self, call: ToolCall) -> Iterator[None]:
        def report(event: ToolStarting | ToolFinished) -> None:
            self.on_event(Nested(call, event))

        def progress(text: str) -> None:
            self.on_event(ToolProgress(call, text))

        token = _RUNNING.set(RunningCall(call, report, progress))
        try:
            yield
        finally:
            _RUNNING.reset(token)

    async def _run_alone(self, call: ToolCall) -> None:
        cancellation = self.cancellation
        try:
            invocation = self.toolbox.prepare(call)
        except Exception as exc:  # bad arguments, or a tool that could not be set up
            self.on_event(ToolStarting(call, self.toolbox.describe(call)))
            self.answer(call, ToolOutput.failed(exc))
            return
        # The prepared summary may say more than the arguments do (where a link leads).
        self.on_event(_starting(call, invocation))
        with cancellation.phase():
            try:
                outcome = await self.approval.decide(call, invocation)
            except asyncio.CancelledError:
                if cancellation.reason is not None:  # Ctrl-C at the question
                    self.log.append(ApprovalDecided(self.turn, call.id, "cancelled"))
                raise
        if outcome is not None:
            reason = self.approval.reasons.get(call.id)  # a no with a reason: the person's words
            self.log.append(ApprovalDecided(self.turn, call.id, outcome, reason and mask(reason)))
        if not allowed(outcome):
            assert outcome is not None
            refusal = self.approval.refusal(call, invocation.access, outcome)
            self.answer(call, ToolOutput.failed(refusal))
            return
        if self.before_change is not None and invocation.access.changes_anything:
            with cancellation.phase():
                refused = await self.before_change()
            if refused is not None:
                self.answer(call, refused)
                return
        started = ToolCallStarted(self.turn, self.step, call.id, call.name, call.arguments)
        self.log.append(started, durable=invocation.access.changes_anything)
        with cancellation.phase(), self._running(call):
            try:
                output = await invocation.run()
            except SandboxEscape as exc:  # answered, then the turn fails: the run must stop
                self.answer(call, exc.output)
                raise
            except Exception as exc:  # a tool's failure is a result for the model, not the turn's
                output = ToolOutput.failed(exc)
        # A tool may stop on a cancellation and return its partial output instead of raising:
        # the output is kept, and the next check ends the turn.
        self.answer(call, output)

    async def _run_together(self, batch: list[tuple[ToolCall, Invocation]]) -> None:
        """Run free calls side by side; write their results in order as they come in."""
        started = [False] * len(batch)
        limit = asyncio.Semaphore(MAX_CONCURRENT)

        async def one(index: int) -> ToolOutput:
            call, invocation = batch[index]
            async with limit:
                self.cancellation.check()  # a slot freed by a cancelled call starts nothing
                started[index] = True
                with self._running(call):
                    try:
                        return await invocation.run()
                    except Exception as exc:  # a result for the model; the others go on
                        return ToolOutput.failed(exc)

        for call, invocation in batch:
            self.on_event(_starting(call, invocation))
            granted = self.approval.unasked(call, invocation.access)
            if granted is not None:  # a read-only MCP call: the decision is in the log too
                self.log.append(ApprovalDecided(self.turn, call.id, granted))
            # Reads: on disk with the next fsync (a result's), as for a call run alone.
            self.log.append(
                ToolCallStarted(self.turn, self.step, call.id, call.name, call.arguments)
            )
        tasks = [asyncio.ensure_future(one(index)) for index in range(len(batch))]
        answered = 0
        with self.cancellation.phase():
            try:
                for call, _ in batch:
                    output = await tasks[answered]  # the next in order; the rest run meanwhile
                    self.answer(call, output)
                    answered += 1
                    # A tool that absorbed a cancellation returned: the others must stop too.
                    self.cancellation.check()
            except BaseException:
                # Cancelled (or the log failed): stop the others, then answer every call left,
                # in order, so that none is without its result.
                for task in tasks:
                    task.cancel()
                await _settled(tasks)
                reason = self.cancellation.reason or "cancelled"
                for index in range(answered, len(batch)):
                    task = tasks[index]
                    if task.cancelled() or task.exception() is not None:
                        failure = cancelled_failure(reason, started[index])
                        output = ToolOutput(failure.as_tool_result, failure)
                    else:
                        output = task.result()
                    with contextlib.suppress(Exception):  # the log may be what failed
                        self.answer(batch[index][0], output)
                raise


def _starting(call: ToolCall, invocation: Invocation) -> ToolStarting:
    return ToolStarting(call, invocation.summary, invocation.access.note, invocation.preview)


async def _settled(tasks: Sequence[asyncio.Future[ToolOutput]]) -> None:
    """Wait until every task has ended, whatever cancels the wait meanwhile: a call's result
    must be known before the step can answer it."""
    while not all(task.done() for task in tasks):
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait(tasks)
