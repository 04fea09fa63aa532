"""The approval policy's decision table (SPEC 8, with SPEC 10.2-10.4): one row a case.

Each row is an :class:`Access` (what a call needs), the grants and whether a person is there to
ask; the verdict is what :meth:`ApprovalPolicy.decide` answers and whether it asked. The person
always answers ``always`` when asked, so a row also shows whether that answer was remembered.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from dsh_core.agent.approval import Answer, ApprovalPolicy, Grant, Question
from dsh_core.model.seam import ToolCall
from dsh_core.session.events import ApprovalOutcome
from dsh_core.tools import Access, Invocation, ToolOutput

HOOK = ".git/hooks/pre-commit (protected: .git/hooks/)"
KEY = "~/.ssh/id_ed25519 (credentials: ~/.ssh)"


@dataclass(frozen=True)
class Row:
    access: Access
    grants: tuple[Grant, ...]
    terminal: bool
    outcome: ApprovalOutcome | None
    asked: bool


OUT = ("/home/u/.bashrc",)
READ, WRITE, SHELL = Access("read"), Access("write"), Access("shell")
READ_OUT, WRITE_OUT = Access("read", OUT), Access("write", OUT)
HOOK_WRITE = Access("write", protected=(HOOK,))
KEY_READ, KEY_READ_OUT = Access("read", protected=(KEY,)), Access("read", OUT, protected=(KEY,))
LEAVING = Access("shell", leaves_sandbox=True)
MCP = Access("mcp", grant="mcp:files")
ALL: tuple[Grant, ...] = ("read", "write", "shell")
PIPE, TERMINAL = False, True

TABLE = {
    "read inside runs": Row(READ, (), PIPE, None, False),
    "read outside on a pipe is refused": Row(READ_OUT, (), PIPE, "unavailable", False),
    "read outside with --allow read": Row(READ_OUT, ("read",), PIPE, "granted-by-flag", False),
    "read outside on a terminal asks": Row(READ_OUT, (), TERMINAL, "allowed", True),
    "write inside on a pipe is refused": Row(WRITE, (), PIPE, "unavailable", False),
    "write inside with --allow write": Row(WRITE, ("write",), PIPE, "granted-by-flag", False),
    "write inside may be remembered": Row(WRITE, (), TERMINAL, "allowed-always", True),
    "write outside with --allow write": Row(WRITE_OUT, ("write",), PIPE, "unavailable", False),
    "write outside with --allow all": Row(WRITE_OUT, ALL, PIPE, "unavailable", False),
    "write outside on a terminal": Row(WRITE_OUT, ("write",), TERMINAL, "allowed", True),
    "protected write with --allow all": Row(HOOK_WRITE, ALL, PIPE, "unavailable", False),
    "protected write on a terminal": Row(HOOK_WRITE, ("write",), TERMINAL, "allowed", True),
    "credential read with --allow all": Row(KEY_READ_OUT, ALL, PIPE, "unavailable", False),
    "credential read inside": Row(KEY_READ, (), PIPE, "unavailable", False),
    "credential read on a terminal": Row(KEY_READ, ("read",), TERMINAL, "allowed", True),
    "bash with --allow shell": Row(SHELL, ("shell",), PIPE, "granted-by-flag", False),
    "bash leaving the sandbox": Row(LEAVING, ("shell",), TERMINAL, "allowed", True),
    "mcp on a pipe is refused": Row(MCP, (), PIPE, "unavailable", False),
    "mcp with --allow all is refused": Row(MCP, ALL, PIPE, "unavailable", False),
    "mcp with --allow mcp": Row(MCP, ("mcp",), PIPE, "granted-by-flag", False),
    "mcp with --allow mcp:NAME": Row(MCP, ("mcp:files",), PIPE, "granted-by-flag", False),
    "mcp with another server's name": Row(MCP, ("mcp:other",), PIPE, "unavailable", False),
    "mcp on a terminal, always per tool": Row(MCP, (), TERMINAL, "allowed-always", True),
}


@pytest.mark.parametrize("name", TABLE)
def test_the_decision_table(name: str) -> None:
    row = TABLE[name]
    asked: list[Question] = []

    async def ask(question: Question) -> Answer:
        asked.append(question)
        return Answer("always")

    policy = ApprovalPolicy.granting(row.grants, ask if row.terminal else None)
    call = ToolCall("call_1", "tool", "{}")

    async def run() -> ToolOutput:
        raise AssertionError("the policy never runs a call")

    invocation = Invocation(row.access, "summary", run)
    outcome = asyncio.run(policy.decide(call, invocation))
    assert (outcome, bool(asked)) == (row.outcome, row.asked)
    # Asked once, or never: an "always" for a call that must be asked each time is not kept.
    again = asyncio.run(policy.decide(call, invocation))
    remembered = row.outcome == "allowed-always"
    assert (again == "allowed-always") == remembered
    assert len(asked) == (0 if not row.asked else 1 if remembered else 2)


def test_a_refusal_where_only_a_person_may_allow_says_why_and_offers_no_flag() -> None:
    policy = ApprovalPolicy.granting(["read", "write", "shell"])
    call = ToolCall("call_1", "write", "{}")
    protected = policy.refusal(call, Access("write", protected=(HOOK,)), "unavailable")
    assert str(protected) == (
        f'tool "write" touches {HOOK}: only a person may allow that, call by call, and stdin '
        "is not a terminal"
    )
    outside = policy.refusal(call, Access("write", ("/home/u/.bashrc",)), "unavailable")
    assert str(outside) == (
        'tool "write" writes outside the working directory (/home/u/.bashrc); --allow write '
        "covers the working directory only: only a person may allow that, call by call, and "
        "stdin is not a terminal"
    )
    plain = policy.refusal(call, Access("write"), "unavailable")
    assert str(plain).endswith("run with --allow write")


def test_an_mcp_refusal_names_the_servers_own_grant_and_a_subagent_says_why_nobody_asks() -> None:
    call = ToolCall("call_1", "mcp__files__read", "{}")
    refused = ApprovalPolicy().refusal(call, MCP, "unavailable")
    assert str(refused).endswith("stdin is not a terminal; run with --allow mcp:files")
    child = ApprovalPolicy(unattended="a subagent cannot ask anyone")
    refused = child.refusal(ToolCall("c", "read", "{}"), READ_OUT, "unavailable")
    assert str(refused) == (
        'tool "read" needs approval and a subagent cannot ask anyone; run with --allow read'
    )
