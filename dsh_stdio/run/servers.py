"""The MCP servers of a run, as the front door runs them: started in the background (SPEC 13).

    starting = StartingServers(servers, notice=runtime.notice)   # returns at once
    ...                                                          # the REPL's prompt is up
    await starting.wait(show=view.show_waiting)   # before the first request: "… waiting for
                                                  # MCP servers to start: files, git"
    starting.ready                                # True: their tools can be offered

The SDK is imported in a thread (most of a second of CPU): the event loop, and so the REPL's
first prompt, does not wait for it. Warnings (a server that did not start, tools left out) are
notices as soon as the start is over, whatever the person is doing; the first request waits for
the servers still starting, saying which. Ctrl-C at that wait (the REPL) stops waiting: the turn
goes on without those servers, whose tools come with the next turn once they are up.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_core.chain import error_chain

if TYPE_CHECKING:
    from dsh_core.extensions.mcp.servers import McpServers

__all__ = ["WAITING", "StartingServers"]

WAITING = "waiting for MCP servers to start: "
"""The start of the line that names the servers the first request waits for."""


class StartingServers:
    """The run's servers being started, and the first request's wait for them."""

    def __init__(self, servers: McpServers, *, notice: Callable[[str], None]) -> None:
        self.servers = servers
        self._notice = notice
        servers.notice = notice
        self._waiting: asyncio.Future[None] | None = None
        self.task = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        try:
            # The SDK's import (pydantic models, most of a second) off the loop's thread.
            await asyncio.to_thread(importlib.import_module, "dsh_core.extensions.mcp.client")
            warnings = await self.servers.start()
        except Exception as exc:  # a bug of ours: said, and the run goes on without servers
            warnings = [f"MCP servers could not be started: {error_chain(exc)}"]
        for warning in warnings:
            self._notice(warning)

    @property
    def ready(self) -> bool:
        """Every server has started, or failed to."""
        return self.task.done()

    async def wait(self, show: Callable[[str], None]) -> None:
        """Wait for the servers still starting, after ``show`` names them; returns early when
        :meth:`stop_waiting` is called."""
        if self.task.done():
            return
        names = self.servers.starting() or self.servers.names
        show(WAITING + ", ".join(names))
        self._waiting = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait((self.task, self._waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiting = None

    def stop_waiting(self) -> bool:
        """Ctrl-C at the wait: go on without the servers still starting; False when nothing
        waits."""
        if self._waiting is None or self._waiting.done():
            return False
        self._waiting.set_result(None)
        self._notice(
            "not waiting for MCP servers "
            + ", ".join(self.servers.starting())
            + ": their tools come with a later turn, once they are up"
        )
        return True

    async def close(self) -> None:
        """Stop starting, and end every server."""
        if not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        await self.servers.close()
