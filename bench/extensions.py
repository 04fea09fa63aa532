"""The cost of extensions (SPEC 13): an MCP call through dsh, and subagents side by side.

    .venv/bin/python bench/extensions.py [--calls 200] [--rounds 5]

1. **An MCP call's overhead.** The same tool (``add`` of ``tests/mcp/server.py``, a server
   written with the SDK, on stdio) called ``--calls`` times through dsh's path (the ``McpTool``
   the loop runs: :class:`~dsh_core.extensions.mcp.McpServers`, the relay, the result made a capped
   ``ToolOutput``) and through the SDK's own client (``ClientSession.call_tool`` on its own
   ``stdio_client``), each against a server process of its own, in interleaved rounds. Goal:
   dsh at most 1.5x the SDK's time per call.
3. **The REPL's first prompt with five servers**, one of them 5 s slow to start
   (``DSH_TEST_START_DELAY``), against no server at all: the real ``dsh`` on a pty. Goal: under
   0.5 s (servers start in the background). And the first answer on a pipe with those five
   (it waits for them: the slow one's 5 s, no more).
2. **Three subagents in one step** against the stub answering each child after 200 ms (a
   keep-alive, then the answer), one turn each way, interleaved: the three calls in one step
   (they run side by side) and in three steps (one after another). Goal: at most 0.5x.

Medians of the rounds, and the best round, are printed; the machine is shared and noisy. A
benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.loop import Conversation
from dsh_core.extensions.mcp import ServerSpec
from dsh_core.extensions.mcp.servers import McpServers
from dsh_core.extensions.subagent import SubagentTool
from dsh_core.model.deepseek import DeepSeekAdapter
from dsh_core.model.seam import ToolCall
from dsh_core.session import SessionLog, SessionStore
from dsh_core.testing import Answer, KeepAlives, StubServer, ToolCalls
from dsh_core.tools import Toolbox
from dsh_core.trust.workspace import child_environment

SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "server.py"
KEY = "sk-bench-not-a-real-key"
CHILD_DELAY = 0.2


# 1. An MCP call.


async def dsh_calls(count: int, home: Path) -> list[float]:
    spec = ServerSpec("bench", command=sys.executable, args=(str(SERVER), "well"))
    servers = McpServers(
        [spec], stderr_dir=home, environment=child_environment(), workdir=Path.cwd()
    )
    assert not await servers.start()
    (tool,) = [t for t in servers.tools(home) if t.spec.name == "mcp__bench__add"]
    times = []
    try:
        for n in range(count):
            invocation = tool.prepare({"a": n, "b": 1})
            start = time.perf_counter()
            output = await invocation.run()
            times.append(time.perf_counter() - start)
            assert output.content == str(n + 1), output
    finally:
        await servers.close()
    return times


async def sdk_calls(count: int, quiet: TextIO) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    parameters = StdioServerParameters(command=sys.executable, args=[str(SERVER), "well"])
    times = []
    async with (
        stdio_client(parameters, errlog=quiet) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()
        for n in range(count):
            start = time.perf_counter()
            result = await session.call_tool("add", {"a": n, "b": 1})
            times.append(time.perf_counter() - start)
            assert result.content[0].type == "text" and result.content[0].text == str(n + 1)
    return times


# 2. Three subagents.


def subagent_turn(
    server: StubServer, store: SessionStore, adapter: DeepSeekAdapter, *, together: bool
) -> Conversation:
    """A conversation whose next turn runs three subagents, in one step or in three."""
    arguments = [json.dumps({"description": f"part {n}", "prompt": f"part {n}"}) for n in (1, 2, 3)]
    child = KeepAlives(1, CHILD_DELAY, Answer("found it"))
    if together:
        server.enqueue(ToolCalls(tuple(("subagent", a) for a in arguments)), child, child, child)
    else:
        for argument in arguments:
            server.enqueue(ToolCalls((("subagent", argument),)), child)
    server.enqueue(Answer("all three"))
    log = store.create(Path.cwd())

    def open_child(call: ToolCall) -> Conversation:
        child_log: SessionLog = store.create(Path.cwd(), parent=log, call_id=call.id)
        return Conversation(adapter, child_log, model_name="deepseek-v4-flash", toolbox=Toolbox())

    return Conversation(
        adapter,
        log,
        model_name="deepseek-v4-flash",
        toolbox=Toolbox([SubagentTool(open_child, log.path.parent / "tool-output")]),
        approval=ApprovalPolicy(),
    )


async def subagents(server: StubServer, home: Path, rounds: int) -> dict[str, list[float]]:
    store = SessionStore(home)
    adapter = DeepSeekAdapter(base_url=server.url, api_key=KEY)
    times: dict[str, list[float]] = {"one step": [], "three steps": []}
    try:
        for _ in range(rounds):
            for name, together in (("one step", True), ("three steps", False)):
                conversation = subagent_turn(server, store, adapter, together=together)
                start = time.perf_counter()
                end = await conversation.run_turn("split the work")
                times[name].append(time.perf_counter() - start)
                conversation.log.close()
                assert end.kind == "completed", end
    finally:
        await adapter.close()
    return times


# 3. The first prompt, and the first answer, with five servers.


def five_servers(home: Path) -> None:
    tables = []
    for n in range(5):
        lines = [
            f"[mcp.servers.s{n}]",
            f"command = {json.dumps(sys.executable)}",
            f"args = {json.dumps([str(SERVER), 'well'])}",
        ]
        if n == 0:
            lines.append('env = { DSH_TEST_START_DELAY = "5" }')
        tables.append("\n".join(lines) + "\n")
    (home / "config.toml").write_text("".join(tables))


def startup(server: StubServer, tmp: Path, rounds: int) -> dict[str, list[float]]:
    import subprocess

    import pexpect

    times: dict[str, list[float]] = {"prompt, none": [], "prompt, five": [], "answer, five": []}
    for _ in range(rounds):
        for name in times:
            home = tmp / f"home-{name.replace(', ', '-')}-{len(times[name])}"
            home.mkdir()
            if name.endswith("five"):
                five_servers(home)
            env = {
                **os.environ,
                "DSH_HOME": str(home),
                "DEEPSEEK_API_KEY": KEY,
                "DEEPSEEK_BASE_URL": server.url,
                "TERM": "dumb",
                "PROMPT_TOOLKIT_NO_CPR": "1",
            }
            dsh = [sys.executable, "-m", "dsh_stdio"]
            start = time.perf_counter()
            if name.startswith("prompt"):
                child = pexpect.spawn(dsh[0], dsh[1:], env=env, cwd=str(tmp), timeout=30)
                child.expect_exact("> ")
                times[name].append(time.perf_counter() - start)
                child.sendline("/exit")
                child.expect(pexpect.EOF)
                child.close()
            else:
                server.enqueue(Answer("hi"))
                subprocess.run(
                    dsh, input=b"hi\n", env=env, cwd=tmp, capture_output=True, check=True
                )
                times[name].append(time.perf_counter() - start)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:  # noqa: ASYNC230
        home = Path(tmp)
        per_call: dict[str, list[float]] = {"dsh": [], "sdk": []}
        best: dict[str, float] = {"dsh": float("inf"), "sdk": float("inf")}
        for _ in range(args.rounds):
            for name in ("dsh", "sdk"):
                if name == "dsh":
                    times = await dsh_calls(args.calls, home)
                else:
                    times = await sdk_calls(args.calls, quiet)
                median = statistics.median(times)
                per_call[name].append(median)
                best[name] = min(best[name], median)
        dsh, sdk = statistics.median(per_call["dsh"]), statistics.median(per_call["sdk"])
        print(f"MCP call, median of {args.rounds} rounds of {args.calls} calls:")
        print(f"  dsh's McpTool      {dsh * 1e6:8.0f} us")
        print(f"  the SDK's client   {sdk * 1e6:8.0f} us")
        ratio, best_ratio = dsh / sdk, best["dsh"] / best["sdk"]
        print(f"  dsh / SDK: {ratio:.2f}x (best rounds {best_ratio:.2f}x; goal <= 1.5x)")
        with StubServer() as server:
            turns = await subagents(server, home, args.rounds)
            started = startup(server, home, args.rounds)
        one, three = statistics.median(turns["one step"]), statistics.median(turns["three steps"])
        print(f"Three subagents, each child answered after {CHILD_DELAY * 1000:.0f} ms:")
        print(f"  in one step (side by side)   {one * 1000:7.0f} ms")
        print(f"  in three steps               {three * 1000:7.0f} ms")
        print(f"  one step / three steps: {one / three:.2f}x (goal <= 0.5x)")
        print(f"Start-up, median of {args.rounds} interleaved rounds:")
        for name, values in started.items():
            print(f"  {name:14} {statistics.median(values) * 1000:7.0f} ms")
        print("  (goal: the prompt with five servers, one 5 s slow, under 500 ms)")


if __name__ == "__main__":
    asyncio.run(main())
