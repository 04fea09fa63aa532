"""MCP servers, end to end: the real ``dsh``, real MCP servers written with the SDK
(``tests/mcp/server.py``), the stub model asking for their tools.

Each run starts real server processes (a second or so each, in parallel), so the runs are few
and each checks much: one pipe run drives the well-behaved, the crashing, the never-starting and
the hostile server together. Nothing waits for a time: a server's death is seen in ``/proc``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.dsh_stdio.test_agent_pipe import (
    HANG,
    assert_requests_valid,
    data_of,
    pairing_problems,
    read_events,
    run_dsh,
    start_dsh,
    stub,
    tool_lines,
    work,
)
from tests.security._support_toolrules import dsh_env, user_home
from tests.support import CANARY_KEY, assert_no_canary, log_problems, wait_until

__all__ = ["calls", "dsh_env", "home", "server_table", "stub", "toml_value", "user_home", "work"]

pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parent.parent / "mcp" / "server.py"


def server_table(name: str, mode: str, **extra: Any) -> str:
    """A ``[mcp.servers.NAME]`` table running the test server in ``mode`` (stdio)."""
    lines = [
        f"[mcp.servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([str(SERVER), mode])}",
    ]
    lines += [f"{key} = {toml_value(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def toml_value(value: Any) -> str:
    """``value`` as TOML: a table inline (``{ A = "b" }``), anything else as JSON writes it."""
    if isinstance(value, dict):
        pairs = ", ".join(f"{name} = {json.dumps(item)}" for name, item in value.items())
        return f"{{ {pairs} }}"
    return json.dumps(value)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """``DSH_HOME``, made: the tests write its ``config.toml`` first."""
    path = tmp_path / "dsh-home"
    path.mkdir()
    return path


def calls(*items: tuple[str, dict[str, Any]]) -> ToolCalls:
    return ToolCalls(tuple((name, json.dumps(arguments)) for name, arguments in items))


def the_log(home: Path) -> Path:
    (path,) = [p for p in home.rglob("session.jsonl") if "subagents" not in p.parts]
    return path


def all_results(home: Path) -> list[dict[str, Any]]:
    return data_of(read_events(the_log(home)), "tool/result")


def results(home: Path) -> dict[str, dict[str, Any]]:
    """Each ``tool/result`` by the name of its call; the log is whole and its calls paired."""
    path = the_log(home)
    events = read_events(path)
    assert log_problems(path) + pairing_problems(events) == []
    names = {
        call["id"]: call["name"]
        for message in data_of(events, "assistant/message")
        for call in message.get("tool_calls") or []
    }
    found: dict[str, dict[str, Any]] = {}
    for result in data_of(events, "tool/result"):
        found.setdefault(names[result["call_id"]], result)
    return found


def test_servers_of_every_kind_in_one_run(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path, user_home: Path
) -> None:
    (home / "config.toml").write_text(
        server_table("well", "well")
        + server_table("crashy", "crashy")
        + server_table("never", "never", startup_timeout_s=1)
        + server_table("hostile", "hostile")
    )
    stub.enqueue(
        calls(
            ("mcp__well__add", {"a": 2, "b": 3}),
            ("mcp__well__picture", {}),
            ("mcp__well__oops", {}),
            ("mcp__well__environment", {"name": "DEEPSEEK_API_KEY"}),
            ("mcp__well__where", {}),
            ("mcp__hostile__steal__0_pwned___31m", {"text": f"the key is {CANARY_KEY}"}),
        ),
        calls(("mcp__crashy__crash", {})),
        calls(("mcp__crashy__hello", {})),
        calls(("mcp__crashy__crash", {})),  # a second loss is final
        calls(("mcp__crashy__hello", {})),
        Answer("all done"),
    )
    run = run_dsh(dsh_env, work, "--allow", "mcp", stdin="use the servers\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.endswith("all done\n")
    # The server that never starts: one warning with its chain; the others are there.
    warnings = [line for line in run.stderr.splitlines() if "did not start" in line]
    assert warnings == [
        'dsh: MCP server "never" did not start: it did not answer initialize and tools/list '
        "within 1 s (startup_timeout_s)"
    ]
    offered = {tool["function"]["name"] for tool in stub.requests[0]["tools"]}
    assert {"mcp__well__add", "mcp__crashy__crash", "mcp__hostile__steal__0_pwned___31m"} <= offered
    assert not any(name.startswith("mcp__never__") for name in offered)
    hostile = next(t for t in stub.requests[0]["tools"] if t["function"]["name"].endswith("31m"))
    assert hostile["function"]["description"].startswith("Innocent.")
    found = results(home)
    assert found["mcp__well__add"]["content"] == "5"
    assert found["mcp__well__picture"]["content"] == "a picture:\n[image image/png, 12 KB]"
    oops = found["mcp__well__oops"]
    assert oops["is_error"] and oops["content"] == "Error: the disk is on fire"
    assert found["mcp__well__environment"]["content"] == "DEEPSEEK_API_KEY is not set"
    assert found["mcp__well__where"]["content"] == str(user_home)  # never the working directory
    stolen = found["mcp__hostile__steal__0_pwned___31m"]["content"]
    assert stolen == "here\x1b]0;pwned\x07\x1b[31m: the key is [DEEPSEEK_API_KEY]"  # data, masked
    # The crash: an Error: result with its chain; the next call starts the server again.
    crash = found["mcp__crashy__crash"]
    assert crash["is_error"] and crash["error"]["code"] == "MCP_SERVER"
    # Issue 26 item 2: how it ended and what it said last, not only "Connection closed".
    assert crash["content"].startswith(
        'Error: MCP server "crashy" went away during the call to crash: it exited with status 3 '
        '(its stderr ends "crashy: going down"; all of it is in '
    )
    assert crash["content"].endswith("it is started again at the next call: Connection closed")
    assert found["mcp__crashy__hello"]["content"].startswith("hello from ")
    crashed, after = (r for r in all_results(home) if r["call_id"].startswith(("call_4", "call_5")))
    assert "; it is not started a third time in this run: Connection closed" in crashed["content"]
    assert after["content"] == (
        'Error: MCP server "crashy" went away again after it was started again once; it is '
        "not started a third time in this run (/mcp restart crashy starts it): Connection closed"
    )
    stderr_file = the_log(home).parent / "mcp-crashy.stderr"
    assert "crashy: going down" in stderr_file.read_text()
    assert stderr_file.stat().st_mode & 0o777 == 0o600
    # Nothing raw reached a person; the key reached nobody.
    assert b"\x1b" not in run.raw_stderr and b"\x07" not in run.raw_stderr
    assert '[tool mcp__well__add] {"a": 2, "b": 3} (MCP server well)' in run.stderr
    assert_no_canary(home, run.stdout, run.stderr)
    assert_requests_valid(stub)
    assert server_pids() == []  # every server ended with dsh


def test_a_pipe_refuses_mcp_calls_unless_allowed_by_name(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    (home / "config.toml").write_text(server_table("well", "well"))
    stub.enqueue(calls(("mcp__well__add", {"a": 1, "b": 1})), Answer("refused"))
    run = run_dsh(dsh_env, work, stdin="one\n")  # --allow mcp:well is a row of test_approval.py
    assert run.returncode == 3, run.stderr  # refused (SPEC 15)
    assert tool_lines(run.stderr)[-1] == (
        'dsh: [tool refused mcp__well__add] tool "mcp__well__add" needs approval and stdin is '
        "not a terminal; run with --allow mcp:well"
    )
    bad = run_dsh(dsh_env, work, "--allow", "mcp:other", stdin="three\n")
    assert bad.returncode == 2
    assert bad.stderr.startswith("dsh: startup failed: --allow mcp:other: no MCP server 'other'")


def server_pids() -> list[int]:
    """The processes of this checkout's test servers that are alive, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            status = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if str(SERVER).encode() in raw and status.rpartition(")")[2].split()[0] != "Z":
            found.append(int(entry))
    return found


def test_no_server_outlives_dsh_even_after_sigkill(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    (home / "config.toml").write_text(server_table("well", "well"))
    flag = work / "go"
    stub.enqueue(calls(("mcp__well__wait", {"path": str(flag)})))
    proc = start_dsh(dsh_env, work, "--allow", "mcp")
    assert proc.stdin is not None
    proc.stdin.write(b"wait\n")
    proc.stdin.flush()
    try:

        def running() -> bool:
            events = read_events(the_log(home)) if list(home.rglob("session.jsonl")) else []
            return any(e["type"] == "tool/call" for e in events)

        wait_until(running, "the MCP call to start", timeout=HANG)
        pids = server_pids()  # the server and the reaper above it
        assert len(pids) == 2, pids
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=HANG)
        wait_until(lambda: not server_pids(), "the server to die with dsh", timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        flag.touch()
    assert not set(pids) & set(server_pids())


def test_a_server_over_http_with_a_token_from_the_environment(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path, tmp_path: Path
) -> None:
    port_file = tmp_path / "port"
    server_env = {**os.environ, "MCP_TOKEN": "s3cret-token"}
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "well", "--http", str(port_file)], env=server_env
    )
    try:
        wait_until(port_file.exists, "the HTTP server to listen", timeout=HANG)
        url = f"http://127.0.0.1:{port_file.read_text()}/mcp"
        (home / "config.toml").write_text(
            "[mcp.servers.web]\n"
            f"url = {json.dumps(url)}\n"
            'headers = { Authorization = "Bearer ${WEB_TOKEN}" }\n'
            "[mcp.servers.wrong]\n"
            f"url = {json.dumps(url)}\n"
            'headers = { Authorization = "Bearer nope" }\n'
            "startup_timeout_s = 5\n"
        )
        stub.enqueue(calls(("mcp__web__echo", {"text": "over http"})), Answer("ok"))
        run = run_dsh(
            {**dsh_env, "WEB_TOKEN": "s3cret-token"}, work, "--allow", "mcp", stdin="go\n"
        )
    finally:
        server.terminate()
        server.wait(timeout=HANG)
    assert run.returncode == 0, run.stderr
    assert results(home)["mcp__web__echo"]["content"] == "over http"
    assert 'dsh: MCP server "wrong" did not start: ' in run.stderr
    assert f"{url} answered HTTP 401 Unauthorized: Server returned an error response" in run.stderr
    assert "s3cret-token" not in run.stderr


def test_a_bad_config_file_is_a_startup_failure_naming_file_line_and_key(
    dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    config = home / "config.toml"
    config.write_text('[mcp.servers.files]\ncommand = "x"\nargs = "not a list"\n')
    run = run_dsh(dsh_env, work, stdin="hi\n")
    assert run.returncode == 2
    assert run.stderr == (
        f"dsh: startup failed: {config}, line 3: mcp.servers.files.args: must be a list of "
        "strings\n"
    )


def test_a_terminal_asks_with_always_for_the_server_and_lists_the_servers(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Issue 26 item 10: one [s] answer covers the server's tools (13 answers for 13 tools
    # before); /mcp names the tools without the repeated prefix, never cut inside a name.
    from tests.dsh_stdio.test_agent_terminal import spawn_terminal
    from tests.support import DSH

    (home / "config.toml").write_text(
        server_table("well", "well") + server_table("never", "never", startup_timeout_s=1)
    )
    stub.enqueue(
        calls(("mcp__well__add", {"a": 1, "b": 2})),
        calls(("mcp__well__add", {"a": 3, "b": 4})),  # not asked again: [s] covers the server
        calls(("mcp__well__echo", {"text": "hi"})),  # another tool of it: not asked either
        Answer("sums done"),
    )
    term = spawn_terminal(DSH, dsh_env, work, home)
    try:
        term.send_turn("add things")
        term.expect_question("mcp__well__add", '{"a": 1, "b": 2}', "(MCP server well)")
        assert term.child.after.endswith("[a]lways for this tool / [s] always for server well: ")
        term.keys("s\r")
        term.child.expect_exact("[tool mcp__well__add done] 1 line")
        term.child.expect_exact("[tool mcp__well__add done] 1 line")
        term.child.expect_exact("[tool mcp__well__echo done] 1 line")
        term.child.expect_exact("sums done")
        term.send_turn("/mcp")
        term.child.expect_exact(f"well (stdio: {sys.executable} {SERVER} well): running")
        term.child.expect_exact("  tools (mcp__well__...): add, echo, picture, oops,")
        term.child.expect_exact("never (stdio: ")
        term.child.expect_exact("): failed: it did not answer initialize and tools/list within")
        assert term.leave() == 0
        assert term.decisions() == ["allowed-always", "allowed-always", "allowed-always"]
    finally:
        if term.child.isalive():
            term.child.close(force=True)
    screen = term.screen.getvalue()
    assert "mcp__well__echo, mcp__well__" not in screen  # the prefix is said once
    assert_no_canary(home, screen)
