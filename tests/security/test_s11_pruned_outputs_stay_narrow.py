"""SPEC 11 and 10.4, pruning (issue 29): ``read`` opens a file dsh named in this session's
``tool-output/`` without a question, also on a pipe. The attack: a model that uses that
exemption to read something else through the same directory, by a symlink or a hard link
planted there, by ``..`` out of it, or through another session's ``tool-output/``. Each must
be refused on a pipe as before (DSH_HOME is a credential location), and the secret never sent.

Planting needs a writer of DSH_HOME, which the model is not (SPEC 10.14): the test plants as
the person could, to prove the check does not rest on that alone.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.support import DSH, child_env, single_log

pytestmark = pytest.mark.slow

SECRET = "the secret the model must not read"


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DSH, *args], cwd=cwd, env=env, input="go\n", capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "route", ["symlink planted", "hard link planted", "dot-dot out", "another session", "subdir"]
)
def test_the_tool_output_exemption_reads_nothing_else(tmp_path: Path, route: str) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    secret = tmp_path / "secret.txt"  # outside the working directory
    secret.write_text(SECRET)
    with StubServer() as stub:
        env = child_env(stub.url, home)
        assert run(env, work).returncode == 0  # a session, with its directory
        output = single_log(home).parent / "tool-output"
        output.mkdir(mode=0o700)
        if route == "symlink planted":
            (output / "result-1.txt").symlink_to(secret)
            target = output / "result-1.txt"
        elif route == "hard link planted":
            os.link(secret, output / "result-1.txt")
            target = output / "result-1.txt"
        elif route == "dot-dot out":
            (home / "config.toml").write_text(f"# {SECRET}\n")
            target = output / ".." / ".." / ".." / ".." / "config.toml"
        elif route == "another session":
            other = home / "sessions" / "elsewhere" / "s1" / "tool-output"
            other.mkdir(parents=True)
            (other / "result-1.txt").write_text(SECRET)
            target = (
                output / ".." / ".." / ".." / "elsewhere" / "s1" / "tool-output" / "result-1.txt"
            )
        else:
            (output / "deeper").mkdir()
            (output / "deeper" / "result-1.txt").write_text(SECRET)
            target = output / "deeper" / "result-1.txt"
        call = json.dumps({"file_path": str(target)})
        stub.enqueue(ToolCalls((("read", call),)), Answer("done"))
        result = run(env, work, "-c")
        sent = json.dumps(stub.requests[-1]["messages"])
        assert SECRET not in sent, route
        last = stub.requests[-1]["messages"][-1]
        assert last["role"] == "tool" and last["content"].startswith("Error:"), last
        assert SECRET not in result.stdout + result.stderr


def test_a_file_dsh_named_there_is_read_on_a_pipe(tmp_path: Path) -> None:
    """The control: the same call on a regular file of this session's own, one link, is read."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with StubServer() as stub:
        env = child_env(stub.url, home)
        assert run(env, work).returncode == 0
        output = single_log(home).parent / "tool-output"
        output.mkdir(mode=0o700)
        (output / "result-1.txt").write_text("the whole output\n")
        call = json.dumps({"file_path": str(output / "result-1.txt")})
        stub.enqueue(ToolCalls((("read", call),)), Answer("done"))
        assert run(env, work, "-c").returncode == 0
        last = stub.requests[-1]["messages"][-1]
        assert last["role"] == "tool" and "the whole output" in last["content"], last
