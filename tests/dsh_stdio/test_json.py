"""``--json`` on the real process: lines parseable after SIGINT, refused on a terminal.

The rest of ``--json`` (SPEC section 9) runs in-process in ``test_jsonout.py``.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pexpect
import pytest

from dsh_core.testing import SlowStream, StubServer
from tests.support import DSH

pytestmark = pytest.mark.slow


def run(env: dict[str, str], *args: str, stdin: bytes = b"", cwd: Path | None = None) -> Any:
    return subprocess.run(
        [*DSH, *args], input=stdin, env=env, capture_output=True, timeout=60, check=False, cwd=cwd
    )


def lines_of(stdout: bytes) -> list[dict[str, Any]]:
    """Every line parsed on its own, as a script reading line by line would."""
    assert stdout.endswith(b"\n")
    return [json.loads(line) for line in stdout.split(b"\n")[:-1]]


def text_of(objects: list[dict[str, Any]], kind: str = "assistant/delta") -> str:
    return "".join(o["data"]["text"] for o in objects if o["type"] == kind)


def log_lines(home: Path) -> list[dict[str, Any]]:
    (log,) = home.rglob("session.jsonl")
    return [json.loads(line) for line in log.read_bytes().splitlines()[1:]]


def test_sigint_mid_answer_leaves_parseable_lines(
    dsh_env: dict[str, str], stub: StubServer
) -> None:
    stub.enqueue(SlowStream(" ".join(f"w{i}" for i in range(200)), 0.05))
    proc = subprocess.Popen(
        [*DSH, "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dsh_env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"go slowly\n")
    proc.stdin.flush()
    seen = b""
    while b"assistant/delta" not in seen:  # an observed delta: the answer is streaming
        line = proc.stdout.readline()
        assert line, "dsh ended before any delta"
        seen += line
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    objects = lines_of(seen + rest)
    assert proc.returncode == 130
    assert objects[-2]["type"] == "turn/end"
    assert objects[-2]["data"]["reason"] == {"kind": "aborted", "reason": "user"}
    # The run's result comes last (SPEC 15).
    assert (objects[-1]["type"], objects[-1]["outcome"], objects[-1]["exit_status"]) == (
        "result",
        "aborted",
        130,
    )


def test_json_on_a_terminal_needs_a_question(dsh_env: dict[str, str], home: Path) -> None:
    child = pexpect.spawn(DSH[0], [*DSH[1:], "--json"], env=dsh_env, timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert b"--json is for pipes and one-shot runs" in (child.before or b"")
    assert not home.exists() or not list(home.rglob("session.jsonl"))
