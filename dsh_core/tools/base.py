"""What a tool is to the agent loop, and the toolbox that holds the tools of one conversation.

A tool checks a call's arguments and says what running it needs (:class:`Access`, which the
approval policy decides on) before anything happens; only then is it run::

    toolbox = Toolbox([ReadTool(workspace), BashTool(workspace)])
    invocation = toolbox.prepare(call)     # ToolError: unknown tool, invalid arguments
    ...                                    # approval, on Access
    output = await invocation.run()        # a ToolOutput; failures are results too

Every failure of a call reaches the model as ``Error: <error_chain>`` and the turn goes on
(SPEC section 7). Cancelling the task that awaits ``run()`` must stop the work: a tool either
lets ``CancelledError`` through, or stops and returns a result that says so.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

from ..errors import SANDBOX_ESCAPE, TOOL_FAILED, Code, HarnessError
from ..model.seam import ToolCall, ToolSpec
from ..records import record
from ..session.events import ToolOutput as ToolOutput

__all__ = [
    "Access",
    "AccessKind",
    "Invocation",
    "SandboxEscape",
    "Tool",
    "ToolError",
    "ToolOutput",
    "Toolbox",
    "count_lines",
]

AccessKind = Literal["read", "write", "shell", "mcp", "web"]
"""What a call does, as ``--allow`` names it: reads files, changes files, runs commands,
calls a tool of an MCP server (which may do any of these: dsh cannot tell), or fetches a page
from the web (dsh itself, outside the sandbox)."""


class ToolError(HarnessError):
    """A tool call that cannot run or did not work: bad arguments, a missing file, a timeout."""

    def __init__(self, message: str, code: Code = TOOL_FAILED) -> None:
        super().__init__(message, code)


class SandboxEscape(HarnessError):
    """A sandboxed command ran, and left what dsh could not set aside (SPEC 10.12): the call
    is answered with ``output``, and then the turn fails and the run stops, never goes on.

    The one tool failure that ends a turn: what stayed would run outside the sandbox (the
    user's next ``git``, dsh's next start) or steer the next session.
    """

    def __init__(self, output: ToolOutput, paths: Iterable[str]) -> None:
        self.output = output
        self.paths = tuple(paths)
        shown = ", ".join(self.paths)
        super().__init__(
            f"a sandboxed command left {shown}, which dsh could not set aside: it would run or "
            "steer something outside the sandbox; dsh stopped, look at it (and remove it) "
            "before you run git or dsh there again",
            SANDBOX_ESCAPE,
        )


@record
class Access:
    """What running one call needs: the approval policy decides on this alone."""

    kind: AccessKind
    outside: tuple[str, ...] = ()
    """Paths the call touches that resolve outside the working directory."""
    leaves_sandbox: bool = False
    """A command that asked to run outside the sandbox: always asked on a terminal."""
    protected: tuple[str, ...] = ()
    """Protected paths and credentials the call touches (SPEC 10.2, 10.4; see
    :mod:`dsh_core.trust.policy`), as the question shows them: asked every time on a terminal,
    refused on a pipe whatever ``--allow`` says."""
    note: str = ""
    """A remark for the approval question, e.g. ``(sandboxed: writes only /src, no network)``."""
    scope: str | None = ""
    """What a person's "always" to this call covers of the tool's later calls: ``""`` all of
    them; a command's first word (``pytest``) the commands that begin with it; None nothing,
    for a call that no "always" may cover (a command that is not one simple command)."""
    grant: str = ""
    """A narrower ``--allow`` name that also lets the call run without asking (``mcp:files``
    for the tools of one MCP server); the way out a refusal names, when set."""
    scope_label: str = ""
    """How the question names what an "always" covers, when not as a command's first word
    (``"pytest ..."``): ``example.com`` for ``web_fetch``, whose scope is the host."""
    person: bool = False
    """The call asks the person something itself (``ask_user_question``): it needs no
    approval, and runs alone, never beside other calls."""
    read_only: bool = False
    """The call says it changes nothing (an MCP tool's ``readOnlyHint``): once granted without
    a question, it may run beside the free reads of its step."""
    always_for: str = ""
    """What a person's "always" may cover instead of this tool alone: ``server files`` (every
    tool of the MCP server ``files``); ``""`` the tool alone."""

    @property
    def may_remember(self) -> bool:
        """Whether a person's "always" may cover this call: not when it reaches outside the
        working directory, touches a protected path, leaves the sandbox, or has no scope."""
        return not (self.outside or self.protected or self.leaves_sandbox or self.scope is None)

    @property
    def changes_anything(self) -> bool:
        """Whether the call may change files or run anything (its ``tool/call`` is fsynced)."""
        return self.kind != "read"

    @property
    def free(self) -> bool:
        """Whether the call runs without any decision: a read that stays in the working
        directory and touches nothing protected. Such calls may run side by side."""
        return self.kind == "read" and not (
            self.outside or self.protected or self.leaves_sandbox or self.person
        )


@record
class Invocation:
    """A call whose arguments were checked: what it needs, how it is shown, how it runs."""

    access: Access
    summary: str
    """One line for the transcript and the question: ``$ pytest -q``, ``src/app.py``."""
    run: Callable[[], Awaitable[ToolOutput]]
    preview: str = ""
    """More for the approval question: a unified diff for ``write``/``edit``, whole (the front
    door decides how much of it fits)."""
    quoted: tuple[tuple[str, str], ...] = ()
    """What the model wrote about the call, by what it is (``("justification", "...")``):
    the question shows each quoted on a line of its own, never as dsh's own words."""
    arguments: str = ""
    """The call's arguments laid out for reading (a line a key, text as its own lines), when
    the summary cannot show them whole: the question shows them once, in its details; not a
    diff (an MCP call's)."""


class Tool(Protocol):
    """One tool the model may call."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and argument schema, as the model is told."""
        ...

    def describe(self, arguments: Mapping[str, Any]) -> str:
        """A one-line summary of a call, from its arguments alone (no I/O): ``$ ls -la``."""
        ...

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        """Check the arguments and say what running needs; raises ToolError when it cannot."""
        ...


class Toolbox:
    """The tools of one conversation, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools = {tool.spec.name: tool for tool in tools}
        self.specs: tuple[ToolSpec, ...] = tuple(tool.spec for tool in self._tools.values())
        """What each request tells the model; empty when there are no tools."""

    def __bool__(self) -> bool:
        return bool(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def describe(self, call: ToolCall) -> str:
        """The call's one-line summary; for a call that cannot run, its arguments, shortened."""
        tool = self._tools.get(call.name)
        if tool is not None:
            try:
                return tool.describe(_arguments(call))
            except Exception:  # a summary is decoration: the arguments will do
                pass
        text = " ".join(call.arguments.split())
        return text if len(text) <= 120 else text[:117] + "..."

    def prepare(self, call: ToolCall) -> Invocation:
        """The call checked and ready to approve and run; ToolError says why it cannot be."""
        tool = self._tools.get(call.name)
        if tool is None:
            names = ", ".join(self._tools) or "none"
            raise ToolError(f'unknown tool "{call.name}"; the tools are: {names}')
        return tool.prepare(_arguments(call))


def _arguments(call: ToolCall) -> Mapping[str, Any]:
    problem: str | None = None
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError as exc:
        problem = f"not valid JSON ({exc})"
    else:
        if isinstance(arguments, dict):
            return arguments
        problem = f"a JSON {type(arguments).__name__}, not an object"
    # Raised out here: inside the except, json's own error would repeat in the chain.
    raise ToolError(f"invalid arguments: {problem}")


def count_lines(text: str) -> int:
    """Lines in ``text``, a last line without its newline included."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)
