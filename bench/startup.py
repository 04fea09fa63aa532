"""Whole-process cost of one short answer, and time to the first prompt on a terminal.

    python bench/startup.py [--runs 15] [--baseline main]

Compares, in one run and interleaved (the machine is shared and noisy, so only ratios mean
much): ``echo hi | dsh`` in pipe mode and ``dsh hi`` (one-shot) against the bundled stub; bare
httpx scripts (sync, and async as dsh is) making the same streamed request with the same
interpreter; and the ``llm`` CLI (if installed) doing the same job on the same stub. dsh runs
from a venv of its own. Then the time from spawning ``dsh`` on a pseudo-terminal until its
prompt appears. ``--baseline REV`` adds the same three dsh measurements for the commit REV
(built from ``git archive`` into a venv of its own), interleaved with the rest: before and
after a change, in one run. Each figure is a median of wall time, with the CPU time the
process used beside it (steadier on a busy machine). A benchmark reports; no test asserts time.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_core.testing import StubServer

# Both scripts, like dsh, keep httpx from importing its command-line interface: with rich in
# the environment (dsh renders Markdown with it) that costs `import httpx` ~45 ms, which would
# flatter dsh's ratio.
BARE_HTTPX = """
import sys; sys.modules.setdefault("httpx._main", None)
import httpx, json
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
import sys; sys.modules.setdefault("httpx._main", None)
import asyncio, httpx, json
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


def children_cpu() -> float:
    """CPU seconds (user and system) of every child waited for so far: on a machine shared
    with other work, a steadier figure than wall time (it leaves out the waiting for a CPU)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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


ROOT = Path(__file__).resolve().parent.parent


def product_venv(path: Path, source: Path = ROOT) -> Path:
    """A virtual environment holding dsh as a user installs it: its own dependencies only.

    Measuring in the development venv would charge dsh and the bare scripts for packages the
    product does not need (``llm`` brings click, which ``import httpx`` then loads: ~20 ms),
    and would run source files that ``PYTHONDONTWRITEBYTECODE`` keeps recompiling. pip
    byte-compiles what it installs. The venv and its dependencies are kept between runs; dsh
    itself is installed again from ``source`` every time, so it measures the code as it is.
    """
    python = path / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([*pip, str(source)], check=True, env=env)
    else:
        subprocess.run([*pip, "--no-deps", "--force-reinstall", str(source)], check=True, env=env)
    return python


def baseline_source(rev: str, into: Path) -> tuple[str, Path]:
    """The tree of commit ``rev`` (its short hash, and where it was unpacked)."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit, into


DSH_MEASURES = ("pipe, one answer", "one-shot answer", "spawn to first prompt (pty)")


def dsh_candidates(label: str, dsh: str, env: dict[str, str]) -> dict[str, Callable[[], float]]:
    """The dsh measurements (:data:`DSH_MEASURES`), each named ``<label>: <measure>``."""
    pipe, one_shot, prompt = DSH_MEASURES
    return {
        f"{label}: {pipe}": lambda: timed([dsh], env, b"hi\n"),
        f"{label}: {one_shot}": lambda: timed([dsh, "hi"], env, b""),
        f"{label}: {prompt}": lambda: first_prompt(dsh, env),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--venv", type=Path, default=Path(tempfile.gettempdir()) / "dsh-bench-startup-venv"
    )
    parser.add_argument("--baseline", metavar="REV", help="also measure dsh at this commit")
    args = parser.parse_args()
    runs = args.runs
    python = product_venv(args.venv)
    with StubServer() as server, tempfile.TemporaryDirectory() as tmp:
        baseline: tuple[str, Path] | None = None
        if args.baseline:
            commit, source = baseline_source(args.baseline, Path(tmp) / "baseline-source")
            venv = args.venv.with_name(f"{args.venv.name}-{commit}")
            baseline = commit, product_venv(venv, source)
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
            **dsh_candidates("dsh", dsh, env),
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
        if baseline is not None:
            commit, before = baseline
            candidates.update(dsh_candidates(f"dsh {commit}", str(before.parent / "dsh"), env))

        samples: dict[str, list[float]] = {name: [] for name in candidates}
        cpu: dict[str, list[float]] = {name: [] for name in candidates}
        for measure in candidates.values():
            measure()  # warm the page cache and .pyc files
        order = list(candidates.items())
        shuffler = random.Random(0)
        for _ in range(runs):
            shuffler.shuffle(order)  # no candidate always runs first, or right after another
            for name, measure in order:
                used = children_cpu()
                samples[name].append(measure())
                cpu[name].append(children_cpu() - used)

    median = {name: statistics.median(values) for name, values in samples.items()}
    median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    print(f"{runs} interleaved runs each, median wall time (CPU time of the whole process):")
    for name, value in median.items():
        print(f"  {name:44} {value * 1000:7.1f} ms  ({median_cpu[name] * 1000:6.1f} ms CPU)")
    dsh_time = median["dsh: pipe, one answer"]
    for bare in ("bare httpx script", "bare async httpx script"):
        print(f"dsh / {bare}: {dsh_time / median[bare]:.2f}x (goal <= 1.0x)")
    one_shot = median["dsh: one-shot answer"] / median["bare async httpx script"]
    print(f"dsh one-shot / bare async httpx script: {one_shot:.2f}x (goal <= 1.0x, SPEC 17)")
    if baseline is not None:
        for what in DSH_MEASURES:
            after, prior = f"dsh: {what}", f"dsh {baseline[0]}: {what}"
            ratio = median[after] / median[prior]
            cpu_ratio = median_cpu[after] / median_cpu[prior]
            print(
                f"dsh / dsh {baseline[0]}, {what}: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU "
                "(goal <= 1.0x)"
            )
    if "llm CLI" in median:
        print(f"llm / dsh: {median['llm CLI'] / dsh_time:.1f}x faster (goal >= 4x)")
    else:
        print("llm CLI: not installed (pip install llm to compare)")


if __name__ == "__main__":
    main()
