"""A turn of many steps against the stub: time per step, fsyncs per step, memory over 1,000 steps.

    .venv/bin/python bench/steps.py [--steps 50] [--repeat 5] [--long 1000]

The stub runs in a separate process (``python -m dsh_core.testing.stub_server``) and its
``toolloop`` trigger asks for the same ``read`` call at every step, forever; the turn ends at
the step limit. Two candidates make the same requests, one after the other, round after round
(the best round counts: the machine is noisy):

- ``loop``: :class:`dsh_core.Conversation` with the DeepSeek adapter and a session log on disk,
  running a trivial ``read`` tool at each step: the product's path, log writes and fsyncs
  included.
- ``bare httpx``: one ``httpx.AsyncClient`` posting the same growing conversation, reading each
  stream with ``aiter_lines`` and ``json.loads``, gathering the call, and answering it with the
  same result text: the floor.

Then one turn of ``--long`` steps reports the process's resident memory at steps 10, 100 and
the last, beside the size of the conversation. A benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

from dsh_core.agent.loop import Conversation, LoopEvent, ToolFinished
from dsh_core.model.deepseek import DeepSeekAdapter
from dsh_core.model.seam import ToolSpec
from dsh_core.session import SessionStore
from dsh_core.tools import Access, Invocation, Toolbox, ToolOutput
from tests.support import proc_status

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

KEY = "sk-bench-not-a-real-key"
MODEL = "deepseek-v4-flash"
PROMPT = "toolloop"
RESULT = "     1\tHello from the bench."


class TrivialRead:
    """A ``read`` that answers at once, so the bench measures the loop, not the tool."""

    spec = ToolSpec("read", "read a file", {"type": "object"})

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("file_path", ""))

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        async def run() -> ToolOutput:
            return ToolOutput(RESULT)

        return Invocation(Access("read"), self.describe(arguments), run)


def start_stub() -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "dsh_core.testing.stub_server"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    return process, first.rsplit(" ", 1)[-1].strip()


async def loop_turn(
    url: str, home: Path, steps: int, *, rss_at: tuple[int, ...] = ()
) -> dict[str, Any]:
    """One turn of ``steps`` steps through the product's loop; seconds, fsyncs, RSS samples."""
    fsyncs = 0
    real_fsync = os.fsync

    def counting(fd: FileDescriptorLike) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real_fsync(fd)

    adapter = DeepSeekAdapter(base_url=url, api_key=KEY)
    store = SessionStore(home)
    rss: dict[int, int] = {}
    step = 0

    def observe(event: LoopEvent) -> None:
        nonlocal step
        if isinstance(event, ToolFinished):
            step += 1
            if step in rss_at:
                rss[step] = proc_status(os.getpid())["VmRSS"]

    with store.create(Path("/bench/project")) as log:
        conversation = Conversation(
            adapter,
            log,
            model_name=MODEL,
            max_steps=steps,
            toolbox=Toolbox([TrivialRead()]),
            context_window=10**9,
        )
        os.fsync = counting
        try:
            started = time.perf_counter()
            end = await conversation.run_turn(PROMPT, on_event=observe)
            seconds = time.perf_counter() - started
        finally:
            os.fsync = real_fsync
        size = log.path.stat().st_size
    await adapter.close()
    assert end.kind == "max-steps", end
    return {"seconds": seconds, "fsyncs": fsyncs, "rss": rss, "log_bytes": size}


async def bare_turn(client: httpx.AsyncClient, url: str, steps: int) -> float:
    """The same requests with a bare httpx loop: post, parse, answer the call, repeat."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "read a file",
                "parameters": {"type": "object"},
            },
        }
    ]
    headers = {"Authorization": f"Bearer {KEY}"}
    started = time.perf_counter()
    for _ in range(steps):
        body = {
            "model": MODEL,
            "messages": messages,
            "tools": tools,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        calls: dict[int, dict[str, str]] = {}
        async with client.stream(
            "POST", f"{url}/chat/completions", json=body, headers=headers
        ) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    for fragment in (choice.get("delta") or {}).get("tool_calls") or []:
                        call = calls.setdefault(fragment["index"], {"arguments": ""})
                        if "id" in fragment:
                            call["id"] = fragment["id"]
                        function = fragment.get("function") or {}
                        if "name" in function:
                            call["name"] = function["name"]
                        call["arguments"] += function.get("arguments") or ""
        ordered = [calls[i] for i in sorted(calls)]
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "",
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in ordered
                ],
            }
        )
        messages.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": RESULT} for c in ordered
        )
    return time.perf_counter() - started


async def measure(url: str, steps: int, repeat: int, long: int) -> dict[str, Any]:
    loop_best, bare_best = float("inf"), float("inf")
    fsyncs = 0
    with tempfile.TemporaryDirectory(prefix="dsh-bench-steps-") as scratch:
        async with httpx.AsyncClient() as client:
            for _ in range(repeat):
                result = await loop_turn(url, Path(scratch), steps)
                loop_best = min(loop_best, result["seconds"])
                fsyncs = result["fsyncs"]
                bare_best = min(bare_best, await bare_turn(client, url, steps))
        rss_at = (10, 100, long)
        big = await loop_turn(url, Path(scratch), long, rss_at=rss_at)
    return {
        "steps": steps,
        "loop_ms_per_step": loop_best / steps * 1000,
        "bare_ms_per_step": bare_best / steps * 1000,
        "ratio": loop_best / bare_best,
        "fsyncs_per_step": fsyncs / steps,
        "fsyncs_per_turn": fsyncs,
        "long_steps": long,
        "rss_kb": big["rss"],
        "long_log_bytes": big["log_bytes"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--long", type=int, default=1000, help="steps of the memory run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stub, url = start_stub()
    try:
        figures = asyncio.run(measure(url, args.steps, args.repeat, args.long))
    finally:
        stub.terminate()
        stub.wait()
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{figures['steps']}-step turn, best of {args.repeat} interleaved rounds:")
    print(f"  loop        {figures['loop_ms_per_step']:.2f} ms per step")
    print(f"  bare httpx  {figures['bare_ms_per_step']:.2f} ms per step")
    print(f"  loop / bare {figures['ratio']:.2f}x (goal <= 1.3x)")
    print(
        f"  fsyncs      {figures['fsyncs_per_step']:.2f} per step "
        f"({figures['fsyncs_per_turn']} in the turn: user message, one per result, turn end)"
    )
    rss = ", ".join(f"step {k}: {v / 1024:.1f} MB" for k, v in sorted(figures["rss_kb"].items()))
    print(f"  RSS over a {figures['long_steps']}-step turn: {rss}")
    print(f"  (that turn's log: {figures['long_log_bytes'] / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
