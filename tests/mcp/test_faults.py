"""What real servers do that the project's own servers stand in for (issue 26): slow starts,
deaths, hangs, stray lines, progress, Ctrl-C. The real ``dsh`` process on a pty or a pipe; the
servers are ``server.py`` (the SDK's) and ``raw_server.py`` (by hand). Nothing waits for a
time: a start is held back by a file the test creates, a death is seen in ``/proc``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_pipe import HANG, run_dsh
from tests.dsh_stdio.test_agent_terminal import PROMPT, spawn_terminal
from tests.dsh_stdio.test_mcp import calls, results, server_pids, server_table, toml_value
from tests.support import DSH, assert_no_canary, wait_until

from ..dsh_stdio.test_mcp import dsh_env, home, stub, user_home, work

__all__ = ["dsh_env", "home", "stub", "user_home", "work"]

pytestmark = pytest.mark.slow

RAW = Path(__file__).resolve().parent / "raw_server.py"


def raw_table(name: str, mode: str, **extra: object) -> str:
    lines = [
        f"[mcp.servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([str(RAW), mode])}",
    ]
    lines += [f"{key} = {toml_value(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def test_the_prompt_comes_at_once_and_the_first_turn_waits_naming_the_server(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Item 8: the REPL showed nothing until every server was up (6 s of blank screen).
    gate = work.parent / "gate"
    (home / "config.toml").write_text(
        server_table("slow", "well", env={"DSH_TEST_GATE": str(gate)})
    )
    stub.enqueue(calls(("mcp__slow__add", {"a": 1, "b": 2})), Answer("three"))
    term = spawn_terminal([*DSH, "--allow", "mcp"], dsh_env, work, home)
    try:
        term.child.expect_exact(PROMPT)  # the server cannot have started: its gate is shut
        term.child.sendline("add")
        term.child.expect_exact("… waiting for MCP servers to start: slow")
        gate.touch()
        term.child.expect_exact("[tool mcp__slow__add done] 1 line")
        term.child.expect_exact("three")
        assert term.leave() == 0
    finally:
        gate.touch()
        if term.child.isalive():
            term.child.close(force=True)
    offered = {tool["function"]["name"] for tool in stub.requests[0]["tools"]}
    assert "mcp__slow__add" in offered  # the first request had the server's tools


def the_server(pids: list[int]) -> int:
    """Of a server's processes (its reaper and itself), the server: the reaper's child."""
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        if int(stat[1]) in pids:
            return pid
    raise AssertionError(f"no server among {pids}")


def test_mcp_says_lost_when_a_server_dies_and_restart_starts_it_again(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Item 2: /mcp said "running" for a killed server until the next call; now "lost", how it
    # ended and its stderr; /mcp restart NAME brings it back.
    (home / "config.toml").write_text(server_table("well", "well"))
    stub.enqueue(Answer("up"), calls(("mcp__well__add", {"a": 2, "b": 2})), Answer("four"))
    term = spawn_terminal([*DSH, "--allow", "mcp"], dsh_env, work, home)
    try:
        term.send_turn("are you there")  # the first request waits for the server
        term.child.expect_exact("up")
        term.send_turn("/mcp")
        term.child.expect_exact("well (stdio: ")
        term.child.expect_exact("): running")
        wait_until(lambda: len(server_pids()) == 2, "the server and its reaper", timeout=HANG)
        os.kill(the_server(server_pids()), signal.SIGKILL)
        wait_until(lambda: not server_pids(), "the server's tree to end", timeout=HANG)
        term.send_turn("/mcp")
        term.child.expect_exact("): lost: it was killed by signal 9 (SIGKILL) (its stderr")
        term.send_turn("/mcp restart well")
        term.child.expect_exact("restarting MCP server well ...")
        term.child.expect_exact("well: running, ")
        term.send_turn("add")
        term.child.expect_exact("[tool mcp__well__add done] 1 line")
        term.child.expect_exact("four")
        assert term.leave() == 0
    finally:
        if term.child.isalive():
            term.child.close(force=True)
    assert results(home)["mcp__well__add"]["content"] == "4"


def test_hangs_deep_answers_and_stray_lines_on_a_pipe(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Item 9 and issue 31 class 6: a call that is never answered held a pipe forever; an answer
    # nested 300 levels deep was dropped by the SDK, its call left waiting. Item 5: a stray
    # line on a server's stdout was the SDK's pydantic traceback on dsh's stderr.
    (home / "config.toml").write_text(
        raw_table("silent", "silent", tool_timeout_s=1)
        + raw_table("deep", "deep")
        + raw_table("noise", "noise")
    )
    stub.enqueue(
        calls(
            ("mcp__silent__hang", {}),
            ("mcp__deep__deep", {}),
            ("mcp__noise__hello", {}),
            ("mcp__silent__hello", {}),
        ),
        Answer("survived"),
    )
    run = run_dsh(dsh_env, work, "--allow", "mcp", stdin="go\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.endswith("survived\n")
    found = results(home)
    hang = found["mcp__silent__hang"]
    assert hang["is_error"] and hang["content"] == (
        "Error: no answer within 1 s (tool_timeout_s); the call was cancelled"
    )
    deep = found["mcp__deep__deep"]
    assert deep["is_error"]
    assert deep["content"].startswith(
        'Error: MCP server "deep" answered the call to deep with an error: its answer could not '
        "be read: 1 validation error for "
    )
    assert found["mcp__noise__hello"]["content"] == "hello from noise"
    assert found["mcp__silent__hello"]["content"] == "hello from silent"  # the server goes on
    stray = [line for line in run.stderr.splitlines() if "not a JSON-RPC message" in line]
    assert len(stray) == 4, run.stderr  # at start, and before each of its three answers
    assert stray[0] == (
        'dsh: MCP server "noise" wrote a line on stdout that is not a JSON-RPC message (1 '
        "validation error for union[JSONRPCRequest,JSONRPCNotification,JSONRPCResponse,"
        "JSONRPCError]); servers log on stderr: debug: starting up ^[]52;c;cHduZWQ=^G^[[2J"
    )
    assert "Traceback" not in run.stderr and "pydantic" not in run.stderr
    assert b"\x1b" not in run.raw_stderr and b"\x07" not in run.raw_stderr


def test_progress_on_the_live_line_and_a_cancelled_call_keeps_its_line(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Item 7: Ctrl-C during an MCP call left no tool line (bash shows one); progress
    # notifications were not shown at all.
    (home / "config.toml").write_text(server_table("well", "well"))
    never = work.parent / "never"
    stub.enqueue(calls(("mcp__well__steps", {"path": str(never)})))
    term = spawn_terminal([*DSH, "--allow", "mcp"], dsh_env, work, home)
    try:
        term.send_turn("count")
        term.child.expect_exact("[tool mcp__well__steps] ")
        term.child.expect_exact(" running 0 s: 1/3: indexing (Ctrl-C to stop)")
        term.child.sendintr()
        term.child.expect_exact(
            "[tool failed mcp__well__steps] the call was cancelled (the server was told)"
        )
        term.child.expect_exact("[turn aborted] user")
        assert term.leave() == 0
    finally:
        never.touch()
        if term.child.isalive():
            term.child.close(force=True)
    assert term.turn_ends() == [{"kind": "aborted", "reason": "user"}]
    assert_no_canary(home, term.screen.getvalue())


def test_mcp_and_session_mask_a_url_that_carries_the_key(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Issue 31 class 4 (SPEC 10.16): /mcp showed ?key=${DEEPSEEK_API_KEY} expanded.
    (home / "config.toml").write_text(
        '[mcp.servers.keyed]\nurl = "http://127.0.0.1:9/mcp?key=${DEEPSEEK_API_KEY}"\n'
    )
    term = spawn_terminal(DSH, dsh_env, work, home)
    try:
        term.send_turn("/mcp")
        term.child.expect_exact("keyed (http: http://127.0.0.1:9/mcp?key=[DEEPSEEK_API_KEY]): ")
        term.send_turn("/session")
        term.child.expect_exact("base URL")
        assert term.leave() == 0
    finally:
        if term.child.isalive():
            term.child.close(force=True)
    assert_no_canary(home, term.screen.getvalue())
