"""An MCP server's tool as a dsh tool, and its results as the model reads them.

A call asks a person on a terminal (``[a]`` per tool, ``[s]`` for the whole server) and is
refused on a pipe unless ``--allow mcp`` or ``--allow mcp:NAME`` grants it: what a server's
tool does, dsh cannot tell (:class:`~dsh_core.tools.Access` kind ``mcp``). Everything a server
sends is hostile input: its names become ``mcp__<server>__<tool>`` (:mod:`.names`), masked, its
descriptions are cut and masked, its input schemas masked, its results capped like a command's
output (the rest in a file beside the session log) and masked by the loop; the front door
neutralises whatever of it a person sees. A tool the server marks ``readOnlyHint`` may run beside
the step's reads once it is granted without a question; nothing else trusts that hint.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...agent.calls import running_call
from ...errors import ABORTED
from ...masking import mask
from ...model.seam import ToolSpec
from ...tools.base import Access, Invocation, ToolError, ToolOutput
from ...tools.specs import OUTPUT_LIMIT

if TYPE_CHECKING:
    import mcp.types

    from .client import Progress

__all__ = ["MAX_DESCRIPTION", "Caller", "McpTool", "progress_text", "readable", "result_output"]

MAX_DESCRIPTION = 2000
"""Characters of a tool's description the model is told; a server may send megabytes."""
_SUMMARY = 200
"""Characters of a call's arguments on its transcript line; the question shows them all."""

Caller = Callable[
    [str, Mapping[str, Any], "Progress | None"], Awaitable["mcp.types.CallToolResult"]
]
"""Calls a tool of the server by its own name (restarting the server if it went away),
telling ``Progress`` of each progress notification."""


class McpTool:
    """One tool of one MCP server, offered as ``mcp__<server>__<tool>``."""

    def __init__(
        self,
        *,
        server: str,
        remote: str,
        offered: str,
        description: str,
        schema: Mapping[str, Any],
        call: Caller,
        output_dir: Path,
        read_only: bool = False,
    ) -> None:
        """``read_only``: the server says the tool changes nothing (``readOnlyHint``); an
        allowed call of it may run beside the step's other reads. Nothing else trusts it."""
        self.server = server
        self.remote = remote
        """The tool's name on its server, as the server wrote it."""
        self._call = call
        self._output_dir = output_dir
        self._read_only = read_only
        text = mask(description or f"A tool of the MCP server {server}.")
        if len(text) > MAX_DESCRIPTION:
            text = text[: MAX_DESCRIPTION - 1] + "…"
        self.spec = ToolSpec(offered, text, schema)

    def describe(self, arguments: Mapping[str, Any]) -> str:
        text = json.dumps(dict(arguments), ensure_ascii=False, separators=(", ", ": "))
        return text if len(text) <= _SUMMARY else text[: _SUMMARY - 1] + "…"

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        summary = self.describe(arguments)
        access = Access(
            "mcp",
            grant=f"mcp:{self.server}",
            note=f"(MCP server {self.server})",
            read_only=self._read_only,
            always_for=f"server {self.server}",
        )

        async def run() -> ToolOutput:
            running = running_call()
            progress = running.progress if running is not None else None

            def told(done: float, total: float | None, message: str | None) -> None:
                if progress is not None:
                    progress(progress_text(done, total, message))

            try:
                result = await self._call(self.remote, arguments, told)
            except asyncio.CancelledError:
                # Answered here, as a command is: its line shows how it ended (SPEC 13).
                cancelled = ToolError("the call was cancelled (the server was told)", ABORTED)
                return ToolOutput.failed(cancelled)
            return result_output(result, self._output_dir)

        # One line says it all when it can; else the question lays the arguments out once.
        text = any(isinstance(value, str) and "\n" in value for value in arguments.values())
        whole = text or summary.endswith("…")  # one line of JSON escapes reads badly
        return Invocation(access, summary, run, arguments=readable(arguments) if whole else "")


def progress_text(done: float, total: float | None, message: str | None) -> str:
    """``2/5``, ``40%``, ``3``, with the server's message after it, for the live tool line."""
    number = f"{done:g}"
    if total:
        number = f"{done:g}/{total:g}" if float(total).is_integer() else f"{done / total:.0%}"
    text = f"{number}: {message}" if message else number
    return text if len(text) <= 80 else text[:79] + "…"


def readable(arguments: Mapping[str, Any]) -> str:
    """The arguments a line a key, text as its own lines (indented), other values as JSON: what
    a person reads at the question, instead of one line of JSON escapes."""
    lines: list[str] = []
    for key, value in arguments.items():
        if isinstance(value, str) and "\n" not in value:
            lines.append(f"{key}: {value}")
        elif isinstance(value, str):
            lines.append(f"{key}:")
            lines += [f"  {line}" for line in value.split("\n")]
        else:
            text = json.dumps(value, ensure_ascii=False)
            if len(text) > 100:
                text = json.dumps(value, ensure_ascii=False, indent=2)
            first, *rest = text.split("\n")
            lines.append(f"{key}: {first}")
            lines += [f"  {line}" for line in rest]
    return "\n".join(lines)


def result_output(result: mcp.types.CallToolResult, output_dir: Path) -> ToolOutput:
    """The text parts joined, other parts summarised (``[image image/png, 12 KB]``), the text of
    an embedded resource included under its name, capped; ``is_error`` makes it an ``Error:``
    result."""
    parts: list[str] = []
    for block in result.content:
        match block.type:
            case "text":
                parts.append(block.text)
            case "image" | "audio":
                parts.append(f"[{block.type} {block.mime_type}, {_size(_decoded(block.data))}]")
            case "resource_link":
                parts.append(f"[resource link {block.uri}]")
            case "resource":
                resource = block.resource
                text: str | None = getattr(resource, "text", None)
                blob: str = getattr(resource, "blob", "")
                size = len(text.encode()) if text is not None else _decoded(blob)
                kind = resource.mime_type or "unknown type"
                parts.append(f"[resource {resource.uri}, {kind}, {_size(size)}]")
                if text is not None:  # what the model asked for: the text itself
                    parts.append(text)
            case other:
                parts.append(f"[{other} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    from ...tools.process import capped_result  # with the rest of the tools' machinery

    output = capped_result("\n".join(parts), output_dir, limit=OUTPUT_LIMIT, prefix="mcp-")
    if result.is_error:
        raise ToolError(output.content or "the tool reported an error and said nothing more")
    return output


def _decoded(data: str) -> int:
    """Bytes that base64 ``data`` holds."""
    return len(data) * 3 // 4 - data.count("=", -2)


def _size(count: int) -> str:
    if count < 1000:
        return f"{count} bytes"
    if count < 1_000_000:
        return f"{round(count / 1000)} KB"
    return f"{count / 1_000_000:.1f} MB"
