"""The gap between an answer and the next request, near the context window, against one json.dumps.

    .venv/bin/python bench/step_gap.py [--repeat 5] [--sizes 40000,400000,4000000]

For each history size (about 10k, 100k and 1M tokens at 4 bytes a token) one session is filled
by a first turn of ten steps whose ``read`` returns a tenth of the size each; a second turn of
small steps then measures, at every step, the time from the end of one answer's stream to the
moment httpx is handed the next request (an httpx request hook), through the product's loop:
the tool, the log's writes and fsyncs, the history, the encoding. The floor is one bare
``json.dumps`` of that same request body, timed in the same hook after the timestamp is taken.

Two candidates run interleaved, round after round, on the same stub (a separate process):
``cached`` is the product (:class:`dsh_core.model.wire.RequestEncoder`), ``fresh`` the adapter
with every request encoded whole by :func:`~dsh_core.model.wire.encode_request` (the code before
issue 32). Medians count. A benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

from steps import KEY, MODEL, PROMPT, start_stub  # a sibling: bench/ is sys.path[0]

from dsh_core.agent.loop import Conversation
from dsh_core.model.deepseek import DeepSeekAdapter
from dsh_core.model.seam import ChatRequest, Event, ToolSpec
from dsh_core.model.wire import encode_request
from dsh_core.session import SessionStore
from dsh_core.tools import Access, Invocation, Toolbox, ToolOutput

FILL_STEPS = 10
MEASURED_STEPS = 8
SMALL_RESULT = 2000


class SizedRead:
    """A ``read`` whose result is ``size`` characters: big while filling, small when measured.

    The text is code as a file holds it (quotes, backslashes, newlines, a non-ASCII letter),
    each of which ``json.dumps`` escapes or encodes: what a real history costs to encode."""

    spec = ToolSpec("read", "read a file", {"type": "object"})

    def __init__(self) -> None:
        self.size = SMALL_RESULT

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("file_path", ""))

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        line = '    return {"naïve": path.read_text(), "tab": "\\t"}  # cached\n'
        text = (line * (self.size // len(line) + 1))[: self.size]

        async def run() -> ToolOutput:
            return ToolOutput(text)

        return Invocation(Access("read"), self.describe(arguments), run)


class FreshEncoder:
    """The encoding before issue 32: the whole body, every request."""

    def encode(self, request: ChatRequest) -> bytes:
        return encode_request(request)


class Timed:
    """The adapter, noting when each answer's stream has ended."""

    def __init__(self, adapter: DeepSeekAdapter) -> None:
        self.adapter = adapter
        self.ended: float | None = None

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        async for event in self.adapter.stream(request):
            yield event
        self.ended = time.perf_counter()

    async def close(self) -> None:
        await self.adapter.close()


async def one_run(url: str, home: Path, size: int, *, cached: bool) -> tuple[float, float, int]:
    """Median gap and median ``json.dumps`` (seconds) of the measured steps; the body size."""
    gaps: list[float] = []
    floors: list[float] = []
    body_bytes = 0
    timed: Timed | None = None

    async def on_request(request: httpx.Request) -> None:
        nonlocal body_bytes
        now = time.perf_counter()
        if timed is None or timed.ended is None or not measuring:
            return
        gaps.append(now - timed.ended)
        body = json.loads(request.content)
        started = time.perf_counter()
        json.dumps(body, ensure_ascii=False)
        floors.append(time.perf_counter() - started)
        body_bytes = len(request.content)

    measuring = False
    async with httpx.AsyncClient(event_hooks={"request": [on_request]}) as client:
        adapter = DeepSeekAdapter(base_url=url, api_key=KEY, client=client)
        if not cached:
            adapter._encoder = FreshEncoder()  # type: ignore[assignment]
        timed = Timed(adapter)
        read = SizedRead()
        with SessionStore(home).create(Path("/bench/project")) as log:
            fill = Conversation(
                timed,
                log,
                model_name=MODEL,
                max_steps=FILL_STEPS,
                toolbox=Toolbox([read]),
                context_window=10**9,
            )
            read.size = size // FILL_STEPS
            await fill.run_turn(PROMPT)
            read.size = SMALL_RESULT
            fill.max_steps = MEASURED_STEPS
            timed.ended = None
            measuring = True
            await fill.run_turn(PROMPT)
    return statistics.median(gaps), statistics.median(floors), body_bytes


async def measure(url: str, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-gap-") as scratch:
        for size in sizes:
            found: dict[str, list[tuple[float, float]]] = {"cached": [], "fresh": []}
            body = 0
            for _ in range(repeat):
                for name in ("cached", "fresh"):
                    gap, floor, body = await one_run(
                        url, Path(scratch), size, cached=name == "cached"
                    )
                    found[name].append((gap, floor))
            row: dict[str, Any] = {"size": size, "body_bytes": body}
            for name, pairs in found.items():
                row[f"{name}_ms"] = statistics.median(g for g, _ in pairs) * 1000
                row[f"{name}_ratio"] = statistics.median(g / f for g, f in pairs)
            row["dumps_ms"] = statistics.median(f for pairs in found.values() for _, f in pairs)
            row["dumps_ms"] *= 1000
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="40000,400000,4000000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    stub, url = start_stub()
    try:
        rows = asyncio.run(measure(url, sizes, args.repeat))
    finally:
        stub.terminate()
        stub.wait()
    if args.json:
        print(json.dumps(rows))
        return
    print(f"step gap (answer end -> next request), median of {args.repeat} interleaved rounds:")
    print("  body        json.dumps   fresh (before)        cached (now)")
    for row in rows:
        print(
            f"  {row['body_bytes'] / 1e6:6.2f} MB   {row['dumps_ms']:7.2f} ms"
            f"   {row['fresh_ms']:7.2f} ms {row['fresh_ratio']:5.2f}x"
            f"   {row['cached_ms']:7.2f} ms {row['cached_ratio']:5.2f}x   (goal <= 1.0x)"
        )


if __name__ == "__main__":
    main()
