"""What the sandbox's attack tests share (SPEC 10, rules 1, 2, 4, 6, 8): a scripted model asks
``dsh`` for hostile ``bash`` calls under ``--allow shell``; the test then checks the
consequence outside (the next start, the user's next ``git``, what the command read). dsh runs
in-process (``tests/harness.py``): the commands it starts under bubblewrap are real processes;
a dsh started another way (a venv's script, ``python -m``) runs as a process of its own.

The one fixture, ``scene`` (:class:`Scene`), is imported into each test file as
``scene_fixture`` (``tests/security`` has no conftest of its own: other branches write there).
Directories live under ``/var/tmp``: the sandbox has a private ``/tmp``, so a target or a secret
under the host's ``/tmp`` would prove nothing.

A *marker* is a file outside the working directory that a planted payload writes the key into
when it runs: its absence after the consequence was given every chance to happen is the proof,
its presence (with the canary key) what the attack did on dsh 0.2.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import StubServer, ToolCalls
from dsh_core.trust.sandbox import probe_bwrap
from tests import support
from tests.dsh_stdio.test_agent_pipe import HANG, Run, assert_log_whole, data_of
from tests.harness import run_in_process
from tests.security._support_fixfiles import remove_tree
from tests.support import CANARY_KEY, child_env

__all__ = [
    "CANARY_KEY",
    "NEXT",
    "Run",
    "Scene",
    "bash_calls",
    "needs_bwrap",
    "payload",
    "run_program",
    "scene_fixture",
    "went_on",
]

BWRAP_PROBLEM = probe_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None,
    reason=f"bubblewrap cannot run here, so the sandbox cannot be attacked: {BWRAP_PROBLEM}",
)

NEXT = "still here"
"""The line after the turn under test: its answer shows that the session went on."""


@dataclass
class Scene:
    """One attack's world: the stub the scripted model speaks from, and where dsh runs."""

    stub: StubServer
    """This test's own stub server (its queue, its call ids)."""
    base: Path
    """A fresh directory under ``/var/tmp`` holding the rest; removed afterwards."""
    work: Path
    """The working directory."""
    home: Path
    """``$HOME`` of the child dsh: never the real one, outside the working directory."""
    dsh_home: Path
    """``DSH_HOME``, under ``/var/tmp`` too: a sandboxed command must not read it."""
    env: dict[str, str]
    """The child's environment: the canary key, the stub, ``DSH_HOME`` and ``HOME``."""
    marker: Path
    """Where a payload that ran writes the key: outside the working directory."""

    def attack(
        self, *commands: str, allow: str = "shell"
    ) -> tuple[list[dict[str, Any]], support.Run]:
        """dsh runs the model's ``commands`` (one step), then answers :data:`NEXT`: the
        ``tool/result`` events and the run."""
        self.stub.enqueue(bash_calls(*commands))
        run = run_in_process(self.env, "--allow", allow, stdin=f"attack\n{NEXT}\n", cwd=self.work)
        went_on(run)
        return data_of(assert_log_whole(self.dsh_home), "tool/result"), run

    def content(self, command: str, *, allow: str = "shell") -> str:
        """What the model gets back from one ``command``."""
        (outcome,), _ = self.attack(command, allow=allow)
        return str(outcome["content"])


@pytest.fixture(name="scene")
def scene_fixture() -> Iterator[Scene]:
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="dsh-attack-", dir="/var/tmp")))
    assert not base.is_relative_to("/tmp"), f"/var/tmp resolves into /tmp here: {base}"
    try:
        with StubServer() as stub:
            (base / "work").mkdir()
            (base / "home").mkdir()
            env = child_env(stub.url, base / "dsh-home", HOME=str(base / "home"))
            yield Scene(
                stub,
                base,
                base / "work",
                base / "home",
                base / "dsh-home",
                env,
                base / "payload-ran",
            )
    finally:
        remove_tree(base)


def payload(marker: Path) -> str:
    """Python that writes the environment's key into ``marker``: what an attacker wants."""
    return f"import os; open({str(marker)!r}, 'w').write(os.environ.get('DEEPSEEK_API_KEY', ''))"


def bash_calls(*commands: str) -> ToolCalls:
    """One step asking for one ``bash`` call per command, in order."""
    return ToolCalls(tuple(("bash", json.dumps({"command": command})) for command in commands))


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


def went_on(result: Run | support.Run) -> None:
    """The session answered the line after the turn under test, and ended well: 0, or 3 when
    dsh refused a call it could not ask about (SPEC 15), which a pipe says on stderr."""
    refused = "dsh: [tool refused " in result.stderr
    assert result.returncode == (3 if refused else 0), result.stderr
    assert result.stdout.endswith(f"You said: {NEXT}\n"), result.stdout
    assert "Traceback" not in result.stderr
