"""The offline demo runs the real front door against the bundled stub, with no key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DEMO = [sys.executable, str(Path(__file__).parent.parent / "scripts" / "demo_repl.py")]


def demo_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env["DSH_HOME"] = str(tmp_path / "home")
    return env


def test_demo_on_a_pipe(tmp_path: Path) -> None:
    result = subprocess.run(
        DEMO,
        input="hello\nlimit\n",
        env=demo_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "You said: hello\n"
        "This answer is cut short by the output token lim\n"
        "[turn stopped at the output token limit]\n"
    )
    assert "dsh demo: stub server at http://127.0.0.1:" in result.stderr
    assert "fail" in result.stderr  # the banner lists the trigger words


def test_demo_down_shows_the_transport_chain(tmp_path: Path) -> None:
    result = subprocess.run(
        [*DEMO, "--down"],
        input="hello\n",
        env=demo_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert re.fullmatch(
        r"\[turn failed TRANSPORT\] DeepSeek API request to http://127\.0\.0\.1:(\d+) failed: "
        r"All connection attempts failed: \[Errno 111\] Connect call failed "
        r"\('127\.0\.0\.1', \1\)\n",
        result.stdout,
    ), result.stdout
    assert result.stderr.count("retrying in") == 4
