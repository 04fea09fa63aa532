"""An MCP server's tool as a dsh tool, and its results as the model reads them.

A call asks a person on a terminal (``[a]`` per tool) and is refused on a pipe unless
``--allow mcp`` or ``--allow mcp:NAME`` grants it: what a server's tool does, dsh cannot tell
(:class:`~dsh_core.tools.Access` kind ``mcp``). Everything a server sends is hostile input: its
names become ``mcp__<server>__<tool>`` (:mod:`.names`), its descriptions are cut and masked, its
results capped like a command's output (the rest in a file beside the session log) and masked by
the loop; the front door neutralises whatever of it a person sees.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...masking import mask
from ...model.seam import ToolSpec
from ...tools.base import Access, Invocation, ToolError, ToolOutput
from ...tools.specs import OUTPUT_LIMIT

if TYPE_CHECKING:
    import mcp.types

__all__ = ["MAX_DESCRIPTION", "McpTool", "result_output"]

MAX_DESCRIPTION = 2000
"""Characters of a tool's description the model is told; a server may send megabytes."""
_SUMMARY = 200
"""Characters of a call's arguments on its transcript line; the question shows them all."""

Caller = Callable[[str, Mapping[str, Any]], Awaitable["mcp.types.CallToolResult"]]
"""Calls a tool of the server by its own name (restarting the server if it went away)."""


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
    ) -> None:
        self.server = server
        self.remote = remote
        """The tool's name on its server, as the server wrote it."""
        self._call = call
        self._output_dir = output_dir
        text = mask(description or f"A tool of the MCP server {server}.")
        if len(text) > MAX_DESCRIPTION:
            text = text[: MAX_DESCRIPTION - 1] + "…"
        self.spec = ToolSpec(offered, text, schema)

    def describe(self, arguments: Mapping[str, Any]) -> str:
        text = json.dumps(dict(arguments), ensure_ascii=False, separators=(", ", ": "))
        return text if len(text) <= _SUMMARY else text[: _SUMMARY - 1] + "…"

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        summary = self.describe(arguments)
        whole = json.dumps(dict(arguments), ensure_ascii=False, indent=2)
        access = Access("mcp", grant=f"mcp:{self.server}", note=f"(MCP server {self.server})")

        async def run() -> ToolOutput:
            result = await self._call(self.remote, arguments)
            return result_output(result, self._output_dir)

        # The question shows the whole of long arguments; the transcript line, its start.
        return Invocation(access, summary, run, whole if summary.endswith("…") else "")


def result_output(result: mcp.types.CallToolResult, output_dir: Path) -> ToolOutput:
    """The text parts joined, other parts summarised (``[image image/png, 12 KB]``), capped;
    ``is_error`` makes it an ``Error:`` result."""
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
