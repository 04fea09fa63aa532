"""``--json``: one JSON object per line on stdout, parseable whatever happens (SPEC section 9)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pexpect
import pytest

from dsh_core.testing import Answer, SlowStream, StubServer, ToolCalls
from tests.support import DSH, assert_no_canary

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


def test_events_as_they_are_written_and_deltas(dsh_env: dict[str, str], home: Path) -> None:
    result = run(dsh_env, "--json", stdin=b"hello\nthink\nfail\n")
    objects = lines_of(result.stdout)
    assert result.returncode == 1  # the third turn failed
    # Nothing but the log's events and the deltas (SPEC 9).
    assert {o["type"] for o in objects if "seq" not in o} == {"assistant/delta", "reasoning/delta"}
    logged = [o for o in objects if "seq" in o]
    # Exactly the log's events, in order, none missing: the session log is what was printed.
    assert logged == log_lines(home)
    assert [o["seq"] for o in logged] == list(range(len(logged)))
    assert text_of(objects) == "You said: helloThe answer, after some thought: 42."
    assert text_of(objects, "reasoning/delta").endswith("6 x 7 = 42.")
    deltas = [o for o in objects if o["type"].endswith("/delta")]
    assert {(d["data"]["turn"], d["data"]["step"]) for d in deltas} == {(1, 1), (2, 1)}
    ends = [o["data"]["reason"]["kind"] for o in objects if o["type"] == "turn/end"]
    assert ends == ["completed", "completed", "error"]
    # Nothing but JSON on stdout: no outcome line; notices stay on stderr.
    assert b"[turn failed" not in result.stdout
    assert b"retrying in" in result.stderr
    assert_no_canary(home, result.stdout, result.stderr)


def test_line_separators_and_nul_in_the_answer(dsh_env: dict[str, str], stub: StubServer) -> None:
    text = "one\u2028two\u2029three\x85four\x00five\r\nsix"
    stub.enqueue(Answer(text, chunk_size=3))
    result = run(dsh_env, "--json", "say it")
    assert result.returncode == 0
    raw_lines = result.stdout.split(b"\n")[:-1]
    for raw in raw_lines:  # a reader splitting on every Unicode line break sees the same lines
        assert len(raw.decode("utf-8").splitlines()) == 1
    assert text_of(lines_of(result.stdout)) == text


def test_tool_events_are_lines_too(dsh_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "demo.txt").write_text("Hello\n")
    result = run(dsh_env, "--json", "toolread", cwd=tmp_path)
    objects = lines_of(result.stdout)
    kinds = [o["type"] for o in objects if "seq" in o]
    assert kinds.index("tool/call") < kinds.index("tool/result") < kinds.index("turn/end")
    steps = {o["data"]["step"] for o in objects if o["type"] == "assistant/delta"}
    assert steps == {2}  # the answer came in the second step
    assert b"[tool read] demo.txt" in result.stderr  # the tool lines stay on stderr
    assert result.returncode == 0


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
    assert objects[-1]["type"] == "turn/end"
    assert objects[-1]["data"]["reason"] == {"kind": "aborted", "reason": "user"}


def test_json_with_show_reasoning_is_refused(dsh_env: dict[str, str], home: Path) -> None:
    result = run(dsh_env, "--json", "--show-reasoning", stdin=b"hello\n")
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode() == (
        "dsh: startup failed: --json and --show-reasoning cannot be used together: with "
        "--json, reasoning is in the output as reasoning/delta events\n"
    )
    assert not home.exists() or not list(home.rglob("session.jsonl"))


def test_json_on_a_terminal_needs_a_question(dsh_env: dict[str, str], home: Path) -> None:
    child = pexpect.spawn(DSH[0], [*DSH[1:], "--json"], env=dsh_env, timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert b"--json is for pipes and one-shot runs" in (child.before or b"")
    assert not home.exists() or not list(home.rglob("session.jsonl"))


def test_a_scripted_tool_call_in_one_shot(
    dsh_env: dict[str, str], stub: StubServer, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("a\nb\n")
    stub.enqueue(ToolCalls(calls=(("read", '{"file_path": "notes.txt"}'),)))
    result = run(dsh_env, "--json", "read the notes", cwd=tmp_path)
    objects = lines_of(result.stdout)
    (outcome,) = [o for o in objects if o["type"] == "tool/result"]
    assert outcome["data"]["is_error"] is False
    assert outcome["data"]["content"].startswith("     1\ta")
    assert result.returncode == 0
