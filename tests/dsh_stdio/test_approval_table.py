"""Who may let a call run (SPEC 8; SPEC 10.2-10.4): the approval table, one row a case.

Each row is a real call, prepared by the real tool in a real working directory (so the row
says where the path resolves: inside, outside, a credential, a protected path), and what
``ApprovalPolicy`` makes of it in the four places of SPEC 8's table: on a terminal and on a
pipe, without and with the ``--allow`` that covers the call. Every row runs with no grant, with
a grant that does not cover it, with its own, and with ``--allow all``. On a terminal a person
answers through the front door's own question (``approve.question_text``, ``parse_answer``):
``a`` where "always" is offered, and where it is not, the ``a`` is asked again and ``y`` given.

    runs        no question, no decision recorded (a read inside)
    granted     by the flag, no question
    refused     no question, no run: a pipe has nobody to ask
    asks        the question, "always" offered, and remembered for the next same call
    each time   the question, no "always", and asked again at the next same call
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from dsh_core.agent.approval import TOOL_GRANTS, ApprovalPolicy, Grant
from dsh_core.model.seam import ToolCall
from dsh_core.session.events import ApprovalOutcome
from dsh_core.tools import Toolbox, Workspace, builtin_tools
from tests.harness import ScriptedAsker

Verdict = Literal["runs", "granted", "refused", "asks", "each time"]
RUNS: Verdict = "runs"
GRANTED: Verdict = "granted"
REFUSED: Verdict = "refused"
ASKS: Verdict = "asks"
EACH_TIME: Verdict = "each time"


@dataclass(frozen=True)
class Row:
    """One call, and its verdict in each place (SPEC 8's columns, split by the flag)."""

    tool: str
    arguments: dict[str, Any]
    grant: Grant
    """The ``--allow`` that covers the call (``shell`` for ``bash``)."""
    terminal: Verdict
    terminal_granted: Verdict
    pipe: Verdict
    pipe_granted: Verdict
    sandbox_off: bool = False
    """``--sandbox off`` as well (what lets a pipe run a call that leaves the sandbox)."""


PERSON_ONLY: tuple[Verdict, Verdict, Verdict, Verdict] = (EACH_TIME, EACH_TIME, REFUSED, REFUSED)
"""Only a person may let it run, call by call: no flag, no "always" (SPEC 10.2-10.4)."""

OUTSIDE = "{outside}"
"""Stands for a directory beside the working directory; ``{home}`` for the user's home."""

TABLE: dict[str, Row] = {
    # read, glob, grep: inside runs; outside asks, or --allow read; credentials only a person
    "read inside": Row("read", {"file_path": "demo.txt"}, "read", RUNS, RUNS, RUNS, RUNS),
    "glob inside": Row("glob", {"pattern": "*.txt"}, "read", RUNS, RUNS, RUNS, RUNS),
    "grep inside": Row("grep", {"pattern": "Hello"}, "read", RUNS, RUNS, RUNS, RUNS),
    "read outside": Row(
        "read", {"file_path": "{outside}/notes.txt"}, "read", EACH_TIME, GRANTED, REFUSED, GRANTED
    ),
    "glob outside": Row(
        "glob", {"pattern": "*", "path": OUTSIDE}, "read", EACH_TIME, GRANTED, REFUSED, GRANTED
    ),
    "grep outside": Row(
        "grep", {"pattern": "x", "path": OUTSIDE}, "read", EACH_TIME, GRANTED, REFUSED, GRANTED
    ),
    "read a credential": Row("read", {"file_path": "{home}/.ssh/id_ed25519"}, "read", *PERSON_ONLY),
    "glob credentials": Row("glob", {"pattern": "*", "path": "{home}/.aws"}, "read", *PERSON_ONLY),
    "grep credentials": Row("grep", {"pattern": "k", "path": "{home}/.ssh"}, "read", *PERSON_ONLY),
    # write, edit: inside asks, or --allow write; outside and protected only a person
    "write inside": Row(
        "write", {"file_path": "new.txt", "content": "x"}, "write", ASKS, GRANTED, REFUSED, GRANTED
    ),
    "edit inside": Row(
        "edit",
        {"file_path": "demo.txt", "old_string": "Hello", "new_string": "Bye"},
        "write",
        ASKS,
        GRANTED,
        REFUSED,
        GRANTED,
    ),
    "write outside": Row(
        "write",
        {"file_path": "{outside}/new.txt", "content": "x"},
        "write",
        *PERSON_ONLY,
    ),
    "edit outside": Row(
        "edit",
        {"file_path": "{outside}/notes.txt", "old_string": "out", "new_string": "in"},
        "write",
        *PERSON_ONLY,
    ),
    "write a git hook": Row(
        "write",
        {"file_path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"},
        "write",
        *PERSON_ONLY,
    ),
    "edit .git/config": Row(
        "edit",
        {"file_path": ".git/config", "old_string": "[core]", "new_string": "[alias]"},
        "write",
        *PERSON_ONLY,
    ),
    "write into .dsh": Row("write", {"file_path": ".dsh/x", "content": "x"}, "write", *PERSON_ONLY),
    "write into .agents": Row(
        "write",
        {"file_path": ".agents/skills/s/SKILL.md", "content": "x"},
        "write",
        *PERSON_ONLY,
    ),
    "write through a symlink to .git/config": Row(
        "write",
        {"file_path": "notes.md", "content": "x"},
        "write",
        *PERSON_ONLY,
    ),
    # bash: asks, or --allow shell; leaving the sandbox asks even so, and a pipe needs both
    # --allow shell and --sandbox off
    "bash": Row("bash", {"command": "pytest -q"}, "shell", ASKS, GRANTED, REFUSED, GRANTED),
    "bash, more than one command": Row(
        "bash", {"command": "make; make install"}, "shell", EACH_TIME, GRANTED, REFUSED, GRANTED
    ),
    "bash leaving the sandbox": Row(
        "bash",
        {"command": "pip install x", "sandbox": False, "justification": "needs the network"},
        "shell",
        *PERSON_ONLY,
    ),
    "bash leaving the sandbox, --sandbox off": Row(
        "bash",
        {"command": "pip install x", "sandbox": False, "justification": "needs the network"},
        "shell",
        EACH_TIME,
        EACH_TIME,
        REFUSED,
        GRANTED,
        sandbox_off=True,
    ),
}


def _cases() -> list[Any]:
    cases = []
    for name, row in TABLE.items():
        other: Grant = "write" if row.grant != "write" else "shell"
        for terminal in (True, False):
            for grants in ((), (other,), (row.grant,), tuple(sorted(TOOL_GRANTS))):
                place = "terminal" if terminal else "pipe"
                flag = "all" if len(grants) > 1 else (grants[0] if grants else "")
                case = f"{name}: {place}" + (f" --allow {flag}" if flag else "")
                cases.append(pytest.param(name, terminal, grants, id=case))
    return cases


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Toolbox, Path]]:
    """The tools of a session in ``work``, beside ``outside``, for a user whose home is
    ``home`` (holding credentials); files the table edits already read in the session. One
    for the whole table: deciding changes nothing in it (each row has its own policy)."""
    tmp_path = tmp_path_factory.mktemp("table")
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    for directory in (home / ".ssh", home / ".aws", work / ".git" / "hooks", outside):
        directory.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (home / ".aws" / "credentials").write_text("[default]\n")
    (work / "demo.txt").write_text("Hello\n")
    (work / ".git" / "config").write_text("[core]\n")
    (work / "notes.md").symlink_to(work / ".git" / "config")
    (outside / "notes.txt").write_text("out of bounds\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.chdir(work)
        workspace = Workspace.at(work, output_dir=home / ".dsh" / "tool-output")
        tools = Toolbox(builtin_tools(workspace, launcher=lambda: _StandInSandbox()))
        for path in ("demo.txt", ".git/config", str(outside / "notes.txt")):
            read = tools.prepare(ToolCall("r", "read", json.dumps({"file_path": path})))
            asyncio.run(_run(read.run))  # write and edit change only what the session has read
        yield tools, tmp_path


async def _run(run: Callable[[], Awaitable[object]]) -> None:
    await run()


class _StandInSandbox:
    """A sandbox the policy sees (a call may leave it); nothing here runs a command."""

    note = "(sandboxed: a stand-in)"

    def explain(self, output: str) -> str:
        return ""

    def wrap(self, argv: Any) -> list[str]:
        raise AssertionError("the table runs no command")

    def launch(self, argv: Any) -> Any:
        raise AssertionError("the table runs no command")


def _call(row: Row, tmp_path: Path) -> ToolCall:
    text = json.dumps(row.arguments)
    text = text.replace(OUTSIDE, str(tmp_path / "outside")).replace(
        "{home}", str(tmp_path / "home")
    )
    return ToolCall("call_1", row.tool, text)


@pytest.mark.parametrize(("name", "terminal", "grants"), _cases())
def test_the_approval_table(
    name: str, terminal: bool, grants: tuple[Grant, ...], session: tuple[Toolbox, Path]
) -> None:
    toolbox, tmp_path = session
    row = TABLE[name]
    granted = row.grant in grants
    if terminal:
        expected = row.terminal_granted if granted else row.terminal
    else:
        expected = row.pipe_granted if granted else row.pipe
    # "a" where always is offered; where it is not, the question asks again and gets "y".
    person = ScriptedAsker(["a", "y", "a", "y"]) if terminal else None
    policy = ApprovalPolicy(frozenset(grants), person, sandbox_off=row.sandbox_off)
    call = _call(row, tmp_path)
    invocation = toolbox.prepare(call)

    def decide() -> ApprovalOutcome | None:
        return asyncio.run(policy.decide(call, invocation))

    first, again = decide(), decide()
    asked = person.asked if person is not None else []
    verdict = _verdict(first, again, asked)
    assert verdict == expected, (first, again, [layout.prompt for layout in asked])
    if asked:  # what was asked shows the call as the terminal shows it
        assert asked[0].prompt.startswith(f"Allow {row.tool}? ")


def _verdict(
    first: ApprovalOutcome | None, again: ApprovalOutcome | None, asked: list[Any]
) -> Verdict | str:
    """What a pair of the same call's decisions, and the questions asked, amount to."""
    match (first, again, len(asked)):
        case (None, None, 0):
            return RUNS
        case ("granted-by-flag", "granted-by-flag", 0):
            return GRANTED
        case ("unavailable", "unavailable", 0):
            return REFUSED
        case ("allowed-always", "allowed-always", 1) if asked[0].always:
            return ASKS
        case ("allowed", "allowed", 2) if not any(layout.always for layout in asked):
            return EACH_TIME
    return f"unexpected: {first}, then {again}, asked {len(asked)} times"
