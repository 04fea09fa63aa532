"""MCP servers as tools (SPEC 13): what a server is, and the tools it offers the model.

    servers = McpServers(specs, stderr_dir=log.path.parent, environment=child_environment())
    for warning in await servers.start():       # in parallel, each within its timeout
        print(f"dsh: {warning}")
    toolbox = Toolbox([*builtin, *servers.tools(output_dir)])
    ...
    await servers.close()                       # every server ends with dsh

Importing this package imports nothing of the ``mcp`` SDK (a second and more of start-up):
:mod:`.client` does, and only :meth:`McpServers.start` imports it, when a server is configured.
"""

from __future__ import annotations

from .names import tool_name as tool_name
from .servers import McpServers as McpServers
from .servers import ServerState as ServerState
from .servers import ServerStatus as ServerStatus
from .spec import DEFAULT_STARTUP_TIMEOUT_S as DEFAULT_STARTUP_TIMEOUT_S
from .spec import ServerSpec as ServerSpec

__all__ = [
    "DEFAULT_STARTUP_TIMEOUT_S",
    "McpServers",
    "ServerSpec",
    "ServerState",
    "ServerStatus",
    "tool_name",
]
