"""Whole-process cost of one short answer, and time to the first prompt on a terminal.

    python bench/startup.py [--runs 15]

Compares, in one run and interleaved (the machine is shared and noisy, so only ratios mean
much): ``echo hi | dsh`` in pipe mode against the bundled stub; a bare httpx script making the
same streamed request; and the ``llm`` CLI (if installed) doing the same job on the same stub.
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

from dsh_core.stub_server import StubServer

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


def timed(command: list[str], env: dict[str, str], stdin: bytes) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, env=env, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0 or b"You said" not in result.stdout:
        raise SystemExit(f"{command[0]} failed: {result.stdout!r} {result.stderr!r}")
    return elapsed


def first_prompt(env: dict[str, str]) -> float:
    import pexpect

    start = time.perf_counter()
    child = pexpect.spawn(sys.executable, ["-m", "dsh_stdio"], env=env, timeout=20)
    child.expect_exact("> ")
    elapsed = time.perf_counter() - start
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    return elapsed


def llm_command(server: StubServer, home: Path) -> tuple[list[str], dict[str, str]] | None:
    llm = shutil.which("llm") or str(Path(sys.executable).parent / "llm")
    if not Path(llm).exists():
        return None
    config = home / "llm"
    config.mkdir()
    (config / "extra-openai-models.yaml").write_text(
        f'- model_id: stub\n  model_name: deepseek-v4-flash\n  api_base: "{server.url}"\n'
    )
    env = {**os.environ, "LLM_USER_PATH": str(config), "OPENAI_API_KEY": "sk-bench"}
    return [llm, "-m", "stub", "--no-log", "hi"], env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with StubServer() as server, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {
            **os.environ,
            "DEEPSEEK_API_KEY": "sk-bench",
            "DEEPSEEK_BASE_URL": server.url,
            "DSH_HOME": str(home / "dsh"),
            "TERM": "dumb",
            "PROMPT_TOOLKIT_NO_CPR": "1",
        }
        dsh = shutil.which("dsh") or str(Path(sys.executable).parent / "dsh")
        candidates: dict[str, Callable[[], float]] = {
            "dsh (pipe, one answer)": lambda: timed([dsh], env, b"hi\n"),
            "bare httpx script": lambda: timed(
                [sys.executable, "-c", BARE_HTTPX, server.url], env, b""
            ),
        }
        llm = llm_command(server, home)
        if llm is not None:
            command, llm_env = llm
            candidates["llm CLI"] = lambda: timed(command, llm_env, b"")
        candidates["dsh: spawn to first prompt (pty)"] = lambda: first_prompt(env)

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
    print(f"dsh / bare httpx: {dsh_time / median['bare httpx script']:.2f}x (goal <= 1.0x)")
    if "llm CLI" in median:
        print(f"llm / dsh: {median['llm CLI'] / dsh_time:.1f}x faster (goal >= 4x)")
    else:
        print("llm CLI: not installed (pip install llm to compare)")


if __name__ == "__main__":
    main()
