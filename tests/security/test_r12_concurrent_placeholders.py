"""SPEC 10.12 with background jobs (SPEC 16): two sandboxed commands at once keep what they keep.

The attack: with no ``.git`` in the working directory, a first background job gets the empty
read-only placeholder ``.git`` (its mount point is made on the disk), and a second job, started
while it runs, finds that directory there and has it mounted read-only. When the first ends,
its clean-up would remove the placeholder; removing a mount point that another namespace has
mounted unmounts it there (Linux 3.18), so the second job, still running, could then make
``.git/hooks/pre-commit``, which the person's next ``git init`` and commit would run outside
the sandbox. The placeholder must stay while any sandboxed command runs, and go with the last.
On the real process; the mounts are the point, not file modes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.security._support_sandbox import needs_bwrap
from tests.support import DSH, HANG_GUARD, child_env

pytestmark = [pytest.mark.slow, needs_bwrap]

PLANT = (
    "for i in $(seq 80); do mkdir -p .git/hooks 2>/dev/null && "
    "echo planted > .git/hooks/pre-commit 2>/dev/null && break; sleep 0.05; done; "
    "touch planter-gave-up-or-planted; sleep 30"
)


def background(command: str) -> ToolCalls:
    return ToolCalls((("bash", json.dumps({"command": command, "run_in_background": True})),))


def test_a_job_cannot_plant_a_git_directory_when_another_sandboxed_command_ends(
    tmp_path: Path,
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with StubServer() as stub:
        stub.enqueue(
            background("sleep 0.5"),  # the first: its placeholder .git is made
            background(PLANT),  # the second: finds that .git, tries until it can write
            ToolCalls((("bash", json.dumps({"command": "sleep 3"})),)),  # the first ends
            Answer("done"),
        )
        run = subprocess.run(
            [*DSH, "--allow", "shell", "--sandbox", "on"],
            input=b"go\n",
            capture_output=True,
            cwd=work,
            env=child_env(stub.url, home),
            timeout=HANG_GUARD * 2,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    assert not (work / ".git" / "hooks" / "pre-commit").exists()
    assert not (work / ".git").exists()  # the last command to end removed the placeholder
