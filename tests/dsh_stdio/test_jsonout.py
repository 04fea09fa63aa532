"""``--json`` in-process (``tests/harness.py``): one JSON object per line, parseable whatever the
model wrote (SPEC section 9). SIGINT mid-answer and a terminal are ``test_json.py``'s.
"""

from __future__ import annotations

from pathlib import Path

from dsh_core.testing import Answer, ManualClock, StubServer, ToolCalls
from tests.dsh_stdio.test_json import lines_of, log_lines, text_of
from tests.harness import run_in_process
from tests.support import assert_no_canary


def test_events_as_they_are_written_and_deltas(dsh_env: dict[str, str], home: Path) -> None:
    clock = ManualClock(autojump=True)  # "fail" is retried: its waits, in no time
    result = run_in_process(dsh_env, "--json", stdin=b"hello\nthink\nfail\n", clock=clock)
    objects = lines_of(result.stdout_bytes)
    assert result.returncode == 1  # the third turn failed
    # Nothing but the log's events and the deltas (SPEC 9).
    assert {o["type"] for o in objects[:-1] if "seq" not in o} == {
        "assistant/delta",
        "reasoning/delta",
    }
    assert objects[-1]["type"] == "result"  # and the run's result, last (SPEC 15)
    objects = objects[:-1]
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
    assert b"[turn failed" not in result.stdout_bytes
    assert b"retrying in" in result.stderr_bytes
    assert_no_canary(home, result.stdout_bytes, result.stderr_bytes)


def test_line_separators_and_nul_in_the_answer(dsh_env: dict[str, str], stub: StubServer) -> None:
    text = "one\u2028two\u2029three\x85four\x00five\r\nsix"
    stub.enqueue(Answer(text, chunk_size=3))
    result = run_in_process(dsh_env, "--json", "say it")
    assert result.returncode == 0
    raw_lines = result.stdout_bytes.split(b"\n")[:-1]
    for raw in raw_lines:  # a reader splitting on every Unicode line break sees the same lines
        assert len(raw.decode("utf-8").splitlines()) == 1
    assert text_of(lines_of(result.stdout_bytes)) == text


def test_tool_events_are_lines_too(dsh_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "demo.txt").write_text("Hello\n")
    result = run_in_process(dsh_env, "--json", "toolread", cwd=tmp_path)
    objects = lines_of(result.stdout_bytes)
    kinds = [o["type"] for o in objects if "seq" in o]
    assert kinds.index("tool/call") < kinds.index("tool/result") < kinds.index("turn/end")
    steps = {o["data"]["step"] for o in objects if o["type"] == "assistant/delta"}
    assert steps == {2}  # the answer came in the second step
    assert b"[tool read] demo.txt" in result.stderr_bytes  # the tool lines stay on stderr
    assert result.returncode == 0


def test_json_with_show_reasoning_is_refused(dsh_env: dict[str, str], home: Path) -> None:
    result = run_in_process(dsh_env, "--json", "--show-reasoning", stdin=b"hello\n")
    assert result.returncode == 2
    (only,) = lines_of(result.stdout_bytes)  # a --json run's result, also here (SPEC 15)
    assert (only["type"], only["outcome"], only["session"]) == ("result", "startup-failed", None)
    assert result.stderr == (
        "dsh: startup failed: --json and --show-reasoning cannot be used together: with "
        "--json, reasoning is in the output as reasoning/delta events\n"
    )
    assert not home.exists() or not list(home.rglob("session.jsonl"))


def test_a_scripted_tool_call_in_one_shot(
    dsh_env: dict[str, str], stub: StubServer, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("a\nb\n")
    stub.enqueue(ToolCalls(calls=(("read", '{"file_path": "notes.txt"}'),)))
    result = run_in_process(dsh_env, "--json", "read the notes", cwd=tmp_path)
    objects = lines_of(result.stdout_bytes)
    (outcome,) = [o for o in objects if o["type"] == "tool/result"]
    assert outcome["data"]["is_error"] is False
    assert outcome["data"]["content"].startswith("     1\ta")
    assert result.returncode == 0
