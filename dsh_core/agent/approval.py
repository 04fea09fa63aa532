"""Who may let a tool call run (SPEC section 8): a policy, and a person when there is one.

=================================  ==========================  ================================
call                               on a terminal               on a pipe or in one-shot mode
=================================  ==========================  ================================
``read``/``glob``/``grep`` inside  runs                        runs
``read``/``glob``/``grep`` outside asks                        refused unless ``--allow read``
``write``, ``edit`` inside         asks                        refused unless ``--allow write``
``write``, ``edit`` outside        asks, every time            refused
any file tool on a protected path  asks, every time            refused
or a credential (SPEC 10.2, 10.4)
``bash``                           asks                        refused unless ``--allow shell``
``bash`` leaving the sandbox       asks, even with ``--allow`` refused unless ``--sandbox off``
a tool of an MCP server            asks                        refused unless ``--allow mcp``
                                                               or ``--allow mcp:NAME``
``web_fetch``                      asks (always: per host)     refused unless ``--allow web``
``ask_user_question``              asks its own question       an ``Error:`` result
=================================  ==========================  ================================

``--allow`` grants without asking, but never the rows that say "every time": ``--allow write``
covers the working directory only (SPEC 10.3), and a protected path or a credential needs a
person's yes for each call. A person's :class:`Answer` is yes, no (with a reason the model is
told: ``Error: the user rejected tool "bash": use uv``), or always: yes for the rest of the
session to the calls it covers, the same tool within the working directory, and for ``bash``
only commands with the same first word (``always for "pytest ..."``; see
:attr:`~dsh_core.tools.Access.scope`); never a call that must be asked every time.

The policy never reads an answer from anywhere but its :class:`Asker`, which only a front door
with a terminal provides: a pipe has none, so a line ``y`` on stdin can never approve a call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..errors import TOOL_REFUSED
from ..model.seam import ToolCall
from ..records import record
from ..session.events import ApprovalOutcome
from ..tools.base import Access, Invocation, ToolError

__all__ = [
    "ALL_GRANTS",
    "TOOL_GRANTS",
    "Answer",
    "ApprovalPolicy",
    "Asker",
    "Choice",
    "Grant",
    "Question",
    "allowed",
]

Grant = str
"""A name ``--allow`` takes: one of :data:`ALL_GRANTS`, or ``mcp:NAME`` for one MCP server."""
ALL_GRANTS: frozenset[Grant] = frozenset(("read", "write", "shell", "network", "mcp", "web"))
"""Every name ``--allow`` takes but ``all`` and ``mcp:NAME``."""
TOOL_GRANTS: frozenset[Grant] = frozenset(("read", "write", "shell"))
"""What ``--allow all`` grants: every built-in tool, without asking. The network stays closed
to a sandboxed command unless ``--allow network`` says so by name, the tools of MCP servers
(code dsh knows nothing of) ask unless ``--allow mcp`` or ``--allow mcp:NAME`` does, and
``web_fetch`` asks per host unless ``--allow web`` does."""

Choice = Literal["yes", "no", "always"]


@record
class Answer:
    """A person's answer to a :class:`Question`."""

    choice: Choice
    """``always`` is yes, and yes for every later call it covers in this session: the same
    tool with the same :attr:`~dsh_core.tools.Access.scope` (for ``bash``, the same first
    word)."""
    reason: str = ""
    """With ``no``: what the person wants instead, sent to the model with the refusal."""
    covers: str = ""
    """With ``always``: the wider cover the question offered and the person chose
    (:attr:`~dsh_core.tools.Access.always_for`, ``server files``); ``""`` the tool alone."""


@record
class Question:
    """What the person is asked about: the whole call, as the front door shows it."""

    call: ToolCall
    invocation: Invocation


Asker = Callable[[Question], Awaitable[Answer]]
"""Asks the person on a terminal. Cancelling the turn cancels the question."""


@dataclass
class ApprovalPolicy:
    """Decides each call from its :class:`~dsh_core.tools.Access`, asking when it must."""

    grants: frozenset[Grant] = frozenset()
    """What ``--allow`` granted without asking."""
    asker: Asker | None = None
    """The terminal's question; None when stdin is not a terminal (a pipe, a piped one-shot)."""
    sandbox_off: bool = False
    """``--sandbox off``: a command may run outside a sandbox without being asked about it."""
    always: set[tuple[str, str]] = field(default_factory=set)
    """What the person answered ``always`` for in this session: a tool and the
    :attr:`~dsh_core.tools.Access.scope` of its calls (``("bash", "pytest")``), for calls that
    may be remembered (one that reaches outside is asked about every time)."""
    unattended: str = "stdin is not a terminal"
    """Why nobody can be asked when there is no :attr:`asker`, as a refusal says it."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Why the person said no, by call id: what :meth:`refusal` tells the model, and what the
    log records with the decision."""

    @classmethod
    def granting(cls, grants: Iterable[Grant], asker: Asker | None = None) -> ApprovalPolicy:
        return cls(frozenset(grants), asker)

    async def decide(self, call: ToolCall, invocation: Invocation) -> ApprovalOutcome | None:
        """How the call was decided; None when it needs no approval (a read inside)."""
        access = invocation.access
        if access.leaves_sandbox:
            if self.asker is None:
                granted = self.sandbox_off and access.kind in self.grants
                return "granted-by-flag" if granted else "unavailable"
            return await self._ask(call, invocation, remember=False)
        if _person_only(access):
            if self.asker is None:
                return "unavailable"
            return await self._ask(call, invocation, remember=False)
        if access.free or (access.person and access.kind == "read"):
            return None  # a question to the person is its own approval
        unasked = self.unasked(call, access)
        if unasked is not None:
            return unasked
        if self.asker is None:
            return "unavailable"
        return await self._ask(call, invocation, remember=access.may_remember)

    def unasked(self, call: ToolCall, access: Access) -> ApprovalOutcome | None:
        """How a call that needs approval is decided without asking anyone (``--allow``, an
        earlier "always"); None when it would need a person (or is refused)."""
        if access.leaves_sandbox or _person_only(access) or access.free:
            return None
        if access.kind in self.grants or (access.grant and access.grant in self.grants):
            return "granted-by-flag"
        # "Always" covers what stays in the working directory: a yes to reading /etc/hosts
        # is not a yes to reading ~/.ssh.
        remembered = (call.name, access.scope) in self.always or (
            bool(access.always_for) and (access.always_for, "") in self.always
        )
        if remembered and access.may_remember:
            return "allowed-always"
        return None

    async def _ask(
        self, call: ToolCall, invocation: Invocation, *, remember: bool
    ) -> ApprovalOutcome:
        assert self.asker is not None
        answer = await self.asker(Question(call, invocation))
        if answer.choice == "always" and remember:
            if answer.covers and answer.covers == invocation.access.always_for:
                self.always.add((answer.covers, ""))
            else:
                self.always.add((call.name, invocation.access.scope or ""))
            return "allowed-always"
        if answer.choice == "no":
            if answer.reason:
                self.reasons[call.id] = answer.reason
            return "rejected"
        return "allowed"

    def refusal(self, call: ToolCall, access: Access, outcome: ApprovalOutcome) -> ToolError:
        """Why a call did not run, with the way out named (SPEC section 8)."""
        if outcome == "unavailable":
            if _person_only(access):
                return ToolError(_needs_a_person(call.name, access, self.unattended), TOOL_REFUSED)
            if access.leaves_sandbox:
                way_out = "run with --sandbox off, or let it run in the sandbox"
            else:
                way_out = f"run with --allow {access.grant or access.kind}"
            return ToolError(
                f'tool "{call.name}" needs approval and {self.unattended}; {way_out}',
                TOOL_REFUSED,
            )
        reason = self.reasons.get(call.id)
        said = f": {reason}" if reason else ""
        return ToolError(f'the user rejected tool "{call.name}"{said}', TOOL_REFUSED)


def _person_only(access: Access) -> bool:
    """SPEC 10.2-10.4: a call that only a person's yes lets run, each time (no flag, no
    "always"): a change outside the working directory, or any call on a protected path or a
    credential."""
    return bool(access.protected) or (access.kind == "write" and bool(access.outside))


def _needs_a_person(name: str, access: Access, unattended: str) -> str:
    """Why a call that only a person may allow was refused where there is nobody to ask."""
    if access.protected:
        what = f'tool "{name}" touches {"; ".join(access.protected)}'
    else:
        what = (
            f'tool "{name}" writes outside the working directory ({", ".join(access.outside)}); '
            "--allow write covers the working directory only"
        )
    return f"{what}: only a person may allow that, call by call, and {unattended}"


def allowed(outcome: ApprovalOutcome | None) -> bool:
    """Whether a decision lets the call run."""
    return outcome in (None, "allowed", "allowed-always", "granted-by-flag")
