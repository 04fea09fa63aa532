"""``-r ID`` and ``--show ID`` through the real process find a session by its index entry, and
without one (a store written before the index) by walking, as before."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from dsh_core.session.ids import INDEX_DIR
from dsh_core.testing import StubServer
from tests.support import DSH, child_env


def dsh(
    env: dict[str, str], cwd: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DSH, *args], input=stdin, env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_resume_and_show_by_id_with_and_without_the_index(stub: StubServer, tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = child_env(stub.url, home)
    first = dsh(env, work, stdin="hello\n")
    assert first.returncode == 0, first.stderr
    found = re.search(r"dsh: session (\S+) \(dsh -r", first.stderr)
    assert found is not None, first.stderr
    session_id = found.group(1)
    index = home / "sessions" / INDEX_DIR
    assert (index / session_id).is_file()
    for round_ in ("indexed", "walked"):
        if round_ == "walked":
            shutil.rmtree(index)  # as a dsh from before the index left the store
        shown = dsh(env, work, "--show", session_id)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("> hello\n"), shown.stdout
        assert (index / session_id).is_file()  # written again by the walk
    resumed = dsh(env, work, "-r", session_id, stdin=f"again {os.getpid()}\n")
    assert resumed.returncode == 0, resumed.stderr
    assert f"dsh: session {session_id} " in resumed.stderr
    shown = dsh(env, work, "--show", session_id[:-2])  # a unique prefix: walked
    assert shown.returncode == 0, shown.stderr
    assert f"> again {os.getpid()}\n" in shown.stdout
