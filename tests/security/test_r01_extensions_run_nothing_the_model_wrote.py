"""SPEC 10.1 for extensions (SPEC 13): nothing the model can write starts a process.

MCP servers come from ``$DSH_HOME/config.toml`` alone; each attack below plants, where a
prompt-injected model with ``--allow write`` could, something that would run with the user's
rights (and, unscrubbed, the key) if dsh took it. Each checks for a marker the planted code
would write. The real ``dsh`` runs on a pipe against the stub.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_pipe import run_dsh, stub, work
from tests.support import child_env

__all__ = ["stub", "work"]

pytestmark = pytest.mark.slow


def planted_program(path: Path, marker: Path) -> None:
    """An executable that leaves ``marker`` (and the environment it got) if it ever runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nenv > {marker}\n")
    path.chmod(0o755)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "dsh-home"
    path.mkdir()
    return path


def test_a_config_file_planted_in_the_project_starts_no_server(
    stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    planted_program(work / "tools" / "server", marker)
    table = f'[mcp.servers.x]\ncommand = "{work / "tools" / "server"}"\n'
    for place in (
        work / ".dsh" / "config.toml",
        work / "config.toml",
        work / ".agents" / "config.toml",
    ):
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(table)
    stub.enqueue(Answer("hello"))
    run = run_dsh(child_env(stub.url, home), work, "--allow", "mcp", stdin="hi\n")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert "MCP" not in run.stderr
    assert not any(t["function"]["name"].startswith("mcp__") for t in stub.requests[0]["tools"])


def test_a_server_command_planted_in_a_path_directory_under_the_project_is_not_run(
    stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    planted_program(work / "node_modules" / ".bin" / "mcp-notes", marker)
    (home / "config.toml").write_text('[mcp.servers.notes]\ncommand = "mcp-notes"\n')
    path = f"{work / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    stub.enqueue(Answer("hello"))
    run = run_dsh(child_env(stub.url, home, PATH=path), work, stdin="hi\n")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert (
        "dsh: MCP server \"notes\" did not start: command 'mcp-notes' is not in PATH "
        "(directories under the working directory are not searched)"
    ) in run.stderr


def test_a_module_planted_in_the_project_is_not_imported_by_a_python_server(
    stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    (work / "notes_server.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    # A user's server run as `python -m notes_server`: with the working directory as its own,
    # Python would import the planted module from it.
    (home / "config.toml").write_text(
        "[mcp.servers.notes]\n"
        f"command = {json.dumps(sys.executable)}\n"
        'args = ["-m", "notes_server"]\n'
        "startup_timeout_s = 5\n"
    )
    stub.enqueue(Answer("hello"))
    run = run_dsh(child_env(stub.url, home), work, stdin="hi\n")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert 'dsh: MCP server "notes" did not start: ' in run.stderr
