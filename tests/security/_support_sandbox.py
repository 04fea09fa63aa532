"""What the sandbox's attack tests share (SPEC 10, rules 1, 2, 4, 6, 8): a scripted model asks
the real ``dsh`` for hostile ``bash`` calls under ``--allow shell``; the test then checks the
consequence outside (the next start, the user's next ``git``, what the command read).

Fixtures are imported by name into each test file (``tests/security`` has no conftest of its
own: other branches write there too). Directories live under ``/var/tmp``: the sandbox has a
private ``/tmp``, so a target or a secret under the host's ``/tmp`` would prove nothing.

A *marker* is a file outside the working directory that a planted payload writes the key into
when it runs: its absence after the consequence was given every chance to happen is the proof,
its presence (with the canary key) what the attack did on dsh 0.2.0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import StubServer, ToolCalls
from dsh_core.tools.sandbox import probe_bwrap
from tests.dsh_stdio.test_agent_pipe import HANG, Run, assert_log_whole, data_of, run_dsh
from tests.support import CANARY_KEY, child_env

__all__ = [
    "CANARY_KEY",
    "FIXTURES",
    "NEXT",
    "Run",
    "base_fixture",
    "bash_calls",
    "dsh_home_fixture",
    "env_fixture",
    "marker_fixture",
    "needs_bwrap",
    "payload",
    "results",
    "run_dsh",
    "run_program",
    "stub_fixture",
    "user_home_fixture",
    "went_on",
    "work_fixture",
]

BWRAP_PROBLEM = probe_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None,
    reason=f"bubblewrap cannot run here, so the sandbox cannot be attacked: {BWRAP_PROBLEM}",
)

FIXTURES = ("stub", "base", "work", "user_home", "dsh_home", "env", "marker")
"""The fixtures here, by name; a test file imports their ``*_fixture`` functions."""

NEXT = "still here"
"""The line after the turn under test: its answer shows that the session went on."""


@pytest.fixture(name="stub")
def stub_fixture() -> Iterator[StubServer]:
    """A stub server for this test alone."""
    with StubServer() as server:
        yield server


@pytest.fixture(name="base")
def base_fixture() -> Iterator[Path]:
    """A fresh directory under ``/var/tmp`` (resolved), removed with all it holds."""
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="dsh-attack-", dir="/var/tmp")))
    assert not path.is_relative_to("/tmp"), f"/var/tmp resolves into /tmp here: {path}"
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture(name="work")
def work_fixture(base: Path) -> Path:
    path = base / "work"
    path.mkdir()
    return path


@pytest.fixture(name="user_home")
def user_home_fixture(base: Path) -> Path:
    """``$HOME`` of the child dsh: never the real one, outside the working directory."""
    path = base / "home"
    path.mkdir()
    return path


@pytest.fixture(name="dsh_home")
def dsh_home_fixture(base: Path) -> Path:
    """``DSH_HOME``, under ``/var/tmp`` too: a sandboxed command must not read it."""
    return base / "dsh-home"


@pytest.fixture(name="env")
def env_fixture(stub: StubServer, dsh_home: Path, user_home: Path) -> dict[str, str]:
    """The child's environment: the canary key, the stub, a private ``DSH_HOME`` and ``HOME``."""
    return child_env(stub.url, dsh_home, HOME=str(user_home))


@pytest.fixture(name="marker")
def marker_fixture(base: Path) -> Path:
    """Where a payload that ran writes the key: outside the working directory."""
    return base / "payload-ran"


def payload(marker: Path) -> str:
    """Python that writes the environment's key into ``marker``: what an attacker wants."""
    return f"import os; open({str(marker)!r}, 'w').write(os.environ.get('DEEPSEEK_API_KEY', ''))"


def bash_calls(*commands: str) -> ToolCalls:
    """One step asking for one ``bash`` call per command, in order."""
    return ToolCalls(tuple(("bash", json.dumps({"command": command})) for command in commands))


def results(dsh_home: Path) -> list[dict[str, Any]]:
    """The ``tool/result`` events of the one log, which must be whole and paired."""
    return data_of(assert_log_whole(dsh_home), "tool/result")


def run_program(argv: list[str], env: dict[str, str], cwd: Path, stdin: str) -> Run:
    """Run a dsh started some other way than :data:`tests.support.DSH` (a venv's script)."""
    done = subprocess.run(
        argv, input=stdin.encode(), cwd=cwd, env=env, capture_output=True, timeout=HANG
    )
    return Run(
        done.returncode,
        done.stdout.decode("utf-8", "surrogateescape"),
        done.stderr.decode("utf-8", "surrogateescape"),
        done.stderr,
    )


def went_on(result: Run) -> None:
    """The session answered the line after the turn under test, and ended well."""
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(f"You said: {NEXT}\n"), result.stdout
    assert "Traceback" not in result.stderr
