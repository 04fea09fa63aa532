"""Stream one long answer from the stub server and compare deltas per second.

    .venv/bin/python bench/stream.py [--deltas 100000] [--repeat 3]
    .venv/bin/python bench/stream.py --memory [--answer-mb 50] [--baseline main]

The stub runs in a separate process (``python -m dsh_core.testing.stub_server``), so the client
under test has a core to itself. Each candidate reads the same stream, one candidate after another,
round after round, and the best round counts: the machine is noisy. Candidates:

- ``adapter``: :class:`dsh_core.DeepSeekAdapter`, the product's path.
- ``bare httpx``: ``aiter_lines()`` and ``json.loads`` per data line, the floor to beat.
- ``httpx-sse``: ``aconnect_sse`` + ``json.loads``, if ``httpx_sse`` is importable.
- ``openai SDK``: ``AsyncOpenAI().chat.completions.create(stream=True)``, if installed.

``--memory`` measures instead what one long answer costs in memory, through the product's loop
(:class:`~dsh_core.agent.loop.Conversation`, the adapter over loopback, a real session log): the
peak that ``tracemalloc`` sees during the turn, and the growth of the peak RSS, per byte of
answer, for a ``--answer-mb`` answer in deltas of 100 words and a tenth of it in deltas of one
word (token-sized, as DeepSeek sends them). Each measurement runs in a fresh interpreter;
``--baseline REV`` runs the same turn with the code of commit ``REV`` against the same stub. The
floor is 1 byte per byte: the answer itself, which the log and the history keep (goal: at most 2).

A benchmark reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from dsh_core import ChatRequest, TextDelta, UserMessage
from dsh_core.model.deepseek import DeepSeekAdapter

KEY = "sk-bench-not-a-real-key"
MODEL = "deepseek-v4-flash"
PROMPT = "long"
"""The stub's trigger word for a LongStream."""

Runner = Callable[[str], Awaitable[int]]
"""Streams the long answer from a base URL; returns the characters of text received."""


@dataclass
class Candidate:
    """One way of reading the stream, and its timings."""

    name: str
    run: Runner | None
    note: str = ""
    times: list[float] = field(default_factory=list)


def body() -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def adapter_runner() -> tuple[Runner, Callable[[], Awaitable[None]]]:
    adapters: dict[str, DeepSeekAdapter] = {}

    async def run(url: str) -> int:
        adapter = adapters.get(url)
        if adapter is None:
            adapter = adapters[url] = DeepSeekAdapter(base_url=url, api_key=KEY)
        request = ChatRequest(model=MODEL, messages=(UserMessage(PROMPT),))
        chars = 0
        async for event in adapter.stream(request):
            if isinstance(event, TextDelta):
                chars += len(event.text)
        return chars

    async def close() -> None:
        for adapter in adapters.values():
            await adapter.close()

    return run, close


def bare_runner(client: httpx.AsyncClient) -> Runner:
    async def run(url: str) -> int:
        chars = 0
        headers = {"Authorization": f"Bearer {KEY}", "Accept": "text/event-stream"}
        async with client.stream(
            "POST", f"{url}/chat/completions", json=body(), headers=headers
        ) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk["choices"]:
                    content = chunk["choices"][0]["delta"].get("content")
                    if content:
                        chars += len(content)
        return chars

    return run


def httpx_sse_runner(client: httpx.AsyncClient) -> Runner:
    # Imported by name: an optional package the product does not depend on, without type stubs.
    aconnect_sse: Any = importlib.import_module("httpx_sse").aconnect_sse

    async def run(url: str) -> int:
        chars = 0
        headers = {"Authorization": f"Bearer {KEY}"}
        async with aconnect_sse(
            client, "POST", f"{url}/chat/completions", json=body(), headers=headers
        ) as source:
            async for event in source.aiter_sse():
                if event.data == "[DONE]":
                    break
                chunk = json.loads(event.data)
                if chunk["choices"]:
                    content = chunk["choices"][0]["delta"].get("content")
                    if content:
                        chars += len(content)
        return chars

    return run


def openai_runner() -> tuple[Runner, Callable[[], Awaitable[None]]]:
    from openai import AsyncOpenAI

    clients: dict[str, Any] = {}

    async def run(url: str) -> int:
        client = clients.get(url)
        if client is None:
            client = clients[url] = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
        chars = 0
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices:
                content = chunk.choices[0].delta.content
                if content:
                    chars += len(content)
        return chars

    async def close() -> None:
        for client in clients.values():
            await client.close()

    return run, close


def start_stub(
    deltas: int, chunk_events: int, delta_words: int = 1
) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "dsh_core.testing.stub_server", "--long-deltas", str(deltas)]
    command += ["--long-chunk-events", str(chunk_events)]
    if delta_words != 1:
        command += ["--long-delta-words", str(delta_words)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    if not first.startswith("stub server listening on "):
        process.kill()
        raise SystemExit(f"the stub server did not start: {first!r}")
    return process, first.rsplit(" ", 1)[1]


async def measure(url: str, deltas: int, repeat: int) -> list[Candidate]:
    closers: list[Callable[[], Awaitable[None]]] = []
    async with httpx.AsyncClient() as client:  # as a bare loop is written: default timeouts
        run, close = adapter_runner()
        closers.append(close)
        candidates = [
            Candidate("adapter (DeepSeekAdapter)", run),
            Candidate("bare httpx aiter_lines + json.loads", bare_runner(client)),
        ]
        if importlib.util.find_spec("httpx_sse") is not None:
            candidates.append(
                Candidate("httpx-sse aiter_sse + json.loads", httpx_sse_runner(client))
            )
        else:
            candidates.append(Candidate("httpx-sse", None, "not installed"))
        if importlib.util.find_spec("openai") is not None:
            import openai

            run, close = openai_runner()
            closers.append(close)
            candidates.append(Candidate(f"openai SDK {openai.__version__}", run))
        else:
            candidates.append(Candidate("openai SDK", None, "not installed"))

        expected: int | None = None
        # One untimed round: imports, connections and the stub's cached body are warm after it.
        for candidate in candidates:
            if candidate.run is not None:
                expected = await candidate.run(url)
        for _ in range(repeat):
            for candidate in candidates:
                if candidate.run is None:
                    continue
                started = time.perf_counter()
                chars = await candidate.run(url)
                candidate.times.append(time.perf_counter() - started)
                if chars != expected:
                    raise SystemExit(f"{candidate.name} read {chars} characters, not {expected}")
        for close in closers:
            await close()
    return candidates


def report(
    candidates: list[Candidate], deltas: int, chunk_events: int, repeat: int, url: str
) -> None:
    print(f"one answer of {deltas:,} deltas from the stub at {url} (another process),")
    print(f"{chunk_events} server-sent events per HTTP chunk")
    print(f"best of {repeat} interleaved rounds; median in brackets\n")
    rates: dict[str, float] = {}
    for candidate in candidates:
        if not candidate.times:
            print(f"  {candidate.name:<40} {candidate.note}")
            continue
        best = min(candidate.times)
        median = statistics.median(candidate.times)
        rates[candidate.name] = deltas / best
        print(
            f"  {candidate.name:<40} {best:7.3f} s  ({median:.3f} s)"
            f"  {deltas / best:>11,.0f} deltas/s"
        )
    adapter = rates.get(candidates[0].name)
    if adapter is None:
        return
    print()
    for candidate in candidates[1:]:
        rate = rates.get(candidate.name)
        if rate is not None:
            goal = ""
            if candidate.name.startswith("bare"):
                goal = "  (goal >= 1)"
            elif candidate.name.startswith("openai"):
                goal = "  (goal >= 15)"
            print(f"  adapter / {candidate.name:<38} {adapter / rate:6.2f}x{goal}")


ROOT = Path(__file__).resolve().parents[1]
WORD_CHARS = 43 / 9
"""The stub's words' mean length, with their spaces (``the quick brown fox ...``)."""


async def one_long_turn(url: str) -> dict[str, int]:
    """In the child: one turn of the ``long`` answer through the loop, recorded to a log."""
    from dsh_core.agent.loop import Conversation
    from dsh_core.session import SessionStore

    with tempfile.TemporaryDirectory(prefix="dsh-bench-stream-") as home:
        adapter = DeepSeekAdapter(base_url=url, api_key=KEY)
        with SessionStore(Path(home)).create(Path("/bench/project")) as log:
            conversation = Conversation(adapter, log, model_name=MODEL)
            await conversation.run_turn("warm up: a short answer")  # imports, the connection
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            tracemalloc.start()
            traced_before = tracemalloc.get_traced_memory()[0]
            await conversation.run_turn(PROMPT)
            traced_after, traced_peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            answer = _last_answer(log.path)
        await adapter.close()
    return {
        "answer_bytes": answer,
        "traced_peak": traced_peak - traced_before,
        "traced_after": traced_after - traced_before,
        "rss_growth": rss_peak - rss_before,
    }


def _last_answer(path: Path) -> int:
    """The UTF-8 size of the last ``assistant/message`` text in the log at ``path``."""
    size = 0
    with path.open("rb") as lines:
        for line in lines:
            if b'"assistant/message"' in line[:40]:
                size = len(json.loads(line)["data"]["text"].encode())
    return size


def memory_child(url: str, code: Path) -> dict[str, int]:
    """:func:`one_long_turn` in a fresh interpreter importing dsh from ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, str(ROOT / "bench" / "stream.py"), "--memory-child", url]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measuring child failed:\n{done.stderr}")
    result: dict[str, int] = json.loads(done.stdout)
    return result


def measure_memory(answer_mb: float, baseline: str | None, repeat: int) -> None:
    shapes = ((answer_mb, 100), (answer_mb / 10, 1))
    with tempfile.TemporaryDirectory(prefix="dsh-bench-stream-code-") as scratch:
        trees = {"now": ROOT}
        if baseline is not None:
            trees[baseline] = _tree_of(baseline, Path(scratch))
        print(f"peak memory of one long answer, per byte of answer (best of {repeat}; floor 1.0,")
        print("goal at most 2.0); tracemalloc over the turn, and the growth of the peak RSS")
        for megabytes, words in shapes:
            deltas = int(megabytes * 1e6 / (WORD_CHARS * words))
            process, url = start_stub(deltas, 256, words)
            try:
                for name, tree in trees.items():
                    runs = [memory_child(url, tree) for _ in range(repeat)]
                    answer = runs[0]["answer_bytes"]
                    traced = min(run["traced_peak"] for run in runs) / answer
                    kept = min(run["traced_after"] for run in runs) / answer
                    rss = min(run["rss_growth"] for run in runs) / answer
                    print(
                        f"  {answer / 1e6:5.1f} MB in {deltas:>9,} deltas of {words:>3} words, "
                        f"{name:>8}: peak {traced:5.2f} B/B traced, {rss:5.2f} B/B RSS; "
                        f"kept {kept:4.2f} B/B"
                    )
            finally:
                process.terminate()
                process.wait(timeout=10)
                if process.stdout is not None:
                    process.stdout.close()


def _tree_of(rev: str, scratch: Path) -> Path:
    """The files of commit ``rev``, unpacked under ``scratch``."""
    into = scratch / rev.replace("/", "_")
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--chunk-events",
        type=int,
        default=256,
        help="server-sent events per HTTP chunk (1: each event flushed alone); default 256",
    )
    parser.add_argument("--memory", action="store_true", help="peak memory, not speed")
    parser.add_argument("--answer-mb", type=float, default=50.0)
    parser.add_argument("--baseline", metavar="REV", help="with --memory: also at commit REV")
    parser.add_argument("--memory-child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        print(json.dumps(asyncio.run(one_long_turn(args.memory_child))))
        return
    if args.memory:
        measure_memory(args.answer_mb, args.baseline, args.repeat)
        return
    process, url = start_stub(args.deltas, args.chunk_events)
    try:
        candidates = asyncio.run(measure(url, args.deltas, args.repeat))
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    report(candidates, args.deltas, args.chunk_events, args.repeat, url)


if __name__ == "__main__":
    main()
