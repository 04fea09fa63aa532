"""Whole-process cost of one short answer, and time to the first prompt on a terminal.

    python bench/startup.py [--runs 15]

Compares, in one run and interleaved (the machine is shared and noisy, so only ratios mean
much): ``echo hi | dsh`` in pipe mode against the bundled stub; bare httpx scripts (sync, and
async as dsh is) making the same streamed request with the same interpreter; and the ``llm``
CLI (if installed) doing the same job on the same stub. dsh runs from a venv of its own.
Then the time from spawning ``dsh`` on a pseudo-terminal until its prompt appears.
A benchmark reports; no test asserts time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_core.testing import StubServer

BARE_HTTPX = """
import httpx, json, sys
body = {"model": "deepseek-v4-flash", "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}
headers = {"Authorization": "Bearer sk-bench", "Accept": "text/event-stream"}
with httpx.Client() as client:
    with client.stream("POST", sys.argv[1] + "/chat/completions", json=body,
                       headers=headers) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices", []):
                    sys.stdout.write(choice["delta"].get("content") or "")
print()
"""


BARE_ASYNC_HTTPX = """
import asyncio, httpx, json, sys
async def main():
    body = {"model": "deepseek-v4-flash", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": "Bearer sk-bench", "Accept": "text/event-stream"}
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", sys.argv[1] + "/chat/completions", json=body,
                                 headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    for choice in json.loads(line[6:]).get("choices", []):
                        sys.stdout.write(choice["delta"].get("content") or "")
    print()
asyncio.run(main())
"""


def timed(command: list[str], env: dict[str, str], stdin: bytes) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, env=env, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0 or b"You said" not in result.stdout:
        raise SystemExit(f"{command[0]} failed: {result.stdout!r} {result.stderr!r}")
    return elapsed


def first_prompt(dsh: str, env: dict[str, str]) -> float:
    import pexpect

    start = time.perf_counter()
    child = pexpect.spawn(dsh, env=env, timeout=20)
    child.expect_exact("> ")
    elapsed = time.perf_counter() - start
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    return elapsed


def llm_command(server: StubServer, home: Path) -> tuple[list[str], dict[str, str]] | None:
    # llm runs from the environment running this script (pip install llm there).
    llm = shutil.which("llm") or str(Path(sys.executable).parent / "llm")
    if not Path(llm).exists():
        return None
    config = home / "llm"
    config.mkdir()
    (config / "extra-openai-models.yaml").write_text(
        f'- model_id: stub\n  model_name: deepseek-v4-flash\n  api_base: "{server.url}"\n'
    )
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "LLM_USER_PATH": str(config),
        "OPENAI_API_KEY": "sk-bench",
    }
    return [llm, "-m", "stub", "--no-log", "hi"], env


def product_venv(path: Path) -> Path:
    """A virtual environment holding dsh as a user installs it: its own dependencies only.

    Measuring in the development venv would charge dsh and the bare scripts for packages the
    product does not need (``llm`` brings click, which ``import httpx`` then loads: ~20 ms),
    and would run source files that ``PYTHONDONTWRITEBYTECODE`` keeps recompiling. pip
    byte-compiles what it installs. The venv is kept between runs; delete it to rebuild.
    """
    python = path / "bin" / "python"
    if not python.exists():
        root = Path(__file__).resolve().parent.parent
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", str(root)],
            check=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        )
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--venv", type=Path, default=Path(tempfile.gettempdir()) / "dsh-bench-startup-venv"
    )
    args = parser.parse_args()
    runs = args.runs
    python = product_venv(args.venv)
    with StubServer() as server, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "DEEPSEEK_API_KEY": "sk-bench",
            "DEEPSEEK_BASE_URL": server.url,
            "DSH_HOME": str(home / "dsh"),
            "TERM": "dumb",
            "PROMPT_TOOLKIT_NO_CPR": "1",
        }
        dsh = str(python.parent / "dsh")
        candidates: dict[str, Callable[[], float]] = {
            "dsh (pipe, one answer)": lambda: timed([dsh], env, b"hi\n"),
            "bare httpx script": lambda: timed(
                [str(python), "-c", BARE_HTTPX, server.url], env, b""
            ),
            "bare async httpx script": lambda: timed(
                [str(python), "-c", BARE_ASYNC_HTTPX, server.url], env, b""
            ),
        }
        llm = llm_command(server, home)
        if llm is not None:
            command, llm_env = llm
            candidates["llm CLI"] = lambda: timed(command, llm_env, b"")
        candidates["dsh: spawn to first prompt (pty)"] = lambda: first_prompt(dsh, env)

        samples: dict[str, list[float]] = {name: [] for name in candidates}
        for measure in candidates.values():
            measure()  # warm the page cache and .pyc files
        for _ in range(runs):
            for name, measure in candidates.items():
                samples[name].append(measure())

    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{runs} interleaved runs each, median wall time:")
    for name, value in median.items():
        print(f"  {name:36} {value * 1000:7.1f} ms")
    dsh_time = median["dsh (pipe, one answer)"]
    for bare in ("bare httpx script", "bare async httpx script"):
        print(f"dsh / {bare}: {dsh_time / median[bare]:.2f}x (goal <= 1.0x)")
    if "llm CLI" in median:
        print(f"llm / dsh: {median['llm CLI'] / dsh_time:.1f}x faster (goal >= 4x)")
    else:
        print("llm CLI: not installed (pip install llm to compare)")


if __name__ == "__main__":
    main()
