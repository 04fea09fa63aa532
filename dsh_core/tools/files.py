"""The built-in file tools, ready for a :class:`~dsh_core.tools.Toolbox`::

    toolbox = Toolbox([*file_tools(workspace), BashTool(workspace)])

``read`` (:mod:`.read`), ``write`` and ``edit`` (:mod:`.edit`), ``glob`` and ``grep``
(:mod:`.search`), all sharing one :class:`~dsh_core.tools.workspace.Workspace`: its root decides
what is inside, and its read tracker is what ``write`` and ``edit`` check.
"""

from __future__ import annotations

from .base import Tool
from .edit import EditTool, WriteTool
from .read import ReadTool
from .search import GlobTool, GrepTool
from .workspace import Workspace

__all__ = ["EditTool", "GlobTool", "GrepTool", "ReadTool", "WriteTool", "file_tools"]


def file_tools(workspace: Workspace) -> list[Tool]:
    """``read``, ``glob``, ``grep``, ``write``, ``edit`` for one session's workspace."""
    return [
        ReadTool(workspace),
        GlobTool(workspace),
        GrepTool(workspace),
        WriteTool(workspace),
        EditTool(workspace),
    ]
