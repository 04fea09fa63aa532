"""The session is named, a resume says what it resumed, and the system prompt is recorded once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from dsh_core.testing import StubServer
from tests.support import DSH

pytestmark = pytest.mark.slow

NAMED = re.compile(r"dsh: session (\S+) \(dsh -r \1 to resume\)\n")


def run(env: dict[str, str], *args: str, stdin: bytes = b"", cwd: Path) -> Any:
    return subprocess.run(
        [*DSH, *args], input=stdin, env=env, capture_output=True, timeout=60, check=False, cwd=cwd
    )


def system_of(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def test_pipe_and_one_shot_runs_name_their_session(
    dsh_env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    piped = run(dsh_env, stdin=b"hello\n", cwd=tmp_path)
    match = NAMED.search(piped.stderr.decode())
    assert match is not None and piped.stderr.decode().endswith(match.group(0))
    (log,) = home.rglob("session.jsonl")
    assert log.parent.name == match.group(1)
    again = run(dsh_env, "-r", match.group(1), "and again", cwd=tmp_path)
    assert NAMED.search(again.stderr.decode()) is not None
    assert again.stdout == b"You said: and again\n"
    # A run without any turn keeps no session, and names none.
    empty = run(dsh_env, stdin=b"", cwd=tmp_path)
    assert NAMED.search(empty.stderr.decode()) is None


def test_the_system_prompt_has_the_agents_files_and_is_recorded_once(
    dsh_env: dict[str, str], stub: StubServer, home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Run the tests with make check.\n")
    work = repo / "src"
    work.mkdir()
    (work / "AGENTS.md").write_text("Code here is typed.\n")
    run(dsh_env, stdin=b"first\n", cwd=work)
    prompt = system_of(stub.requests[-1])
    assert f"Working directory: {work}" in prompt
    assert prompt.index("Run the tests with make check.") < prompt.index("Code here is typed.")
    (log,) = home.rglob("session.jsonl")
    records = [json.loads(line) for line in log.read_bytes().splitlines()[1:]]
    assert records[0]["type"] == "system/prompt"
    assert records[0]["data"]["text"] == prompt
    # A resume sends the recorded prompt, whatever the files say now.
    (repo / "AGENTS.md").write_text("Something else entirely.\n")
    run(dsh_env, "-c", stdin=b"second\n", cwd=work)
    assert system_of(stub.requests[-1]) == prompt
    assert sum(1 for line in log.read_bytes().splitlines() if b'"system/prompt"' in line) == 1


def test_dash_s_replaces_the_first_part_and_keeps_the_files(
    dsh_env: dict[str, str], stub: StubServer, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("Be terse.\n")
    run(dsh_env, "-s", "You are a pirate.", "ahoy", cwd=tmp_path)
    prompt = system_of(stub.requests[-1])
    assert prompt.startswith("You are a pirate.")
    assert "Working directory" not in prompt
    assert "Be terse." in prompt


def test_a_bad_agents_file_is_named_and_the_run_goes_on(
    dsh_env: dict[str, str], stub: StubServer, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"\x00\x01binary\xff" * 100)
    result = run(dsh_env, "hello", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == b"You said: hello\n"
    assert b"AGENTS.md" in result.stderr and b"Traceback" not in result.stderr


def test_a_terminal_resume_says_which_session_and_shows_the_last_exchange(
    dsh_env: dict[str, str], tmp_path: Path
) -> None:
    first = run(dsh_env, stdin=b"hello\nthe last question\n", cwd=tmp_path)
    match = NAMED.search(first.stderr.decode())
    assert match is not None
    child = pexpect.spawn(
        sys.executable, [*DSH[1:], "-c"], env=dsh_env, cwd=tmp_path, timeout=30, encoding="utf-8"
    )
    child.expect_exact(f"dsh: resumed session {match.group(1)} (2 turns)")
    child.expect_exact("> the last question")
    child.expect_exact("You said: the last question")
    child.expect_exact("\r\n> ")  # the prompt
    child.sendline("/exit")
    child.expect_exact(f"dsh: session {match.group(1)} (dsh -r {match.group(1)} to resume)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
