"""SPEC 16's tools on a pipe, end to end: the real ``dsh`` process against the stub server.

Each tool once as a pipe run meets it: the checklist as ``dsh: todo`` lines on stderr (stdout
keeps the answers only) and in ``--show``; a question nobody can answer; ``web_fetch`` refused
without ``--allow web`` and read with it; ``web_search`` through the stub's Messages endpoint,
offered only where one is configured; background jobs started, read, told of when they end,
capped at 16 running, and ended with dsh, a SIGKILL of dsh included, sandboxed or not.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import Answer, Held, StubServer, ToolCalls
from tests.pages import PageServer
from tests.support import (
    DSH,
    HANG_GUARD,
    Run,
    assert_no_canary,
    read_events,
    single_log,
    wait_until,
)

pytestmark = pytest.mark.slow


def run(
    env: dict[str, str], cwd: Path, *args: str, stdin: str = "go\n", home: Path | None = None
) -> Run:
    done = subprocess.run(
        [*DSH, *args],
        input=stdin.encode(),
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=HANG_GUARD * 2,
        check=False,
    )
    where = Path(env["DSH_HOME"]) if home is None else home
    assert b"Traceback" not in done.stderr, done.stderr
    assert_no_canary(where, done.stdout, done.stderr)
    return Run(done.returncode, done.stdout, done.stderr, where, 0.0)


def results(run: Run) -> list[dict[str, Any]]:
    return run.of_type("tool/result")


def calls(*pairs: tuple[str, dict[str, Any]]) -> ToolCalls:
    return ToolCalls(tuple((name, json.dumps(arguments)) for name, arguments in pairs))


# -- todo_write -----------------------------------------------------------------------------


TODOS = {
    "todos": [
        {"content": "Read the code", "status": "completed"},
        {"content": "Write the test", "status": "in_progress"},
        {"content": "Fix \x1b[31mit", "status": "pending"},
    ]
}


def test_the_checklist_goes_to_stderr_and_the_log_and_show_renders_it(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    stub.enqueue(calls(("todo_write", TODOS)), Answer("planned"))
    done = run(dsh_env, workdir)
    assert done.returncode == 0
    assert done.stdout == "planned\n"
    lines = [line for line in done.stderr.splitlines() if line.startswith("dsh: todo ")]
    assert lines == [
        "dsh: todo [x] Read the code",
        "dsh: todo [>] Write the test",
        "dsh: todo [ ] Fix ^[[31mit",  # model text: made inert
    ]
    (written,) = done.of_type("todo/write")
    assert [todo["status"] for todo in written["todos"]] == ["completed", "in_progress", "pending"]
    shown = run(dsh_env, workdir, "--show", "last", stdin="")
    assert "[tool todo_write] " in shown.stdout
    assert "  [x] Read the code\n  [>] Write the test\n  [ ] Fix ^[[31mit\n" in shown.stdout


def test_a_bad_list_is_an_error_result(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    bad = {"todos": [{"content": "x", "status": "done"}]}
    stub.enqueue(calls(("todo_write", bad)), Answer("ok"))
    (result,) = results(run(dsh_env, workdir))
    assert result["content"] == (
        "Error: invalid arguments: todo 1 has status 'done'; use pending, in_progress, completed"
    )


# -- ask_user_question ----------------------------------------------------------------------


def test_a_question_on_a_pipe_says_nobody_can_be_asked(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    question = {"questions": [{"id": "db", "question": "Which one?", "options": [{"label": "A"}]}]}
    stub.enqueue(calls(("ask_user_question", question)), Answer("I assumed A"))
    done = run(dsh_env, workdir)
    assert done.returncode == 0  # the model decides: no refusal, no failure of the run
    (result,) = results(done)
    assert result["content"] == (
        "Error: nobody can be asked: stdin is not a terminal. Decide yourself, go on, and say in "
        "your answer what you assumed"
    )


def test_a_subagent_cannot_ask_either(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    question = {"questions": [{"id": "q", "question": "Which?"}]}
    stub.enqueue(
        calls(("subagent", {"description": "look", "prompt": "look around"})),
        calls(("ask_user_question", question)),  # the child's first step
        Answer("child: assumed"),
        Answer("parent: done"),
    )
    done = run(dsh_env, workdir)
    child_log = next(p for p in done.home.rglob("session.jsonl") if "subagents" in p.parts)
    child = [e["data"] for e in read_events(child_log) if e["type"] == "tool/result"]
    assert child[0]["content"].startswith(
        "Error: nobody can be asked: a subagent cannot ask anyone."
    )


# -- web_fetch ------------------------------------------------------------------------------


def test_web_fetch_needs_allow_web_on_a_pipe(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    stub.enqueue(calls(("web_fetch", {"url": "https://example.com/"})), Answer("ok"))
    done = run(dsh_env, workdir)
    assert done.returncode == 3 or done.returncode == 0  # exit 3 where the headless work has it
    (result,) = results(done)
    assert "needs approval and stdin is not a terminal; run with --allow web" in result["content"]


def test_web_fetch_reads_a_page_as_markdown(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path, home: Path
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[web]\nallow_private_addresses = true\n")
    with PageServer() as pages:
        stub.enqueue(calls(("web_fetch", {"url": pages.url("/page")})), Answer("read"))
        done = run(dsh_env, workdir, "--allow", "web")
    (result,) = results(done)
    assert not result["is_error"], result
    assert f"[web_fetch: {pages.url('/page')}, HTTP 200 OK, text/html" in result["content"]
    assert "| Name | Size |" in result["content"]
    assert f"[the text]({pages.url('/text')})" in result["content"]  # made absolute
    assert f"dsh: [tool web_fetch] {pages.url('/page')} (fetched by dsh" in done.stderr


# -- web_search -----------------------------------------------------------------------------


def test_web_search_lists_what_deepseek_found(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    env = {**dsh_env, "DEEPSEEK_SEARCH_BASE_URL": f"{stub.url}/anthropic/v1"}
    before = len(stub.searches)
    stub.enqueue(
        calls(("web_search", {"queries": ["httpx release", "noblocks here"]})), Answer("k")
    )
    done = run(env, workdir)
    offered = [tool["function"]["name"] for tool in stub.requests[-1]["tools"]]
    assert "web_search" in offered
    (result,) = results(done)
    content = result["content"]
    assert not result["is_error"]
    assert 'Search "httpx release":\n1. Result 1 for httpx release (2026-11-01)\n' in content
    assert "   https://example.com/httpx-release/1\n   What page 1 says about httpx release." in (
        content
    )
    assert 'Search "noblocks here": failed: DeepSeek returned no web_search_tool_result' in content
    sent = stub.searches[before:]
    assert {body["tools"][0]["type"] for body in sent} == {"web_search_20250305"}
    assert sent[0]["messages"][0]["content"][0]["text"].startswith(
        "Perform a web search for the query: "
    )


def test_a_search_without_result_blocks_is_an_error(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    env = {**dsh_env, "DEEPSEEK_SEARCH_BASE_URL": f"{stub.url}/anthropic/v1"}
    stub.enqueue(calls(("web_search", {"queries": ["noblocks"]})), Answer("k"))
    (result,) = results(run(env, workdir))
    assert result["is_error"]
    assert result["content"] == (
        'Error: web_search "noblocks" failed: DeepSeek returned no web_search_tool_result '
        "blocks; the request may not have triggered native web search"
    )


def test_web_search_is_not_offered_without_an_endpoint(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    stub.enqueue(Answer("hello"))
    run(dsh_env, workdir)
    offered = [tool["function"]["name"] for tool in stub.requests[-1]["tools"]]
    assert "web_search" not in offered and "web_fetch" in offered


# -- background jobs ------------------------------------------------------------------------


def _alive(marker: str) -> list[int]:
    """The live processes running ``sleep <marker>``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()] and state != "Z":
            found.append(int(entry))
    return found


def _marker() -> str:
    return f"1000.{secrets.randbelow(10**9):09d}"


def _children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


def test_the_model_is_told_when_a_job_ends(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    stub.enqueue(
        calls(("bash", {"command": "echo hi", "run_in_background": True})),
        Answer("started"),
        calls(("glob", {"pattern": "*.txt"})),
        Answer("noted"),
    )
    with subprocess.Popen(
        [*DSH, "--allow", "shell"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
        env=dsh_env,
    ) as dsh:
        assert dsh.stdin is not None and dsh.stdout is not None
        dsh.stdin.write(b"start it\n")
        dsh.stdin.flush()
        assert dsh.stdout.readline() == b"started\n"
        wait_until(lambda: not _children(dsh.pid), "the job to end and be reaped")
        dsh.stdin.write(b"go on\n")
        dsh.stdin.close()
        assert dsh.stdout.read() == b"noted\n"
        assert dsh.wait(timeout=HANG_GUARD) == 0
    (log,) = Path(dsh_env["DSH_HOME"]).rglob("session.jsonl")
    (ended,) = [e["data"] for e in read_events(log) if e["type"] == "job/end"]
    assert ended["turn"] == 2 and ended["status"] == "exited" and ended["exit_code"] == 0
    assert ended["notice"].startswith("[dsh: background job bash-1 ($ echo hi) exited 0 after ")
    told = [
        m["content"]
        for m in stub.requests[-1]["messages"]
        if m["role"] == "user" and "background job bash-1" in m["content"]
    ]
    assert told and ended["notice"] in told[0]


def test_100_jobs_unknown_ids_and_nothing_left(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    marker = _marker()
    many = [("bash", {"command": f"sleep {marker}", "run_in_background": True})] * 100
    stub.enqueue(
        calls(*many),
        calls(("job_output", {"job_id": "bash-999"}), ("job_kill", {"job_id": "nope"})),
        calls(("job_kill", {"job_id": "bash-1", "reason": "enough"})),
        calls(("job_list", {})),
        Answer("done"),
    )
    done = run(dsh_env, workdir, "--allow", "shell")
    assert done.returncode == 0
    outcome = results(done)
    started = [r for r in outcome[:100] if r["content"].startswith("Started background job")]
    refused = [r for r in outcome[:100] if r["is_error"]]
    assert len(started) == 16 and len(refused) == 84
    assert refused[0]["content"].startswith("Error: 16 background jobs are running, the most")
    assert outcome[100]["content"].startswith("Error: no background job 'bash-999' in this session")
    assert outcome[101]["is_error"]
    assert "[status: killed (job_kill: enough): sent SIGINT" in outcome[102]["content"]
    assert "bash-1  killed" in outcome[103]["content"]
    wait_until(lambda: _alive(marker) == [], "the other 15 to end with dsh")
    assert len(done.of_type("job/start")) == 16


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_sigkill_of_dsh_ends_its_jobs(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path, sandbox: str
) -> None:
    marker = _marker()
    gate = threading.Event()
    escape = f"setsid sleep {marker} & sleep {marker}"  # one leaves the group, one stays
    stub.enqueue(
        calls(("bash", {"command": escape, "run_in_background": True})),
        Held(gate, Answer("never seen")),
    )
    dsh = subprocess.Popen(
        [*DSH, "--allow", "shell", "--sandbox", sandbox],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
        env=dsh_env,
    )
    with dsh:
        assert dsh.stdin is not None
        dsh.stdin.write(b"start a server\n")
        dsh.stdin.flush()
        wait_until(lambda: len(_alive(marker)) == 2, "both sleeps to run")
        dsh.kill()
        dsh.wait(timeout=HANG_GUARD)
        try:
            wait_until(lambda: _alive(marker) == [], "the job to die with dsh")
        finally:
            gate.set()
            for pid in _alive(marker):
                os.kill(pid, signal.SIGKILL)


def test_a_resumed_session_hears_its_jobs_ended_with_the_dsh_that_ran_them(
    stub: StubServer, dsh_env: dict[str, str], workdir: Path
) -> None:
    marker = _marker()
    stub.enqueue(
        calls(("bash", {"command": f"sleep {marker}", "run_in_background": True})),
        Answer("started"),
    )
    first = run(dsh_env, workdir, "--allow", "shell")
    assert first.returncode == 0
    wait_until(lambda: _alive(marker) == [], "the job to end with dsh")
    stub.enqueue(Answer("ok"))
    run(dsh_env, workdir, "-c", stdin="and now?\n")
    log = single_log(Path(dsh_env["DSH_HOME"]))
    (ended,) = [e["data"] for e in read_events(log) if e["type"] == "job/end"]
    assert ended["status"] == "lost" and ended["turn"] == 2
    assert "ended with the dsh that ran it" in ended["notice"]
