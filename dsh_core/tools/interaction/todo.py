"""``todo_write {todos}``: the model's working checklist (SPEC 16).

    tool = TodoWriteTool(log)                          # Toolbox([..., tool])
    invocation = tool.prepare({"todos": [{"content": "Run the tests", "status": "pending"}]})
    await invocation.run()                             # todo/write in the log, fsynced

Each call replaces the whole list. The list is checked here (:func:`parse_todos`, which the
front door uses too, to draw the checklist from the call it shows), written to the session log
as ``todo/write`` (fsynced: the latest list is what a compaction sends verbatim,
:attr:`dsh_core.agent.history.History.todos`), and answered with a one-line count. It only
writes dsh's own log: no approval, and it may run beside reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...model.seam import ToolSpec
from ...session import SessionLog
from ...session.events import TODO_STATUSES, Todo, TodoWrite
from .. import specs
from ..base import Access, Invocation, ToolError, ToolOutput

__all__ = ["MAX_TODOS", "MAX_TODO_CHARS", "TodoWriteTool", "parse_todos", "todo_counts"]

MAX_TODOS = 100
"""Items one list may hold: a checklist, not a log."""
MAX_TODO_CHARS = 500
"""Characters of one item."""


def parse_todos(arguments: Mapping[str, Any]) -> tuple[Todo, ...]:
    """The list a ``todo_write`` call sets; ToolError says what is wrong with it."""
    unknown = sorted(set(arguments) - {"todos"})
    if unknown:
        raise ToolError(f"invalid arguments: todo_write takes todos only, not {unknown[0]!r}")
    raw = arguments.get("todos")
    if not isinstance(raw, list):
        raise ToolError("invalid arguments: todos must be a list of {content, status} objects")
    if len(raw) > MAX_TODOS:
        raise ToolError(f"invalid arguments: at most {MAX_TODOS} todos, not {len(raw)}")
    todos = []
    for number, item in enumerate(raw, 1):
        where = f"todo {number}"
        if not isinstance(item, dict):
            raise ToolError(f"invalid arguments: {where} is not a {{content, status}} object")
        content, status = item.get("content"), item.get("status")
        if not isinstance(content, str) or not content.strip():
            raise ToolError(f"invalid arguments: {where} needs a non-empty content")
        if len(content) > MAX_TODO_CHARS:
            raise ToolError(
                f"invalid arguments: {where} is {len(content):,} characters; at most "
                f"{MAX_TODO_CHARS} (a short imperative line)"
            )
        if status not in TODO_STATUSES:
            allowed = ", ".join(TODO_STATUSES)
            raise ToolError(f"invalid arguments: {where} has status {status!r}; use {allowed}")
        extra = sorted(set(item) - {"content", "status"})
        if extra:
            raise ToolError(f"invalid arguments: {where} has an unknown field {extra[0]!r}")
        todos.append(Todo(" ".join(content.split()), status))
    return tuple(todos)


def todo_counts(todos: Sequence[Todo]) -> str:
    """``3 todos: 1 completed, 1 in progress, 1 pending`` (the parts that are not zero)."""
    if not todos:
        return "no todos"
    parts = []
    for status, word in (("completed", "completed"), ("in_progress", "in progress")):
        count = sum(1 for todo in todos if todo.status == status)
        if count:
            parts.append(f"{count} {word}")
    pending = sum(1 for todo in todos if todo.status == "pending")
    if pending:
        parts.append(f"{pending} pending")
    return f"{len(todos)} todo{'' if len(todos) == 1 else 's'}: {', '.join(parts)}"


class TodoWriteTool:
    """``todo_write {todos}``, kept in ``log``."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log

    @property
    def spec(self) -> ToolSpec:
        return specs.TODO_WRITE

    def describe(self, arguments: Mapping[str, Any]) -> str:
        try:
            return todo_counts(parse_todos(arguments))
        except ToolError:
            return "todo list"

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        todos = parse_todos(arguments)

        async def run() -> ToolOutput:
            turn = self._log.open_turn()
            if turn is None:
                raise ToolError("todo_write runs only as a call of a turn")
            self._log.append(TodoWrite(turn, todos), durable=True)
            return ToolOutput(f"The checklist is updated: {todo_counts(todos)}.")

        return Invocation(Access("read"), todo_counts(todos), run)
