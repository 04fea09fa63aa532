"""One connection to one MCP server, through the official SDK (``mcp`` 2.x).

Imported only when a server is configured: the SDK costs most of a second to import.

    connection = Connection(spec, environment=env, stderr=file, workdir=cwd)
    listing = await connection.open()          # the tools; raises with the chain if it fails
    result = await connection.call("read_file", {"path": "a.txt"})
    connection.closed                          # set when the server went away
    await connection.close()

The SDK's contexts (the transport, the ``ClientSession``) live in one task of their own,
entered and left there as anyio requires; a timeout or a stop reaches them through an anyio
cancel scope, never ``Task.cancel()``, which the SDK's shielded shutdown (close stdin, wait,
then SIGTERM and SIGKILL to the server's process group) cannot survive. Calls are made from
the turn's task. A stdio server runs in a session of its own (the SDK's ``start_new_session``)
behind a small launcher that asks the kernel to kill it when dsh dies (``PR_SET_PDEATHSIG``):
none is left after a SIGKILL of dsh.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from ...errors import MCP_SERVER
from ...tools.base import ToolError
from .launch import resolve_command, server_cwd, server_environment
from .spec import ServerSpec

__all__ = ["LAUNCHER", "Connection", "resolve_command"]

LAUNCHER = """\
import ctypes, os, signal, sys
parent = int(sys.argv[1])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass  # not Linux: the process group is all there is
if os.getppid() != parent:  # dsh died before the request took effect
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:  # said on stderr, which dsh quotes in its warning
    sys.stderr.write(f"dsh: cannot run {sys.argv[2]}: {exc.strerror}\\n")
    os._exit(127)
"""
"""Run as ``python -I -S -c LAUNCHER <dsh's pid> <command> <args...>``: the server, told to die
with dsh. The interpreter is dsh's own, fixed at startup (SPEC 10.1)."""

_PYTHON = sys.executable


class Connection:
    """A server started (or connected to) and initialised; its tools; calls to them."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        environment: Mapping[str, str],
        stderr: TextIO,
        workdir: Path,
    ) -> None:
        self.spec = spec
        self._environment = dict(environment)
        self._stderr = stderr
        self._workdir = workdir
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._stop = asyncio.Event()
        self._refused: str | None = None
        """The last HTTP error status a URL server answered with."""
        self.closed = asyncio.Event()
        """Set when the connection ended: the server exited, or was stopped."""

    async def open(self) -> list[types.Tool]:
        """Start or connect, ``initialize``, list every tool, within the spec's timeout."""
        ready: asyncio.Future[list[types.Tool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.spec.name}")
        return await ready

    async def call(self, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        if self._session is None or self.closed.is_set():
            raise ToolError("the connection is closed", MCP_SERVER)
        return await self._session.call_tool(name, dict(arguments))

    async def close(self) -> None:
        """End the connection and the server (the SDK's shutdown, bounded); idempotent."""
        self._stop.set()
        if self._scope is not None and self._session is None:
            self._scope.cancel()  # still starting
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)

    async def _serve(self, ready: asyncio.Future[list[types.Tool]]) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                async with contextlib.AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._transport())
                    read = await self._watched(read, stack)
                    session = await stack.enter_async_context(ClientSession(read, write))
                    try:
                        with anyio.fail_after(self.spec.startup_timeout_s):
                            await session.initialize()
                            listing = await _all_tools(session)
                    except BaseException as exc:
                        # Said now: stopping the server (seconds, for one that does not read
                        # its input) happens as the contexts unwind, after the caller moved on.
                        self._failed(ready, exc)
                        raise
                    self._session = session
                    ready.set_result(listing)
                    stopping = asyncio.ensure_future(self._stop.wait())
                    ended = asyncio.ensure_future(self.closed.wait())
                    try:
                        await asyncio.wait((stopping, ended), return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        stopping.cancel()
                        ended.cancel()
            if not ready.done():  # stopped while starting
                ready.set_exception(ToolError("stopped while starting", MCP_SERVER))
        except BaseException as exc:
            self._failed(ready, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None
            self.closed.set()

    def _failed(self, ready: asyncio.Future[list[types.Tool]], caught: BaseException) -> None:
        """Fail the start with what a person can use of ``caught``, unless it is decided."""
        if ready.done():
            return
        exc = _innermost(caught)
        if isinstance(exc, TimeoutError):
            timeout = self.spec.startup_timeout_s
            exc = ToolError(
                f"it did not answer initialize and tools/list within {timeout:g} s "
                "(startup_timeout_s)",
                MCP_SERVER,
            )
        elif self._refused is not None and isinstance(exc, Exception):
            refused = ToolError(f"{self.spec.url} answered {self._refused}", MCP_SERVER)
            refused.__cause__ = exc
            exc = refused
        ready.set_exception(exc)

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        spec = self.spec
        if spec.url is not None:
            client = create_mcp_http_client(headers=dict(spec.headers))

            async def note(response: Any) -> None:
                # The SDK reports any refusal as "Server returned an error response": the
                # status is what says why (401: the token).
                if response.status_code >= 400:
                    self._refused = f"HTTP {response.status_code} {response.reason_phrase}"

            client.event_hooks["response"].append(note)
            return streamable_http_client(spec.url, http_client=client)
        assert spec.command is not None
        environment = server_environment(self._environment, spec, self._workdir)
        program = resolve_command(spec.command, environment.get("PATH", os.defpath), self._workdir)
        launcher = ["-I", "-S", "-c", LAUNCHER, str(os.getpid()), program, *spec.args]
        parameters = StdioServerParameters(
            command=_PYTHON,
            args=launcher,
            env=environment,
            cwd=server_cwd(spec, self._workdir, Path.home()),
        )
        return stdio_client(parameters, errlog=self._stderr)

    async def _watched(self, read: Any, stack: contextlib.AsyncExitStack) -> Any:
        """The transport's read stream, relayed, so that its end (the server exited) sets
        :attr:`closed` while no call is waiting: the next call then restarts the server."""
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for message in read:
                        await send.send(message)
            self.closed.set()

        relaying = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(relaying.cancel_scope.cancel)  # on the way out, before it is waited for
        relaying.start_soon(relay)
        return receive


def _innermost(exc: BaseException) -> BaseException:
    """The one failure inside anyio's nested task-group wrappers, when there is one: the SDK's
    layers add nothing a person can use ("unhandled errors in a TaskGroup" three times)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        stack: list[BaseException] = [exc]
        while stack:
            item = stack.pop()
            if isinstance(item, BaseExceptionGroup):
                stack.extend(item.exceptions)
            else:
                leaves.append(item)
        if len({(type(leaf), str(leaf)) for leaf in leaves}) == 1:
            return leaves[0]
    return exc


async def _all_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of ``tools/list`` (at most 100 pages: a server that never stops is cut)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
