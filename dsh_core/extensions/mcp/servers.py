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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ...chain import error_chain
from ...errors import MCP_SERVER
from ...masking import mask
from ...model.urls import redact_url
from ...tools.base import Tool, ToolError
from .names import offered_names
from .spec import ServerSpec

if TYPE_CHECKING:
    import mcp.types

    from .client import Connection, Progress
    from .tools import Caller

__all__ = [
    "MAX_ALL_INSTRUCTIONS",
    "MAX_INSTRUCTIONS",
    "MAX_MCP_TOOLS",
    "MAX_SCHEMA_BYTES",
    "McpServers",
    "ServerState",
    "ServerStatus",
    "masked",
]

MAX_MCP_TOOLS = 120
"""MCP tools offered at most, all servers together: providers take 128 tools per request, and
dsh's own need the rest."""
STDERR_TAIL = 4096
"""Bytes of a failed server's stderr looked through for its last line."""
STDERR_LINE = 300
"""Characters of that line quoted in the warning."""
MAX_SCHEMA_BYTES = 32 * 1024
"""A tool whose input schema is larger is not offered (it would ride along every request)."""
MAX_INSTRUCTIONS = 4000
"""Characters of one server's ``instructions`` in the system prompt."""
MAX_ALL_INSTRUCTIONS = 8000
"""Characters of all servers' ``instructions`` together: the system prompt rides along every
request (cached, but a window's room all the same)."""

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
        self.since = 0
        """Where in its stderr file this start's lines begin."""
        self.lost = ""
        """How it was lost, once it is: how it ended and what its stderr says last."""

    @property
    def where(self) -> str:
        """How it is reached, masked (a URL may carry the key in its query, SPEC 10.16)."""
        spec = self.spec
        if spec.url is not None:
            return mask(f"http: {redact_url(spec.url)}")
        return mask("stdio: " + " ".join([spec.command or "", *spec.args]))


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
        self.notice: Callable[[str], None] = lambda text: None
        """Where a server's remarks go (a line on its stdout that is not JSON-RPC); the front
        door shows them as ``dsh:`` notices."""

    def __bool__(self) -> bool:
        return bool(self._servers)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(server.spec.name for server in self._servers)

    def starting(self) -> tuple[str, ...]:
        """The servers still starting."""
        return tuple(s.spec.name for s in self._servers if s.state == "starting")

    async def start(self) -> list[str]:
        """Start every server at once; a warning (with its chain) for each that failed, and
        for the tools that were left out."""
        if not self._servers:
            return []
        from ...tools.process import hide_own_environment

        hide_own_environment()  # before the first child: its /proc/<pid>/environ holds the key
        await asyncio.gather(*(self._start(server) for server in self._servers))
        warnings = [
            self._start_failure(server) for server in self._servers if server.state == "failed"
        ]
        return warnings + self._name_tools()

    def _start_failure(self, server: _Server) -> str:
        return (
            f'MCP server "{server.spec.name}" did not start: {error_chain(server.failure)}'
            + server.said
        )

    async def restart(self, name: str) -> list[str]:
        """``/mcp restart NAME``: stop the server, start it again (a person asked: the limit
        of one automatic restart does not apply); what went wrong, as :meth:`start` says it.
        KeyError when no server has that name."""
        server = next((s for s in self._servers if s.spec.name == name), None)
        if server is None:
            raise KeyError(name)
        if server.connection is not None:
            self._stop_later(server.connection)
            server.connection = None
        server.failure, server.lost, server.restarted = None, "", False
        await self._start(server)
        if server.state == "failed":
            server.offered = {}
            return [self._start_failure(server)]
        return self._name_tools()

    def _said(self, spec: ServerSpec, since: int, failure: Exception | None) -> str:
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
            if isinstance(failure, ToolError) and failure.__cause__ is None:
                return ""  # dsh said why itself (not in PATH, a timeout)
            return f" (its stderr, in {path}, is empty)"
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
            label = f'MCP server "{server.spec.name}"'
            wanted = server.spec.tools
            usable = []
            needs_tasks = []
            for tool in server.listing:
                if wanted is not None and tool.name not in wanted:
                    continue
                if tool.execution is not None and tool.execution.task_support == "required":
                    needs_tasks.append(tool.name)
                elif len(json.dumps(tool.input_schema)) > MAX_SCHEMA_BYTES:
                    warnings.append(
                        f"{label}: tool {mask(tool.name)!r} left out: its input schema is over "
                        f"{MAX_SCHEMA_BYTES // 1024} KiB"
                    )
                else:
                    usable.append(tool.name)
            if needs_tasks:
                names = ", ".join(repr(mask(name)) for name in needs_tasks)
                warnings.append(
                    f"{label}: {names} left out: they can only be run as MCP tasks "
                    '(taskSupport "required"), which dsh does not do'
                )
            if wanted is not None:
                listed = {tool.name for tool in server.listing}
                missing = [name for name in wanted if name not in listed]
                if missing:
                    warnings.append(
                        f"{label}: no tool {', '.join(map(repr, missing))} (its tools = [...] "
                        "in config.toml names it, the server does not)"
                    )
            if len(usable) > room:
                warnings.append(
                    f"{label}: {len(usable) - room} of its tools left out: at most "
                    f"{MAX_MCP_TOOLS} MCP tools are offered in all"
                )
                usable = usable[:room]
            room -= len(usable)
            # A name is a server's word: the key masked out of it first (SPEC 10.16).
            offered = offered_names(server.spec.name, [mask(name) for name in usable], taken)
            server.offered = dict(zip(usable, offered.values(), strict=True))
        return warnings

    async def _start(self, server: _Server) -> None:
        server.state = "starting"
        since = 0
        try:
            if server.spec.url is None:
                since = os.fstat(self._stderr_of(server.spec).fileno()).st_size
            server.since = since
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
            spec,
            environment=self._environment,
            stderr=self._stderr_of(spec),
            workdir=self._workdir,
            notice=lambda text: self.notice(text),
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
                annotations = tool.annotations
                found.append(
                    McpTool(
                        server=server.spec.name,
                        remote=remote,
                        offered=offered,
                        description=tool.description or "",
                        schema=masked(schema),
                        call=self._caller(server),
                        output_dir=output_dir,
                        read_only=annotations is not None and annotations.read_only_hint is True,
                    )
                )
        return found

    def instructions(self) -> str:
        """What the running servers say about using them (``initialize``'s ``instructions``),
        for the system prompt: masked, each cut at :data:`MAX_INSTRUCTIONS`, all at
        :data:`MAX_ALL_INSTRUCTIONS`, quoted as each server's own words."""
        parts: list[str] = []
        room = MAX_ALL_INSTRUCTIONS
        for server in self._servers:
            connection = server.connection
            text = connection.instructions.strip() if connection is not None else ""
            if server.state != "running" or not text or not server.offered:
                continue
            text = mask(text)
            limit = min(MAX_INSTRUCTIONS, room)
            if len(text) > limit:
                text = text[:limit] + f"\n[cut: {len(text) - limit} more characters]"
            room -= len(text)
            tools = f"mcp__{server.spec.name}__*"
            parts.append(f'MCP server "{server.spec.name}" (its tools: {tools}) says:\n{text}')
            if room <= 0:
                break
        if not parts:
            return ""
        return "\n\n# MCP servers' instructions (their own words)\n\n" + "\n\n".join(parts)

    def _caller(self, server: _Server) -> Caller:
        async def call(
            name: str, arguments: Mapping[str, Any], progress: Progress | None
        ) -> mcp.types.CallToolResult:
            return await self._call(server, name, arguments, progress)

        return call

    async def _call(
        self,
        server: _Server,
        name: str,
        arguments: Mapping[str, Any],
        progress: Progress | None,
    ) -> mcp.types.CallToolResult:
        label = f'MCP server "{server.spec.name}"'
        connection = server.connection
        if connection is None or connection.closed.is_set():
            if server.state == "running":
                self._note_lost(server)
            await self._restart(server, label)
            connection = server.connection
            assert connection is not None
        try:
            return await connection.call(
                name, arguments, within=server.spec.tool_timeout_s, progress=progress
            )
        except ToolError:
            raise  # the timeout: said as it is
        except Exception as exc:
            if not await connection.gone():
                failed = f"{label} answered the call to {name} with an error"
                raise ToolError(failed, MCP_SERVER) from exc
            self._note_lost(server)
            server.failure = exc
            again = (
                "it is not started a third time in this run"
                if server.restarted
                else "it is started again at the next call"
            )
            raise ToolError(
                f"{label} went away during the call to {name}: {server.lost}; {again}", MCP_SERVER
            ) from exc

    def _note_lost(self, server: _Server) -> None:
        """The server is gone: how it ended, and the end of what it wrote on stderr."""
        if server.state == "lost":
            return
        server.state = "lost"
        connection = server.connection
        ending = connection.ending() if connection is not None else "its connection closed"
        server.lost = ending + self._said(server.spec, server.since, None)

    async def _restart(self, server: _Server, label: str) -> None:
        if server.restarted or server.state in ("failed", "stopped"):
            server.state = "stopped"
            raise ToolError(
                f"{label} went away again after it was started again once; it is not started "
                f"a third time in this run (/mcp restart {server.spec.name} starts it)",
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
        """Each server: its state, how it is reached, its tools, and why it failed. A server
        whose connection ended since is ``lost`` now, with how it ended."""
        for server in self._servers:
            connection = server.connection
            if server.state == "running" and connection is not None and connection.closed.is_set():
                self._note_lost(server)
        found = []
        for server in self._servers:
            if server.state == "lost":
                detail = server.lost
            elif server.failure is not None:
                detail = error_chain(server.failure) + (
                    server.said if server.state == "failed" else ""
                )
            else:
                detail = ""
            tools = tuple(server.offered.values()) if server.state != "failed" else ()
            found.append(ServerStatus(server.spec.name, server.state, server.where, tools, detail))
        return found

    async def close(self) -> None:
        """End every server (in parallel) and wait until each has; idempotent."""
        for server in self._servers:
            if server.connection is not None:
                self._stop_later(server.connection)
                server.connection = None
            if server.state in ("running", "lost", "starting"):
                server.state = "stopped"
        stopping, self._stopping = self._stopping, []
        if stopping:
            await asyncio.gather(*stopping, return_exceptions=True)
        for file in self._stderr.values():
            with contextlib.suppress(OSError):
                file.close()
        self._stderr.clear()


def masked(value: Any) -> Any:
    """A JSON value (an input schema) with the key masked in every string of it, keys too."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(str(key)): masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    return value
