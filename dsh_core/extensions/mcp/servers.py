"""The MCP servers of one run of dsh: started together, offered as tools, restarted once, ended.

Servers start in parallel, each within its ``startup_timeout_s``; one that fails is reported
(one line with its chain) and its tools are absent. They belong to the run, not to a session:
``/new`` keeps them. A server that goes away (during a call, which then fails with the chain, or
between calls) is started again at its next call, once per run; a second loss is final. Each
stdio server's stderr goes to ``mcp-<name>.stderr`` beside the log of the session that started
it, and its environment is dsh's without the API key, plus the ``env`` the file gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ...chain import error_chain
from ...errors import MCP_SERVER
from ...masking import mask
from ...tools.base import Tool, ToolError
from .names import offered_names
from .spec import ServerSpec

if TYPE_CHECKING:
    import mcp.types

    from .client import Connection
    from .tools import Caller

__all__ = ["MAX_MCP_TOOLS", "MAX_SCHEMA_BYTES", "McpServers", "ServerState", "ServerStatus"]

MAX_MCP_TOOLS = 120
"""MCP tools offered at most, all servers together: providers take 128 tools per request, and
dsh's own need the rest."""
STDERR_TAIL = 4096
"""Bytes of a failed server's stderr looked through for its last line."""
STDERR_LINE = 300
"""Characters of that line quoted in the warning."""
MAX_SCHEMA_BYTES = 32 * 1024
"""A tool whose input schema is larger is not offered (it would ride along every request)."""

ServerState = Literal[
    "starting",  # not ready yet
    "running",  # initialised; its tools are offered
    "failed",  # did not start: ``detail`` says why; its tools are absent
    "lost",  # went away; started again at its next call (once per run)
    "stopped",  # ended by dsh, or lost twice
]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A server as ``/mcp`` shows it."""

    name: str
    state: ServerState
    where: str
    """``stdio: <command>`` or ``http: <url>``."""
    tools: tuple[str, ...]
    """The names its tools are offered under."""
    detail: str = ""
    """Why it failed or was lost (an ``error_chain``)."""


class _Server:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.state: ServerState = "starting"
        self.connection: Connection | None = None
        self.failure: BaseException | None = None
        self.listing: list[mcp.types.Tool] = []
        self.offered: dict[str, str] = {}
        """The server's tool name -> the name it is offered under."""
        self.restarted = False
        self.said = ""
        """Where its stderr is and how it ends, when it did not start."""

    @property
    def where(self) -> str:
        spec = self.spec
        if spec.url is not None:
            return f"http: {spec.url}"
        return "stdio: " + " ".join([spec.command or "", *spec.args])


class McpServers:
    """Every configured server of this run."""

    def __init__(
        self,
        specs: Sequence[ServerSpec],
        *,
        stderr_dir: Path,
        environment: Mapping[str, str],
        workdir: Path,
    ) -> None:
        self._servers = [_Server(spec) for spec in specs]
        self._stderr_dir = stderr_dir
        self._environment = dict(environment)
        self._workdir = workdir
        self._stderr: dict[str, TextIO] = {}
        self._stopping: list[asyncio.Task[None]] = []

    def __bool__(self) -> bool:
        return bool(self._servers)

    async def start(self) -> list[str]:
        """Start every server at once; a warning (with its chain) for each that failed."""
        if not self._servers:
            return []
        from ...tools.process import hide_own_environment

        hide_own_environment()  # before the first child: its /proc/<pid>/environ holds the key
        await asyncio.gather(*(self._start(server) for server in self._servers))
        warnings = [
            f'MCP server "{server.spec.name}" did not start: {error_chain(server.failure)}'
            + server.said
            for server in self._servers
            if server.state == "failed"
        ]
        return warnings + self._name_tools()

    def _said(self, spec: ServerSpec, since: int, failure: Exception) -> str:
        """What a stdio server wrote on stderr from ``since`` (its last line) and where that
        is: the cause of a failed start, which the SDK reports only as "Connection closed".
        Nothing when it said nothing and dsh itself said why (not in PATH, a timeout)."""
        if spec.url is not None:
            return ""
        path = self.stderr_path(spec.name)
        try:
            with open(path, "rb") as file:
                file.seek(max(since, os.fstat(file.fileno()).st_size - STDERR_TAIL))
                tail = file.read(STDERR_TAIL)
        except OSError:
            return ""
        lines = tail.decode("utf-8", "replace").strip().splitlines()
        if not lines:
            return "" if isinstance(failure, ToolError) else f" (its stderr, in {path}, is empty)"
        last = mask(lines[-1].strip())[:STDERR_LINE]  # the server's own words: the key too
        return f' (its stderr ends "{last}"; all of it is in {path})'

    def _name_tools(self) -> list[str]:
        """Offered names for the running servers' tools, within the limits; what was left."""
        warnings: list[str] = []
        taken: set[str] = set()
        room = MAX_MCP_TOOLS
        for server in self._servers:
            if server.state != "running":
                continue
            usable = []
            for tool in server.listing:
                if len(json.dumps(tool.input_schema)) > MAX_SCHEMA_BYTES:
                    warnings.append(
                        f'MCP server "{server.spec.name}": tool {tool.name!r} left out: its '
                        f"input schema is over {MAX_SCHEMA_BYTES // 1024} KiB"
                    )
                else:
                    usable.append(tool.name)
            if len(usable) > room:
                warnings.append(
                    f'MCP server "{server.spec.name}": {len(usable) - room} of its tools left '
                    f"out: at most {MAX_MCP_TOOLS} MCP tools are offered in all"
                )
                usable = usable[:room]
            room -= len(usable)
            server.offered = offered_names(server.spec.name, usable, taken)
        return warnings

    async def _start(self, server: _Server) -> None:
        server.state = "starting"
        since = 0
        try:
            if server.spec.url is None:
                since = os.fstat(self._stderr_of(server.spec).fileno()).st_size
            server.connection = self._connection(server.spec)
            server.listing = await server.connection.open()
        except Exception as exc:
            server.state, server.failure = "failed", exc
            server.said = self._said(server.spec, since, exc)
            if server.connection is not None:
                self._stop_later(server.connection)
            server.connection = None
            return
        server.state = "running"

    def _connection(self, spec: ServerSpec) -> Connection:
        from .client import Connection  # the SDK: imported only when a server is configured

        return Connection(
            spec, environment=self._environment, stderr=self._stderr_of(spec), workdir=self._workdir
        )

    def _stderr_of(self, spec: ServerSpec) -> TextIO:
        file = self._stderr.get(spec.name)
        if file is None:
            path = self._stderr_dir / f"mcp-{spec.name}.stderr"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            file = self._stderr[spec.name] = open(fd, "a", encoding="utf-8")  # noqa: SIM115
        return file

    def stderr_path(self, name: str) -> Path:
        return self._stderr_dir / f"mcp-{name}.stderr"

    def tools(self, output_dir: Path) -> list[Tool]:
        """The running servers' tools, for one session's toolbox."""
        from .tools import McpTool

        found: list[Tool] = []
        for server in self._servers:
            by_name = {tool.name: tool for tool in server.listing}
            for remote, offered in server.offered.items():
                tool = by_name[remote]
                schema: Any = tool.input_schema
                if not isinstance(schema, dict) or schema.get("type") != "object":
                    schema = {"type": "object"}
                found.append(
                    McpTool(
                        server=server.spec.name,
                        remote=remote,
                        offered=offered,
                        description=tool.description or "",
                        schema=schema,
                        call=self._caller(server),
                        output_dir=output_dir,
                    )
                )
        return found

    def _caller(self, server: _Server) -> Caller:
        async def call(name: str, arguments: Mapping[str, Any]) -> mcp.types.CallToolResult:
            return await self._call(server, name, arguments)

        return call

    async def _call(
        self, server: _Server, name: str, arguments: Mapping[str, Any]
    ) -> mcp.types.CallToolResult:
        label = f'MCP server "{server.spec.name}"'
        connection = server.connection
        if connection is None or connection.closed.is_set():
            if server.state == "running":
                server.state = "lost"
            await self._restart(server, label)
            connection = server.connection
            assert connection is not None
        try:
            return await connection.call(name, arguments)
        except Exception as exc:
            if not connection.closed.is_set():
                raise ToolError(f"{label} refused the call to {name}", MCP_SERVER) from exc
            server.state, server.failure = "lost", exc
            where = self.stderr_path(server.spec.name) if server.spec.url is None else None
            said = f" (its stderr is in {where})" if where else ""
            again = (
                "it is not started a third time in this run"
                if server.restarted
                else "it is started again at the next call"
            )
            raise ToolError(
                f"{label} went away during the call to {name}{said}; {again}", MCP_SERVER
            ) from exc

    async def _restart(self, server: _Server, label: str) -> None:
        if server.restarted or server.state in ("failed", "stopped"):
            server.state = "stopped"
            raise ToolError(
                f"{label} went away again after it was started again once; it is not started "
                "a third time in this run",
                MCP_SERVER,
            ) from server.failure
        server.restarted = True
        if server.connection is not None:
            self._stop_later(server.connection)
        await self._start(server)
        if server.state != "running":
            server.state = "stopped"
            raise ToolError(f"{label} could not be started again", MCP_SERVER) from server.failure

    def _stop_later(self, connection: Connection) -> None:
        """End a connection in the background (a server may take seconds to stop)."""
        self._stopping.append(asyncio.ensure_future(connection.close()))

    def status(self) -> list[ServerStatus]:
        """Each server: its state, how it is reached, its tools, and why it failed."""
        return [
            ServerStatus(
                server.spec.name,
                server.state,
                server.where,
                tuple(server.offered.values()),
                error_chain(server.failure) if server.failure is not None else "",
            )
            for server in self._servers
        ]

    async def close(self) -> None:
        """End every server (in parallel) and wait until each has; idempotent."""
        for server in self._servers:
            if server.connection is not None:
                self._stop_later(server.connection)
                server.connection = None
            if server.state in ("running", "lost"):
                server.state = "stopped"
        stopping, self._stopping = self._stopping, []
        if stopping:
            await asyncio.gather(*stopping, return_exceptions=True)
        for file in self._stderr.values():
            with contextlib.suppress(OSError):
                file.close()
        self._stderr.clear()
