"""dsh against MCP servers nobody here wrote (issue 26): PyPI's and npm's, pinned (``real.py``).

The real ``dsh`` process, the stub model asking for the servers' tools. A run starts every
server it names at once (node and Python servers: a second or two), so each run checks much.
Offline: the fetch server reads a page served on loopback; nothing else leaves the machine.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_pipe import HANG, data_of, read_events, run_dsh
from tests.dsh_stdio.test_mcp import calls, results, the_log, toml_value
from tests.mcp.real import npm_server, python_server, real_server_pids
from tests.support import wait_until

from ..dsh_stdio.test_mcp import dsh_env, home, stub, user_home, work

__all__ = ["dsh_env", "home", "stub", "user_home", "work"]

pytestmark = pytest.mark.slow

PAGE = (
    b"<html><head><title>Offline</title></head><body><h1>Offline page</h1>"
    b"<p>Served on loopback for the fetch server.</p></body></html>"
)


@pytest.fixture
def page() -> Iterator[str]:
    """A page on a loopback port of its own: what the fetch server fetches."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page.html"
    finally:
        server.shutdown()
        server.server_close()


def table(name: str, command: str, args: list[str], **extra: Any) -> str:
    lines = [f"[mcp.servers.{name}]", f"command = {json.dumps(command)}"]
    lines.append(f"args = {json.dumps(args)}")
    lines += [f"{key} = {toml_value(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def git_repository(path: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for command in (
        ["git", "init", "-q", "-b", "main", str(path)],
        ["git", "-C", str(path), "add", "demo.txt"],
        [
            "git",
            "-C",
            str(path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    ):
        subprocess.run(command, check=True, env=env)


def test_pypi_and_npm_servers_over_stdio_in_one_run(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path, page: str
) -> None:
    everything = npm_server("mcp-server-everything")
    filesystem = npm_server("mcp-server-filesystem")
    git_repository(work)
    (home / "config.toml").write_text(
        table(
            "time",
            python_server("mcp-server-time"),
            ["--local-timezone", "UTC"],
            tools=["get_current_time"],  # convert_time is not offered
        )
        + table("git", python_server("mcp-server-git"), ["--repository", str(work)])
        + table(
            "fetch",
            python_server("mcp-server-fetch"),
            ["--ignore-robots-txt", "--allow-private-ips"],  # offline: a loopback page only
            env={"NO_PROXY": "127.0.0.1,localhost"},
        )
        + table("files", filesystem, [str(work)])
        + table("every", everything, ["stdio"])
    )
    stub.enqueue(
        calls(
            ("mcp__time__get_current_time", {"timezone": "UTC"}),
            ("mcp__git__git_status", {"repo_path": str(work)}),
            ("mcp__fetch__fetch", {"url": page}),
            ("mcp__files__list_directory", {"path": str(work)}),
            ("mcp__every__get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
            ("mcp__every__echo", {"message": "over stdio"}),
        ),
        Answer("all done"),
    )
    run = run_dsh(dsh_env, work, "--allow", "mcp", stdin="use them\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.endswith("all done\n")
    assert "Traceback" not in run.stderr
    # Item 4: a tool that needs MCP tasks is left out, with one warning.
    assert run.stderr.count("simulate-research-query") == 1
    assert (
        "dsh: MCP server \"every\": 'simulate-research-query' left out: they can only be run "
        'as MCP tasks (taskSupport "required"), which dsh does not do'
    ) in run.stderr
    offered = {tool["function"]["name"] for tool in stub.requests[0]["tools"]}
    assert "mcp__time__get_current_time" in offered and "mcp__time__convert_time" not in offered
    assert {"mcp__git__git_status", "mcp__fetch__fetch", "mcp__files__read_text_file"} <= offered
    assert "mcp__every__simulate-research-query" not in offered
    found = results(home)
    assert all(not result["is_error"] for result in found.values()), found
    assert '"timezone": "UTC"' in found["mcp__time__get_current_time"]["content"]
    assert "On branch main" in found["mcp__git__git_status"]["content"]
    assert "Offline page" in found["mcp__fetch__fetch"]["content"]
    assert "[FILE] demo.txt" in found["mcp__files__list_directory"]["content"]
    # Item 3: the text of an embedded resource reaches the model, not only its size.
    resource = found["mcp__every__get-resource-reference"]["content"]
    assert "[resource demo://resource/dynamic/text/1, text/plain, " in resource
    assert "Resource 1: This is a plaintext resource" in resource
    assert found["mcp__every__echo"]["content"] == "Echo: over stdio"
    # A server's instructions join the system prompt, once, as the server's own words.
    (prompt,) = data_of(read_events(the_log(home)), "system/prompt")
    assert 'MCP server "every" (its tools: mcp__every__*) says:' in prompt["text"]
    assert "Everything Server" in prompt["text"]
    assert stub.requests[0]["messages"][0]["content"] == prompt["text"]
    wait_until(
        lambda: not real_server_pids(everything, filesystem, "mcp-server-"),
        "every server to end with dsh",
        timeout=HANG,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_everything_over_http(everything: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``mcp-server-everything streamableHttp`` on ``port``, once it says it listens."""
    with open(log, "wb") as errors:
        server = subprocess.Popen(
            [everything, "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
        )
    wait_until(
        lambda: b"listening on port" in log.read_bytes() or server.poll() is not None,
        "the everything server to listen",
        timeout=HANG,
    )
    assert server.poll() is None, log.read_text()
    return server


def test_everything_over_streamable_http_and_urls_that_cannot_be_reached(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    # Issue 26 item 1 and issue 31 class 6: a closed port and a host that does not exist were a
    # 67-line CancelledError traceback at start. Now: one warning each, and the run goes on.
    everything = npm_server("mcp-server-everything")
    port = free_port()
    server = start_everything_over_http(everything, port, home.parent / "everything.log")
    try:
        (home / "config.toml").write_text(
            f'[mcp.servers.web]\nurl = "http://127.0.0.1:{port}/mcp"\n'
            f'[mcp.servers.closed]\nurl = "http://127.0.0.1:{free_port()}/mcp"\n'
            '[mcp.servers.nohost]\nurl = "http://no-such-host.invalid/mcp"\n'
        )
        stub.enqueue(
            calls(("mcp__web__echo", {"message": "over http"})),
            Answer("one"),
            calls(("mcp__web__get-sum", {"a": 2, "b": 3})),
            Answer("two"),
        )
        run = run_dsh(dsh_env, work, "--allow", "mcp", stdin="first\nsecond\n")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=HANG)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "CancelledError" not in run.stderr
    warnings = [line for line in run.stderr.splitlines() if "did not start" in line]
    assert len(warnings) == 2, run.stderr
    closed, nohost = sorted(warnings)
    assert closed.startswith('dsh: MCP server "closed" did not start: http://127.0.0.1:')
    assert "/mcp could not be reached: All connection attempts failed" in closed
    assert "[Errno 111]" in closed
    assert nohost.startswith(
        'dsh: MCP server "nohost" did not start: http://no-such-host.invalid/mcp could not be '
        "reached: "
    )
    found = results(home)
    assert found["mcp__web__echo"]["content"] == "Echo: over http"
    assert "5" in found["mcp__web__get-sum"]["content"]
