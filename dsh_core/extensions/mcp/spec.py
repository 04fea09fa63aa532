"""What an MCP server is, as the user's configuration file describes it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "DEFAULT_TOOL_TIMEOUT_S", "SERVER_NAME", "ServerSpec"]

DEFAULT_STARTUP_TIMEOUT_S = 10.0
"""Seconds a server has to start, answer ``initialize`` and list its tools."""
DEFAULT_TOOL_TIMEOUT_S = 120.0
"""Seconds one call may wait for its answer; then it is an ``Error:`` result (SPEC 13)."""

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
"""What a server's name may be: it goes into tool names and into ``--allow mcp:NAME``."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One ``[mcp.servers.NAME]`` table: a command to run (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    """The program to run; a bare name is looked up in ``PATH`` outside the working directory."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to the server's environment (``${VAR}`` already expanded); the only way the API key
    can reach a server."""
    cwd: str | None = None
    """Where the server runs; None: the user's home directory, never the working directory (a
    module the model wrote there must not be imported by a ``python -m`` server)."""
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers for a URL server (``${VAR}`` already expanded): a token, typically."""
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    tools: tuple[str, ...] | None = None
    """The server's tools that are offered, by their names on the server; None: all of them."""

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"
