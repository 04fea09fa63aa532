"""SPEC 10.12 with background jobs (SPEC 16): two sandboxed commands at once keep what they keep.

The attack: with no ``.git`` in the working directory, a background job keeps planting
``.git/hooks/pre-commit`` (which the person's next ``git init`` and commit would run outside the
sandbox) while other sandboxed commands start and end beside it, and goes on until dsh ends the
session. Nothing stands in the person's tree for the sandbox (no placeholder: SPEC 10.12 as
issue 31 class 11 reads it), so each command's own look afterwards must set the plant aside:
the one that ended beside the planter, and the planter's own when dsh ends it at exit.
(Written when a placeholder ``.git`` stood there: removing it after the first command unmounted
it in the second's namespace, which could then plant.)
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
    "touch planter-started; while true; do mkdir -p .git/hooks 2>/dev/null; "
    "echo planted > .git/hooks/pre-commit 2>/dev/null; sleep 0.05; done"
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
            background("sleep 0.5"),  # a first job, ending while the planter runs
            background(PLANT),  # plants again and again until the session ends
            ToolCalls((("bash", json.dumps({"command": "sleep 3"})),)),  # ends beside it
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
    assert (work / "planter-started").exists()
    assert not (work / ".git" / "hooks" / "pre-commit").exists()
    assert not (work / ".git" / "hooks").exists()
