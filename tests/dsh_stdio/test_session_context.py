"""A terminal resume says which session it resumed and shows the last exchange (pexpect).

The session's name on a pipe and the recorded system prompt are in-process, in
``test_main.py``, which imports the helpers below.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

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
