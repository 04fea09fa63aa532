"""SPEC 10.15 (issue 31 class 5): every byte a library logs is masked and neutralised.

The attack: a URL server names an SSE event with escape sequences (clipboard OSC 52, the window
title, clear screen). The MCP SDK logs ``Unknown SSE event: <name>``; with no handler on its
logger, Python's last-resort handler wrote the name raw to dsh's stderr, the terminal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_pipe import HANG, run_dsh
from tests.dsh_stdio.test_mcp import calls, results
from tests.support import wait_until

from ..dsh_stdio.test_mcp import dsh_env, home, stub, user_home, work

__all__ = ["dsh_env", "home", "stub", "user_home", "work"]

pytestmark = pytest.mark.slow

RAW = Path(__file__).resolve().parents[1] / "mcp" / "raw_server.py"


def test_an_sse_event_name_with_escapes_reaches_stderr_neutralised(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path, tmp_path: Path
) -> None:
    port_file = tmp_path / "port"
    server = subprocess.Popen([sys.executable, str(RAW), "noise", "--sse", str(port_file)])
    try:
        wait_until(port_file.exists, "the SSE server to listen", timeout=HANG)
        url = f"http://127.0.0.1:{port_file.read_text()}/mcp"
        (home / "config.toml").write_text(f'[mcp.servers.sse]\nurl = "{url}"\n')
        stub.enqueue(calls(("mcp__sse__hello", {})), Answer("done"))
        run = run_dsh(dsh_env, work, "--allow", "mcp", stdin="go\n")
    finally:
        server.terminate()
        server.wait(timeout=HANG)
    assert run.returncode == 0, run.stderr
    assert results(home)["mcp__sse__hello"]["content"] == "hello from noise"
    assert b"\x1b" not in run.raw_stderr and b"\x07" not in run.raw_stderr
    assert (
        "dsh: mcp.client.streamable_http: Unknown SSE event: "
        "evil^[]52;c;cHduZWQ=^G^[]0;pwned^G^[[2J" in run.stderr.splitlines()
    )
