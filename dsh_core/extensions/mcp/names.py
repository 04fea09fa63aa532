"""The names MCP tools are offered under: ``mcp__<server>__<tool>``, as providers accept them."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_NAME", "offered_names", "tool_name"]

MAX_NAME = 64
"""Characters of a tool name providers accept (``[A-Za-z0-9_-]{1,64}``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``: every character outside ``[A-Za-z0-9_-]`` becomes ``_``, and
    the name is cut to 64 characters. A server's tool names are its own words: escape sequences
    and all, they never reach a terminal or the model through a name."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:MAX_NAME]


def offered_names(server: str, tools: Iterable[str], taken: set[str]) -> dict[str, str]:
    """The offered name of each of ``tools`` (the server's names), kept apart from each other
    and from ``taken`` (which grows): two names that clean up alike get ``_2``, ``_3``..."""
    offered: dict[str, str] = {}
    for tool in tools:
        name = base = tool_name(server, tool)
        number = 1
        while name in taken:
            number += 1
            suffix = f"_{number}"
            name = base[: MAX_NAME - len(suffix)] + suffix
        taken.add(name)
        offered[tool] = name
    return offered
