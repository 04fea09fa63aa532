"""Tools the agent loop runs for the model, and the toolbox that holds them (SPEC section 7)."""

from __future__ import annotations

from .base import Access as Access
from .base import AccessKind as AccessKind
from .base import Invocation as Invocation
from .base import Tool as Tool
from .base import Toolbox as Toolbox
from .base import ToolError as ToolError
from .base import ToolOutput as ToolOutput

__all__ = ["Access", "AccessKind", "Invocation", "Tool", "ToolError", "ToolOutput", "Toolbox"]
