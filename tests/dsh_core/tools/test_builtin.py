"""The built-in tools as a set (:func:`dsh_core.tools.builtin_tools`): names, schemas, and one
session's read-write-edit round.

Also the helpers the other ``test_tools_*`` modules share: :class:`Tools` calls a tool the way
the loop does (``Toolbox.prepare`` on a :class:`ToolCall` with JSON arguments, then ``run``),
so argument parsing is always part of what is tested.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_core.model.seam import ToolCall
from dsh_core.tools import Invocation, Toolbox, ToolError, ToolOutput, builtin_tools
from dsh_core.trust.workspace import Workspace


def complete(invocation: Invocation) -> ToolOutput:
    """Run a prepared call to its end, as the loop awaits it."""

    async def main() -> ToolOutput:
        return await invocation.run()

    return asyncio.run(main())


class Tools:
    """The built-in tools of one session, working in ``root`` (``bash`` unsandboxed)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.workspace = Workspace.at(root, root.parent / "output")
        self.box = Toolbox(builtin_tools(self.workspace))

    def call(self, name: str, **arguments: Any) -> ToolCall:
        return ToolCall("call_1", name, json.dumps(arguments))

    def prepare(self, name: str, **arguments: Any) -> Invocation:
        return self.box.prepare(self.call(name, **arguments))

    def run(self, name: str, **arguments: Any) -> str:
        """The result's content; a failure fails the test with its chain."""
        output = complete(self.prepare(name, **arguments))
        assert output.failure is None, output.content
        return output.content

    def error(self, name: str, **arguments: Any) -> str:
        """What the model reads for a call that fails, in prepare or in run: ``Error: ...``."""
        try:
            complete(self.prepare(name, **arguments))
        except ToolError as exc:
            return ToolOutput.failed(exc).content
        raise AssertionError(f"{name} {arguments} did not fail")

    def describe(self, name: str, **arguments: Any) -> str:
        return self.box.describe(self.call(name, **arguments))


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    """The tools with ``tmp_path/work`` as the working directory (``tmp_path`` is outside)."""
    return Tools(tmp_path / "work")


def test_the_six_tools_by_the_reference_harness_names(tools: Tools) -> None:
    specs = {spec.name: spec for spec in tools.box.specs}
    assert list(specs) == ["read", "glob", "grep", "write", "edit", "bash"]
    expected = {
        "read": (["file_path", "offset", "limit"], ["file_path"]),
        "glob": (["pattern", "path"], ["pattern"]),
        "grep": (["pattern", "path", "glob"], ["pattern"]),
        "write": (["file_path", "content"], ["file_path", "content"]),
        "edit": (
            ["file_path", "old_string", "new_string", "replace_all"],
            ["file_path", "old_string", "new_string"],
        ),
        "bash": (
            ["command", "timeout_s", "sandbox", "justification", "run_in_background"],
            ["command"],
        ),
    }
    for name, (properties, required) in expected.items():
        parameters = specs[name].parameters
        assert parameters["type"] == "object"
        assert list(parameters["properties"]) == properties
        assert parameters["required"] == required
        assert parameters["additionalProperties"] is False
        json.dumps(parameters)  # sent as JSON on every request


def test_descriptions_state_the_limits(tools: Tools) -> None:
    described = {spec.name: spec.description for spec in tools.box.specs}
    assert "2000" in described["read"] and "50 KiB" in described["read"]
    assert "binary" in described["read"].lower()
    assert "100" in described["glob"] and ".gitignore" in described["glob"]
    assert "250" in described["grep"] and ".gitignore" in described["grep"]
    assert "read" in described["write"] and "unchanged on disk" in described["write"]
    assert "exactly once" in described["edit"] and "replace_all" in described["edit"]
    for description in described.values():
        assert len(description) < 1000


def test_each_tool_refuses_arguments_it_does_not_take(tools: Tools) -> None:
    (tools.root / "a.txt").write_text("a\n")
    for name, arguments in {
        "read": {"file_path": "a.txt"},
        "glob": {"pattern": "*"},
        "grep": {"pattern": "a"},
        "write": {"file_path": "b.txt", "content": ""},
        "edit": {"file_path": "a.txt", "old_string": "a", "new_string": "b"},
    }.items():
        message = tools.error(name, **arguments, encoding="latin-1")
        assert message.startswith(f'Error: invalid arguments: {name} has no argument "encoding"')


def test_arguments_that_are_not_json_or_not_an_object(tools: Tools) -> None:
    with pytest.raises(ToolError, match="invalid arguments: not valid JSON"):
        tools.box.prepare(ToolCall("c", "read", '{"file_path": '))
    with pytest.raises(ToolError, match="invalid arguments: a JSON list, not an object"):
        tools.box.prepare(ToolCall("c", "read", '["a.txt"]'))


def test_a_session_reads_edits_twice_and_writes(tools: Tools) -> None:
    path = tools.root / "src" / "app.py"
    path.parent.mkdir()
    path.write_text("def main():\n    return 1\n")
    assert tools.error("edit", file_path="src/app.py", old_string="1", new_string="2") == (
        "Error: cannot edit src/app.py: it was not read in this session; "
        "read it first (any part), then edit it"
    )
    assert tools.run("read", file_path="src/app.py") == "     1\tdef main():\n     2\t    return 1"
    assert (
        tools.run("edit", file_path="src/app.py", old_string="return 1", new_string="return 2")
        == "replaced 1 occurrence in src/app.py (line 2)"
    )
    # The tracker holds what the edit wrote: no new read needed for the next change.
    tools.run("edit", file_path="src/app.py", old_string="main", new_string="run")
    assert tools.run("write", file_path="src/app.py", content="x = 1\n") == (
        "wrote 1 line to src/app.py"
    )
    assert path.read_text() == "x = 1\n"
    assert sorted(os.listdir(path.parent)) == ["app.py"]  # no temporary file left behind


def test_a_fresh_workspace_has_read_nothing(tools: Tools) -> None:
    (tools.root / "a.txt").write_text("a\n")
    tools.run("read", file_path="a.txt")
    other = Tools(tools.root)  # a new session in the same directory (/new)
    assert "was not read in this session" in other.error("write", file_path="a.txt", content="b\n")
