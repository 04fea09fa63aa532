"""Tools the agent loop runs for the model, and the toolbox that holds them (SPEC section 7).

    workspace = Workspace.at(Path.cwd(), output_dir=log.path.parent / "tool-output")
    toolbox = Toolbox(builtin_tools(workspace))

``read``, ``glob`` and ``grep`` read; ``write`` and ``edit`` change files; ``bash`` runs a
command. What each needs is an :class:`Access`, which the approval policy decides on.
"""

from __future__ import annotations

from .base import Access as Access
from .base import AccessKind as AccessKind
from .base import Invocation as Invocation
from .base import Tool as Tool
from .base import Toolbox as Toolbox
from .base import ToolError as ToolError
from .base import ToolOutput as ToolOutput
from .files import file_tools as file_tools
from .shell import BashTool as BashTool
from .shell import Launcher as Launcher
from .workspace import Workspace as Workspace

__all__ = [
    "Access",
    "AccessKind",
    "BashTool",
    "Invocation",
    "Launcher",
    "Tool",
    "ToolError",
    "ToolOutput",
    "Toolbox",
    "Workspace",
    "builtin_tools",
    "file_tools",
]


def builtin_tools(workspace: Workspace, *, launcher: Launcher | None = None) -> list[Tool]:
    """``read``, ``glob``, ``grep``, ``write``, ``edit`` and ``bash``, working in ``workspace``.

    ``launcher`` runs ``bash`` (a sandbox); by default it runs unsandboxed.
    """
    bash = BashTool(workspace) if launcher is None else BashTool(workspace, launcher=launcher)
    return [*file_tools(workspace), bash]
