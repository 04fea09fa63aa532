"""An MCP server's tools as dsh sees them, in-process: names, descriptions, results.

Each test imports the SDK's ``mcp.types`` itself: building its pydantic models takes about a
second, which every pytest worker would otherwise pay at collection.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsh_core.extensions.mcp.names import MAX_NAME, offered_names, tool_name
from dsh_core.extensions.mcp.tools import McpTool, result_output
from dsh_core.tools import ToolError
from dsh_core.tools.specs import OUTPUT_LIMIT

if TYPE_CHECKING:
    from mcp.types import CallToolResult


def test_names_keep_to_what_providers_accept() -> None:
    assert tool_name("files", "read_file") == "mcp__files__read_file"
    assert tool_name("files", "read.file\x1b[31m") == "mcp__files__read_file__31m"
    assert len(tool_name("s", "x" * 100)) == MAX_NAME
    taken: set[str] = set()
    long = "y" * 80
    offered = offered_names("s", ["a.b", "a b", long, long + "z"], taken)
    assert offered["a.b"] == "mcp__s__a_b" and offered["a b"] == "mcp__s__a_b_2"
    assert offered[long + "z"] == offered[long][:-2] + "_2"
    assert all(len(name) <= MAX_NAME for name in offered.values())


def b64(size: int) -> str:
    return base64.b64encode(b"\0" * size).decode()


def test_results_join_text_and_summarise_the_rest(tmp_path: Path) -> None:
    from mcp.types import (
        AudioContent,
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    result = CallToolResult(
        content=[
            TextContent(text="first"),
            ImageContent(data=b64(12_000), mime_type="image/png"),
            AudioContent(data=b64(500), mime_type="audio/wav"),
            ResourceLink(uri="file:///a.txt", name="a"),
            EmbeddedResource(
                resource=TextResourceContents(
                    uri="file:///b.txt", text="hi", mime_type="text/plain"
                )
            ),
            EmbeddedResource(
                resource=BlobResourceContents(uri="file:///c.bin", blob=b64(2_000_000))
            ),
            TextContent(text="last"),
        ]
    )
    output = result_output(result, tmp_path)
    assert output.content.split("\n") == [
        "first",
        "[image image/png, 12 KB]",
        "[audio audio/wav, 500 bytes]",
        "[resource link file:///a.txt]",
        "[resource file:///b.txt, text/plain, 2 bytes]",
        "hi",  # an embedded resource's text reaches the model (issue 26 item 3)
        "[resource file:///c.bin, unknown type, 2.0 MB]",
        "last",
    ]
    assert output.failure is None


def test_structured_content_alone_is_sent_as_json(tmp_path: Path) -> None:
    from mcp.types import CallToolResult

    result = CallToolResult(content=[], structured_content={"n": 1})
    assert result_output(result, tmp_path).content == '{"n": 1}'


def test_is_error_is_an_error_result(tmp_path: Path) -> None:
    from mcp.types import CallToolResult, TextContent

    with pytest.raises(ToolError, match=r"^no such page$"):
        result_output(
            CallToolResult(content=[TextContent(text="no such page")], is_error=True), tmp_path
        )


def test_a_huge_result_is_capped_with_the_rest_in_a_file(tmp_path: Path) -> None:
    from mcp.types import CallToolResult, TextContent

    text = "".join(f"line {n}\n" for n in range(20_000))
    output = result_output(CallToolResult(content=[TextContent(text=text)]), tmp_path)
    assert output.truncated and output.output_file is not None
    assert len(output.content) < OUTPUT_LIMIT + 200
    assert Path(output.output_file).read_text() == text
    assert Path(output.output_file).parent == tmp_path


def test_a_tool_is_offered_masked_and_cut_and_asks_by_its_servers_grant(tmp_path: Path) -> None:
    async def never(name: str, arguments: object, progress: object) -> CallToolResult:
        raise AssertionError("not called")

    tool = McpTool(
        server="files",
        remote="read",
        offered="mcp__files__read",
        description="x" * 5000,
        schema={"type": "object"},
        call=never,
        output_dir=tmp_path,
    )
    assert len(tool.spec.description) == 2000
    invocation = tool.prepare({"path": "a" * 300})
    assert invocation.access.kind == "mcp" and invocation.access.grant == "mcp:files"
    assert not invocation.access.free and invocation.access.may_remember
    assert len(invocation.summary) == 200 and invocation.summary.endswith("…")
    # The question lays long arguments out once, readably; never as a diff (issue 26 item 10).
    assert invocation.preview == ""
    assert invocation.arguments == "path: " + "a" * 300
    assert tool.prepare({"path": "a"}).arguments == ""
    assert tool.prepare({"text": "one\ntwo", "n": 3}).arguments == "text:\n  one\n  two\nn: 3"
    assert invocation.access.always_for == "server files"


def test_a_server_that_does_not_start_says_why_and_where_its_stderr_is(tmp_path: Path) -> None:
    # Second review (A5): "did not start: Connection closed", the cause only in the file.
    import asyncio
    import sys

    from dsh_core.extensions.mcp.servers import McpServers
    from dsh_core.extensions.mcp.spec import ServerSpec

    specs = [
        ServerSpec("gone", command="/nonexistent/x"),
        ServerSpec("dies", command=sys.executable, args=("-c", "import sys; sys.exit('no db')")),
        ServerSpec("quiet", command="/bin/false"),
    ]

    async def start() -> list[str]:
        servers = McpServers(specs, stderr_dir=tmp_path, environment={}, workdir=tmp_path / "w")
        try:
            return await servers.start()
        finally:
            await servers.close()

    gone, dies, quiet = asyncio.run(start())
    assert gone == 'MCP server "gone" did not start: command /nonexistent/x does not exist'
    assert dies == (
        'MCP server "dies" did not start: it exited with status 1: Connection closed '
        '(its stderr ends "no db"; '
        f"all of it is in {tmp_path / 'mcp-dies.stderr'})"
    )
    assert quiet == (
        'MCP server "quiet" did not start: it exited with status 1: Connection closed '
        f"(its stderr, in {tmp_path / 'mcp-quiet.stderr'}, is empty)"
    )


def test_a_failed_servers_stderr_is_read_from_its_last_bytes_only(tmp_path: Path) -> None:
    # Second review (D2): the whole file was read to keep its last 4 KiB. A gigabyte (sparse)
    # then the line: looked at within an address space of a quarter of that, in a process
    # of its own (the limit would bind the test's own threads too).
    import subprocess
    import sys

    stderr = tmp_path / "mcp-big.stderr"
    with open(stderr, "wb") as file:
        file.truncate(1 << 30)
        file.seek(0, 2)
        file.write(b"spoke at length\nthen gave up\n")
    child = """if True:
        import resource, sys
        from pathlib import Path
        from dsh_core.extensions.mcp.servers import McpServers
        from dsh_core.extensions.mcp.spec import ServerSpec

        servers = McpServers([], stderr_dir=Path(sys.argv[1]), environment={}, workdir=Path("/"))
        pages = int(open("/proc/self/statm").read().split()[0])
        room = pages * resource.getpagesize() + (256 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (room, room))
        print(servers._said(ServerSpec("big", command="x"), 0, RuntimeError()))
    """
    said = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert said.stdout == f' (its stderr ends "then gave up"; all of it is in {stderr})\n', said
