"""MCP servers as tools (SPEC 13): what a server is, and the tools it offers the model.

    from dsh_core.extensions.mcp.servers import McpServers
    servers = McpServers(specs, stderr_dir=log.path.parent, environment=child_environment(),
                         workdir=Path.cwd())
    for warning in await servers.start():       # in parallel, each within its timeout
        print(f"dsh: {warning}")
    toolbox = Toolbox([*builtin, *servers.tools(output_dir)])
    ...
    await servers.close()                       # every server ends with dsh

This package imports only :mod:`.spec` (what the configuration file describes): the servers'
machinery (:mod:`.servers`, :mod:`.tools`) is imported when a server is configured, and the
``mcp`` SDK (:mod:`.client`, most of a second) only when one is started.
"""

from __future__ import annotations

from .spec import DEFAULT_STARTUP_TIMEOUT_S as DEFAULT_STARTUP_TIMEOUT_S
from .spec import ServerSpec as ServerSpec

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "ServerSpec"]
