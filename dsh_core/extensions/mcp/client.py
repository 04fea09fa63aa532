"""One connection to one MCP server, through the official SDK (``mcp`` 2.x).

Imported only when a server is configured: the SDK costs most of a second to import.

    connection = Connection(spec, environment=env, stderr=file, workdir=cwd, notice=say)
    listing = await connection.open()          # the tools; raises with the chain if it fails
    result = await connection.call("read_file", {"path": "a.txt"}, timeout=120)
    connection.closed                          # set when the server went away
    connection.ending()                        # why: "it exited with status 3"
    await connection.close()

The SDK's contexts (the transport, the ``ClientSession``) live in one task of their own,
entered and left there as anyio requires; a timeout or a stop reaches them through an anyio
cancel scope, never ``Task.cancel()``. Each call runs in a task of its own too: whatever the
SDK's scopes do to the task they run in (a connection that closes under a call cancels its
waiters) stays there, and never reaches the turn's task as a cancellation nobody asked for.

A stdio server is spoken to over dsh's own transport (:func:`_stdio`): dsh needs what the
SDK's keeps to itself: the process, for its exit status the moment it is lost; the lines on
its stdout, so that one that is not JSON-RPC is one notice (the SDK logs a traceback) and a
reply that cannot be read fails its call instead of leaving it waiting. The server runs under
:mod:`.reaper`, in a session of its own: the reaper dies with dsh, and ends every process the
server started (its group, and those that left it) when the server or dsh ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage

from ...errors import MCP_SERVER
from ...masking import mask
from ...tools.base import ToolError
from . import reaper
from .launch import resolve_command, server_cwd, server_environment
from .spec import ServerSpec

__all__ = ["REAPER", "Connection", "Progress", "exit_text", "resolve_command"]

REAPER = reaper.__file__
"""Run as ``python -I -S REAPER <dsh's pid> <command> <args...>``: the server, told to die with
dsh, and its descendants with it. The interpreter is dsh's own, fixed at startup (SPEC 10.1)."""

_PYTHON = sys.executable
MAX_LINE = 64 * 1024 * 1024
"""Bytes of one stdout line kept while it is not finished: a server that never ends a line is
stopped, not held in memory."""
MAX_LINE_NOTICES = 5
"""Notices about lines that are not JSON-RPC, per connection; the rest are counted."""
_EXIT_WAIT_S = 2.0
"""After its stdout ended, seconds to wait for a server's exit status."""

Progress = Callable[[float, float | None, str | None], None]
"""Told each progress notification of a call: progress, total (if known), message."""

_CURRENT: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "dsh_mcp_connection", default=None
)


class _ReportedHere(logging.Filter):
    """Keeps the SDK's traceback for a failed request of a URL server off the screen: the
    connection says it, with its chain, as the start's warning or the call's result."""

    def filter(self, record: logging.LogRecord) -> bool:
        connection = _CURRENT.get()
        if connection is None or record.exc_info is None or record.exc_info[1] is None:
            return True
        connection._transport_failure = record.exc_info[1]
        return False


logging.getLogger("mcp.client.streamable_http").addFilter(_ReportedHere())


class Connection:
    """A server started (or connected to) and initialised; its tools; calls to them."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        environment: Mapping[str, str],
        stderr: TextIO,
        workdir: Path,
        notice: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.spec = spec
        self._environment = dict(environment)
        self._stderr = stderr
        self._workdir = workdir
        self._notice = notice
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._stop = asyncio.Event()
        self._stopping = False
        self._refused: str | None = None
        """The last HTTP error status a URL server answered with."""
        self._transport_failure: BaseException | None = None
        """Why a URL server's last request failed (refused, DNS, TLS)."""
        self._process: Any = None
        """A stdio server's reaper process (anyio ``Process``)."""
        self._unreadable = 0
        self._abandoned: set[asyncio.Task[Any]] = set()
        self.instructions = ""
        """What the server said about using it (``initialize``), as it said it."""
        self.closed = asyncio.Event()
        """Set when the connection ended: the server exited, or was stopped."""
        self._ended = asyncio.Event()
        """Set when the server's messages ended (before its exit status is known)."""

    async def open(self) -> list[types.Tool]:
        """Start or connect, ``initialize``, list every tool, within the spec's timeout."""
        ready: asyncio.Future[list[types.Tool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.spec.name}")
        return await ready

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        within: float,
        progress: Progress | None = None,
    ) -> types.CallToolResult:
        """Call a tool; ToolError after ``within`` seconds without an answer (the call is
        cancelled, the server told so). Cancelling the caller cancels the call at once."""
        session = self._session
        if session is None or self.closed.is_set():
            raise ToolError("the connection is closed", MCP_SERVER)
        told: ProgressFnT | None = None
        if progress is not None:
            report = progress

            async def heard(progress: float, total: float | None, message: str | None) -> None:
                report(progress, total, message)

            told = heard
        task: asyncio.Task[types.CallToolResult] = asyncio.ensure_future(
            session.call_tool(name, dict(arguments), progress_callback=told)
        )
        try:
            await asyncio.wait((task,), timeout=within)
        finally:
            if not task.done():
                self._abandon(task)
        if not task.done():
            raise ToolError(
                f"no answer within {within:g} s (tool_timeout_s); the call was cancelled",
                MCP_SERVER,
            )
        return task.result()

    def _abandon(self, task: asyncio.Task[Any]) -> None:
        """Cancel a call and let it finish on its own (the SDK tells the server, within 5 s):
        Ctrl-C and a timeout end the call now."""
        task.cancel()
        self._abandoned.add(task)
        task.add_done_callback(self._abandoned.discard)
        task.add_done_callback(_retrieve)

    async def gone(self) -> bool:
        """Whether the connection has ended: a call that failed may have failed for that
        (its messages ended); then wait until :attr:`closed` says so, exit status known."""
        if self._ended.is_set():
            await self.closed.wait()  # set within _EXIT_WAIT_S of the end
        return self.closed.is_set()

    def ending(self) -> str:
        """Why the connection ended, for a person: how the server's process ended, if known."""
        process = self._process
        if process is not None and process.returncode is not None:
            return exit_text(process.returncode)
        if self._transport_failure is not None:
            return f"{mask(self.spec.url or '')} could not be reached"
        return "its connection closed"

    async def close(self) -> None:
        """End the connection and the server (stdin closed, then SIGTERM, SIGKILL; bounded);
        idempotent."""
        self._stopping = True
        self._stop.set()
        if self._scope is not None and self._session is None:
            self._scope.cancel()  # still starting
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)

    async def _serve(self, ready: asyncio.Future[list[types.Tool]]) -> None:
        _CURRENT.set(self)  # this task's context, and so its transport's tasks'
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
                    except Exception as exc:
                        # Said now: stopping the server (seconds, for one that does not read
                        # its input) happens as the contexts unwind, after the caller moved on.
                        # (A cancellation is said below, with what the transport raised.)
                        await self._transport_said()
                        self._failed(ready, exc)
                        raise
                    self.instructions = session.instructions or ""
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

    async def _transport_said(self) -> None:
        """Let a URL server's transport log why its request failed (its messages end just
        before it does), or a stdio server's exit status come in: the cause a failed start is
        said with."""
        if self.spec.url is None:
            if self._ended.is_set() and self._process is not None:  # it exited: how?
                with anyio.CancelScope(shield=True):
                    await _exited(self._process, _EXIT_WAIT_S)
            return
        with anyio.CancelScope(shield=True):
            for _ in range(10):
                if self._transport_failure is not None:
                    break
                await anyio.lowlevel.checkpoint()

    def _failed(self, ready: asyncio.Future[list[types.Tool]], caught: BaseException) -> None:
        """Fail the start with what a person can use of ``caught``, unless it is decided.

        Never with a cancellation: the caller did not cancel anything (an SDK scope that gave
        up on a connection that closed cancels its own task)."""
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
        elif self._refused is not None:
            refused = ToolError(f"{self.spec.url} answered {self._refused}", MCP_SERVER)
            refused.__cause__ = exc
            exc = refused
        elif self._transport_failure is not None or isinstance(exc, httpx2.TransportError):
            unreachable = ToolError(f"{self.spec.url} could not be reached", MCP_SERVER)
            unreachable.__cause__ = _innermost(self._transport_failure or exc)
            exc = unreachable
        elif self._process is not None and self._process.returncode is not None:
            exited = ToolError(exit_text(self._process.returncode), MCP_SERVER)
            exited.__cause__ = exc if isinstance(exc, Exception) else None
            exc = exited
        if not isinstance(exc, Exception):
            exc = ToolError("the connection ended while it was starting", MCP_SERVER)
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
        return self._stdio()

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[tuple[Any, Any]]:
        """The server's process and its two streams of JSON-RPC messages, as the SDK's
        ``stdio_client`` gives them; stopped as the MCP specification says (stdin closed, a
        grace, then SIGTERM, then SIGKILL), shielded and bounded."""
        spec = self.spec
        assert spec.command is not None
        environment = server_environment(self._environment, spec, self._workdir)
        program = resolve_command(spec.command, environment.get("PATH", os.defpath), self._workdir)
        process = self._process = await anyio.open_process(
            [_PYTHON, "-I", "-S", REAPER, str(os.getpid()), program, *spec.args],
            env=environment,
            cwd=server_cwd(spec, self._workdir, Path.home()),
            stderr=self._stderr,
            start_new_session=True,
        )
        read_writer, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

        async def reader() -> None:
            assert process.stdout is not None
            async with read_writer:
                buffer = b""
                with contextlib.suppress(
                    anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream
                ):
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        if len(buffer) > MAX_LINE:
                            self._notice_line(buffer[:200], "a line longer than 64 MiB")
                            break
                        for line in lines:
                            message = self._message(line)
                            if message is not None:
                                await read_writer.send(message)

        async def writer() -> None:
            assert process.stdin is not None
            try:
                async with write_reader:
                    async for message in write_reader:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await process.stdin.send(data.encode() + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await read_writer.aclose()  # the server stopped reading: the connection ends

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader)
            tasks.start_soon(writer)
            try:
                yield read, write
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                    for stream in (read, write, read_writer, write_reader):
                        await stream.aclose()
                tasks.cancel_scope.cancel()

    def _message(self, line: bytes) -> SessionMessage | None:
        """One line of a stdio server's stdout as a message; a line that is not one is a notice,
        and a reply among them (it names a request) fails that request at once."""
        if not line.strip():
            return None
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            problem = _first_line(str(exc))
            request = _reply_to(line)
        if request is None:
            self._notice_line(line, problem)
            return None
        error = types.ErrorData(
            code=types.INTERNAL_ERROR, message=f"its answer could not be read: {problem}"
        )
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request, error=error))

    def _notice_line(self, line: bytes, problem: str) -> None:
        self._unreadable += 1
        if self._unreadable > MAX_LINE_NOTICES:
            return
        text = line.decode("utf-8", "replace").strip()
        shown = text if len(text) <= 120 else text[:119] + "…"
        more = " (further such lines are not shown)" if self._unreadable == MAX_LINE_NOTICES else ""
        self._notice(
            f'MCP server "{self.spec.name}" wrote a line on stdout that is not a JSON-RPC '
            f"message ({problem}); servers log on stderr: {mask(shown)}{more}"
        )

    async def _watched(self, read: Any, stack: contextlib.AsyncExitStack) -> Any:
        """The transport's read stream, relayed, so that its end (the server exited) sets
        :attr:`closed` while no call is waiting: ``/mcp`` says lost at once, and the next
        call restarts the server. A stdio server's exit status is waited for first."""
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for message in read:
                        await send.send(message)
            self._ended.set()
            process = self._process
            if process is not None and not self._stopping:
                await _exited(process, _EXIT_WAIT_S)
            self.closed.set()

        relaying = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(relaying.cancel_scope.cancel)  # on the way out, before it is waited for
        relaying.start_soon(relay)
        return receive


def exit_text(returncode: int) -> str:
    """``it exited with status 3``, ``it was killed by signal 9 (SIGKILL)``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"it was killed by signal {-returncode} ({name})"
    return f"it exited with status {returncode}"


async def _stop(process: Any) -> None:
    """Close the server's stdin, give it :data:`GRACE` seconds, then SIGTERM its reaper (which
    ends the whole tree), then SIGKILL the group."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for then in (signal.SIGTERM, signal.SIGKILL):
        if await _exited(process, GRACE):
            break
        with contextlib.suppress(OSError):
            if then == signal.SIGTERM:
                process.send_signal(then)  # the reaper ends the rest
            else:
                os.killpg(process.pid, then)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    await _exited(process, GRACE)
    # The subprocess transport stays open (and warns when collected) while a survivor holds a
    # pipe end; nothing public closes it (the SDK's stdio_client does the same).
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()


GRACE = 2.0
"""Seconds a server has to leave after its stdin closed, and again after SIGTERM."""


async def _exited(process: Any, seconds: float) -> bool:
    """Whether the process has exited within ``seconds``. Polled: asyncio's ``wait()`` also
    waits for the pipes to close, which a survivor holding one never does."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return process.returncode is not None


def _reply_to(line: bytes) -> int | str | None:
    """The request id a line that failed to validate answers, when it is a reply."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not ("result" in data or "error" in data):
        return None
    request = data.get("id")
    return request if isinstance(request, int | str) and not isinstance(request, bool) else None


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= 200 else line[:199] + "…"


def _retrieve(task: asyncio.Task[Any]) -> None:
    """An abandoned call's outcome, read so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


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
        # The cancellations a failure caused in its neighbours say nothing of it.
        failures = [leaf for leaf in leaves if not isinstance(leaf, asyncio.CancelledError)]
        leaves = failures or leaves
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
