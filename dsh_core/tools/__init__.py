"""Tools the agent loop runs for the model, and the toolbox that holds them (SPEC section 7).

    workspace = Workspace.at(Path.cwd(), output_dir=log.path.parent / "tool-output")
    toolbox = Toolbox(builtin_tools(workspace, launcher=lambda: UNSANDBOXED))

``read``, ``glob`` and ``grep`` read; ``write`` and ``edit`` change files; ``bash`` runs a
command. What each needs is an :class:`Access`, which the approval policy decides on. The
built-in tools' descriptions (:mod:`.specs`) are all a request needs; each tool's code is
imported when the model first calls it, so that a run that calls none does not pay for them.

May import: the leaves, :mod:`dsh_core.model`, :mod:`dsh_core.session`, :mod:`dsh_core.trust`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..model.seam import ToolSpec
from ..trust.launchers import UNSANDBOXED as UNSANDBOXED
from ..trust.launchers import Launcher as Launcher
from ..trust.workspace import Workspace as Workspace
from . import specs
from .base import Access as Access
from .base import AccessKind as AccessKind
from .base import Invocation as Invocation
from .base import Tool as Tool
from .base import Toolbox as Toolbox
from .base import ToolError as ToolError
from .base import ToolOutput as ToolOutput

__all__ = [
    "UNSANDBOXED",
    "Access",
    "AccessKind",
    "Invocation",
    "Launcher",
    "Tool",
    "ToolError",
    "ToolOutput",
    "Toolbox",
    "Workspace",
    "builtin_tools",
]


class _Deferred:
    """A built-in tool known by its spec; its code is imported at the first call."""

    def __init__(self, spec: ToolSpec, load: Callable[[], Tool]) -> None:
        self.spec = spec
        self._load = load
        self._tool: Tool | None = None

    def _loaded(self) -> Tool:
        if self._tool is None:
            self._tool = self._load()
        return self._tool

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return self._loaded().describe(arguments)

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        return self._loaded().prepare(arguments)


def builtin_tools(
    workspace: Workspace, *, launcher: Callable[[], Launcher] = lambda: UNSANDBOXED
) -> list[Tool]:
    """``read``, ``glob``, ``grep``, ``write``, ``edit`` and ``bash``, working in ``workspace``.

    ``launcher`` gives what runs ``bash`` (a sandbox), asked for when ``bash`` is first used.
    """

    def read() -> Tool:
        from .read import ReadTool

        return ReadTool(workspace)

    def glob() -> Tool:
        from .search import GlobTool

        return GlobTool(workspace)

    def grep() -> Tool:
        from .search import GrepTool

        return GrepTool(workspace)

    def write() -> Tool:
        from .edit import WriteTool

        return WriteTool(workspace)

    def edit() -> Tool:
        from .edit import EditTool

        return EditTool(workspace)

    def bash() -> Tool:
        from .shell import BashTool

        return BashTool(workspace, launcher=launcher())

    return [
        _Deferred(specs.READ, read),
        _Deferred(specs.GLOB, glob),
        _Deferred(specs.GREP, grep),
        _Deferred(specs.WRITE, write),
        _Deferred(specs.EDIT, edit),
        _Deferred(specs.BASH, bash),
    ]
