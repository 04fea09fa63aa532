"""Pipe and one-shot mode in-process (``tests/harness.py``): tool steps, approval, paths.

The same checks as on the real process (``test_agent_pipe.py``, which keeps what needs one:
signals, a SIGKILL mid-call, memory, the environment of commands, finding ``bwrap``): stdout
exactly where it is stable, the ``dsh: [tool ...]`` lines on stderr, the exit status, the
session log read independently of ``dsh_core.session`` (every call the model asked for answered
once, in order), and every request the stub received checked against DeepSeek's two 400 rules.
Each test has a working directory holding ``demo.txt`` (``Hello``) and a stub server of its
own (``test_agent_pipe.py``'s fixtures), so request numbers and call ids start afresh.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from dsh_core.testing import StubServer, ToolCalls
from tests.dsh_stdio.test_agent_pipe import (
    BUILTIN_TOOLS,
    REFUSED_READ,
    REFUSED_SHELL,
    REFUSED_WRITE,
    assert_log_whole,
    assert_requests_valid,
    data_of,
    processes_with_argument,
    stub,
    tool_lines,
    unique_seconds,
    work,
)
from tests.harness import run_in_process
from tests.support import Run, wait_until

__all__ = ["stub", "work"]  # test_agent_pipe's fixtures, used by name


def run(env: dict[str, str], cwd: Path, *args: str, stdin: str = "") -> Run:
    """Run dsh in-process in ``cwd`` with ``stdin`` as its input."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd)


# A turn with tool steps.


def test_a_turn_with_a_tool_step(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, stdin="toolread\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Tool results: [read]      1\tHello\n"
    assert tool_lines(result.stderr) == [
        "dsh: [tool read] demo.txt",
        "dsh: [tool read done] 1 line",
    ]
    assert "Traceback" not in result.stderr

    events = assert_log_whole(home)
    kinds = [e["type"] for e in events if e["type"] not in ("usage", "system/prompt")]
    assert kinds == [
        "turn/start",
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
        "assistant/message",
        "turn/end",
    ]
    first, second = data_of(events, "assistant/message")
    assert (first["step"], first["text"]) == (1, "")
    assert first["tool_calls"] == [
        {"id": "call_1_0", "name": "read", "arguments": '{"file_path": "demo.txt"}'}
    ]
    (call,) = data_of(events, "tool/call")
    assert call == {
        "turn": 1,
        "step": 1,
        "call_id": "call_1_0",
        "name": "read",
        "arguments": '{"file_path": "demo.txt"}',
    }
    (outcome,) = data_of(events, "tool/result")
    assert (outcome["call_id"], outcome["is_error"], outcome["content"]) == (
        "call_1_0",
        False,
        "     1\tHello",
    )
    assert data_of(events, "approval/decided") == []  # a read inside needs no approval
    assert (second["step"], second["text"]) == (2, "Tool results: [read]      1\tHello")
    assert second.get("tool_calls") in (None, [])
    assert data_of(events, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]

    # On the wire: the tools offered, then the call and its result right after it.
    asked, answered = stub.requests
    assert [tool["function"]["name"] for tool in asked["tools"]] == BUILTIN_TOOLS
    calling, tool_message = answered["messages"][-2:]
    assert calling.pop("reasoning_content", "") == ""  # not thinking mode: nothing, or ""
    assert [calling, tool_message] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1_0",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"file_path": "demo.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1_0", "content": "     1\tHello"},
    ]
    assert_requests_valid(stub)


READ_LINES = ["dsh: [tool read] demo.txt", "dsh: [tool read done] 1 line"]


LOOK_AROUND = [
    *READ_LINES,
    "dsh: [tool glob] *.txt",
    "dsh: [tool glob done] 1 line",
    "dsh: [tool grep] /Hello/ in .",
    "dsh: [tool grep done] 1 line",
]


LOOK_AROUND_TOGETHER = [LOOK_AROUND[i] for i in (0, 2, 4, 1, 3, 5)]
"""The same three reads in one step: they run side by side, every call shown before any result."""
ALL_THREE = "Tool results: [read]      1\tHello; [glob] demo.txt; [grep] demo.txt:1:Hello\n"


@pytest.mark.parametrize(
    ("word", "stdout", "lines", "steps"),
    [
        ("toolmany", "Looking around.\n" + ALL_THREE, LOOK_AROUND_TOGETHER, 2),  # one step
        ("toolchain", ALL_THREE, LOOK_AROUND, 4),  # one call per step, three steps
        ("toolsplit", "Tool results: [read]      1\tHello\n", READ_LINES, 2),
        ("toolthink", "Tool results: [read]      1\tHello\n", READ_LINES, 2),
    ],
    ids=["toolmany", "toolchain", "toolsplit", "toolthink"],
)
def test_trigger_words_with_tool_steps(
    dsh_env: dict[str, str],
    home: Path,
    work: Path,
    stub: StubServer,
    word: str,
    stdout: str,
    lines: list[str],
    steps: int,
) -> None:
    result = run(dsh_env, work, stdin=f"{word}\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == stdout
    assert tool_lines(result.stderr) == lines
    events = assert_log_whole(home)
    assert [m["step"] for m in data_of(events, "assistant/message")] == list(range(1, steps + 1))
    assert len(stub.requests) == steps
    if word == "toolthink":  # thinking mode: the reasoning goes back with its calls
        reasoning = "The user wants demo.txt. I should read it first."
        assert data_of(events, "assistant/message")[0]["reasoning"] == reasoning
        assert stub.requests[1]["messages"][-2]["reasoning_content"] == reasoning
        assert reasoning not in result.stdout + result.stderr  # a pipe hides reasoning
    assert_requests_valid(stub)


def test_a_failing_tool_is_a_result(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, stdin="toolfail\n")
    assert result.returncode == 0, result.stderr
    missing = "cannot read no-such-file.txt: [Errno 2] No such file or directory: " + repr(
        str(work / "no-such-file.txt")
    )
    assert tool_lines(result.stderr) == [
        "dsh: [tool read] no-such-file.txt",
        f"dsh: [tool failed read] {missing}",
    ]
    assert result.stdout == f"Tool results: [read] Error: {missing}"[:101] + "...\n"
    events = assert_log_whole(home)
    (failed,) = data_of(events, "tool/result")
    assert (failed["is_error"], failed["content"]) == (True, f"Error: {missing}")
    assert failed["error"] == {"code": "TOOL_FAILED", "message": missing}
    assert data_of(events, "turn/end")[0]["reason"] == {"kind": "completed"}
    assert_requests_valid(stub)


@pytest.mark.parametrize("one_shot", [False, True], ids=["pipe", "one-shot"])
def test_bash_is_refused_on_a_pipe_without_allow(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer, one_shot: bool
) -> None:
    # dsh "question": no terminal either, so the same refusal
    result = run(dsh_env, work, "toolbash") if one_shot else run(dsh_env, work, stdin="toolbash\n")
    assert result.returncode == 3, result.stderr  # refused: SPEC 15
    assert result.stdout == f"Tool results: [bash] Error: {REFUSED_SHELL[:73]}...\n"
    assert tool_lines(result.stderr) == [
        "dsh: [tool bash] $ ls -la",
        f"dsh: [tool refused bash] {REFUSED_SHELL}",
    ]
    events = assert_log_whole(home)
    assert data_of(events, "tool/call") == []  # never started
    assert data_of(events, "approval/decided") == [
        {"turn": 1, "call_id": "call_1_0", "outcome": "unavailable"}
    ]
    (refusal,) = data_of(events, "tool/result")
    assert (refusal["is_error"], refusal["content"]) == (True, f"Error: {REFUSED_SHELL}")
    assert data_of(events, "turn/end")[-1]["reason"] == {"kind": "completed"}
    assert_requests_valid(stub)


def test_bash_runs_with_allow_shell(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, "--allow", "shell", stdin="toolbash\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Tool results: [bash] total ")
    lines = tool_lines(result.stderr)
    assert lines[0] == "dsh: [tool bash] $ ls -la"
    assert re.fullmatch(r"dsh: \[tool bash exit 0\] \d+ lines", lines[1])
    assert len(lines) == 2
    events = assert_log_whole(home)
    assert data_of(events, "approval/decided") == [
        {"turn": 1, "call_id": "call_1_0", "outcome": "granted-by-flag"}
    ]
    assert [call["name"] for call in data_of(events, "tool/call")] == ["bash"]
    (listing,) = data_of(events, "tool/result")
    assert listing["is_error"] is False
    assert " demo.txt\n" in listing["content"] + "\n"  # ls -la really ran, in the directory
    assert_requests_valid(stub)


def test_edit_is_refused_on_a_pipe_without_allow_write(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, stdin="tooledit\n")
    assert result.returncode == 3, result.stderr  # refused: SPEC 15
    assert tool_lines(result.stderr) == [
        "dsh: [tool read] demo.txt",
        "dsh: [tool read done] 1 line",
        "dsh: [tool edit] demo.txt",
        f"dsh: [tool refused edit] {REFUSED_WRITE}",
    ]
    events = assert_log_whole(home)
    assert [r["content"] for r in data_of(events, "tool/result")] == [
        "     1\tHello",
        f"Error: {REFUSED_WRITE}",
    ]
    assert (work / "demo.txt").read_text() == "Hello\n"
    assert data_of(events, "turn/end")[-1]["reason"] == {"kind": "completed"}
    assert_requests_valid(stub)


def test_edit_changes_the_file_with_allow_write(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, "--allow", "write", stdin="tooledit\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Tool results: [read]      1\tHello; [edit] replaced 1 occurrence in demo.txt (line 1)\n"
    )
    assert (work / "demo.txt").read_text() == "Hello again\n"
    events = assert_log_whole(home)
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["granted-by-flag"]
    assert [call["name"] for call in data_of(events, "tool/call")] == ["read", "edit"]
    assert_requests_valid(stub)


def test_no_tools_offers_none_and_runs_none(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    """With ``--no-tools`` a model that calls a tool anyway gets an error result; nothing runs."""
    result = run(dsh_env, work, "--no-tools", stdin="toolread\n")
    assert result.returncode == 0, result.stderr
    unknown = 'unknown tool "read"; the tools are: none'
    assert result.stdout == f"Tool results: [read] Error: {unknown}\n"
    assert tool_lines(result.stderr) == [
        'dsh: [tool read] {"file_path": "demo.txt"}',
        f"dsh: [tool failed read] {unknown}",
    ]
    assert all("tools" not in request for request in stub.requests)
    events = assert_log_whole(home)
    (prompt,) = data_of(events, "system/prompt")
    assert "Tools: none in this session" in prompt["text"]
    assert data_of(events, "tool/call") == []
    assert [r["content"] for r in data_of(events, "tool/result")] == [f"Error: {unknown}"]
    assert_requests_valid(stub)


def test_a_y_line_is_the_next_turn_not_an_approval(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    marker = work / "ran"
    stub.enqueue(ToolCalls((("bash", json.dumps({"command": f"touch {marker}"})),)))
    result = run(dsh_env, work, stdin="run it\ny\n")  # `y` is waiting while the call is
    assert result.returncode == 3, result.stderr  # refused: SPEC 15
    assert result.stdout == (f"Tool results: [bash] Error: {REFUSED_SHELL[:73]}...\nYou said: y\n")
    assert not marker.exists()
    events = assert_log_whole(home)
    assert [m["text"] for m in data_of(events, "user/message")] == ["run it", "y"]
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["unavailable"]
    assert data_of(events, "tool/call") == []
    assert_requests_valid(stub)


def test_the_toolbash_word_then_y(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, stdin="toolbash\ny\n")
    assert result.returncode == 3, result.stderr  # refused: SPEC 15
    assert result.stdout.endswith("\nYou said: y\n")
    assert f"dsh: [tool refused bash] {REFUSED_SHELL}" in tool_lines(result.stderr)
    events = assert_log_whole(home)
    assert [m["text"] for m in data_of(events, "user/message")] == ["toolbash", "y"]
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["unavailable"]
    assert_requests_valid(stub)


def escaping_reads(work: Path) -> tuple[str, ...]:
    """Three ways to name /etc/passwd from ``work``: dots, absolute, a symlink inside."""
    os.symlink("/etc/passwd", work / "link")
    return (os.path.relpath("/etc/passwd", work), "/etc/passwd", "link")


def test_paths_outside_are_refused_on_a_pipe(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    paths = escaping_reads(work)
    assert paths[0].startswith("../") and paths[0].endswith("/etc/passwd")
    calls = tuple(("read", json.dumps({"file_path": path})) for path in paths)
    stub.enqueue(ToolCalls(calls))
    result = run(dsh_env, work, stdin="read those\n")
    assert result.returncode == 3, result.stderr  # refused: SPEC 15
    refused = f"dsh: [tool refused read] {REFUSED_READ}"
    assert tool_lines(result.stderr) == [
        "dsh: [tool read] /etc/passwd (outside the working directory)",  # resolved
        refused,
        "dsh: [tool read] /etc/passwd (outside the working directory)",
        refused,
        "dsh: [tool read] link -> /etc/passwd (outside the working directory)",  # where it leads
        refused,
    ]
    events = assert_log_whole(home)
    assert [r["content"] for r in data_of(events, "tool/result")] == [f"Error: {REFUSED_READ}"] * 3
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["unavailable"] * 3
    assert data_of(events, "tool/call") == []
    assert "root:" not in json.dumps(stub.requests)  # nothing of the file reached the model
    assert_requests_valid(stub)


def test_paths_outside_are_read_with_allow_read(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    paths = escaping_reads(work)
    calls = tuple(("read", json.dumps({"file_path": path})) for path in paths)
    stub.enqueue(ToolCalls(calls))
    result = run(dsh_env, work, "--allow", "read", stdin="read those\n")
    assert result.returncode == 0, result.stderr
    events = assert_log_whole(home)
    results = data_of(events, "tool/result")
    first_line = "     1\t" + Path("/etc/passwd").read_text().split("\n")[0]
    assert [(r["is_error"], r["content"].split("\n")[0]) for r in results] == [
        (False, first_line)
    ] * 3
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["granted-by-flag"] * 3
    assert_requests_valid(stub)


def test_a_name_with_a_newline_and_an_escape_is_shown_neutralised(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    name = "we\x1b[31mird\nname.txt"
    (work / name).write_text("Weird\n")
    missing = "no\x1b]0;pwned\x07such.txt"  # a failure names it too
    calls = (
        ("read", json.dumps({"file_path": name})),
        ("read", json.dumps({"file_path": missing})),
    )
    stub.enqueue(ToolCalls(calls))
    result = run(dsh_env, work, stdin="read it\n")
    assert result.returncode == 0, result.stderr
    assert b"\x1b" not in result.raw_stderr and b"\x07" not in result.raw_stderr
    lines = tool_lines(result.stderr)
    assert lines[:3] == [  # a summary is one line: a name with a line break is quoted
        'dsh: [tool read] "we\\u001b[31mird\\nname.txt"',
        'dsh: [tool read] "no\\u001b]0;pwned\\u0007such.txt"',  # the reads run side by side
        "dsh: [tool read done] 1 line",
    ]
    assert lines[3].startswith(
        "dsh: [tool failed read] cannot read no^[]0;pwned^Gsuch.txt: [Errno 2] No such file"
    )
    assert len(lines) == 4
    # A pipe passes the model's text through as data.
    assert result.stdout.startswith("Tool results: [read]      1\tWeird; [read] Error: cannot ")
    events = assert_log_whole(home)
    assert [c["arguments"] for c in data_of(events, "tool/call")] == [a for _, a in calls]
    assert_requests_valid(stub)


def test_a_background_child_does_not_hold_the_turn(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    seconds = unique_seconds()
    command = f"sleep {seconds} & echo started"
    stub.enqueue(ToolCalls((("bash", json.dumps({"command": command})),)))
    try:
        result = run(dsh_env, work, "--allow", "shell", stdin="go\n")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "Tool results: [bash] started\n"
        events = assert_log_whole(home)
        (output,) = data_of(events, "tool/result")
        assert (output["is_error"], output["content"]) == (False, "started\n")
        # SIGKILL was sent to the group before the result: the sleep is gone or going.
        wait_until(lambda: not processes_with_argument(seconds), f"sleep {seconds} to end")
    finally:
        for pid in processes_with_argument(seconds):
            os.kill(pid, signal.SIGKILL)
    assert_requests_valid(stub)


def test_the_step_limit_ends_a_looping_model(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, "--max-steps", "3", stdin="toolloop\nhello\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "[turn stopped at the step limit] 3 steps (next: send a message to go on, or raise "
        "--max-steps)\nYou said: hello\n"
    )
    assert len(stub.requests) == 3 + 1
    events = assert_log_whole(home)
    assert [r["call_id"] for r in data_of(events, "tool/result")] == [
        "call_1_0",
        "call_2_0",
        "call_3_0",
    ]
    assert [end["reason"]["kind"] for end in data_of(events, "turn/end")] == [
        "max-steps",
        "completed",
    ]
    assert stub.requests[-1]["messages"][-1] == {"role": "user", "content": "hello"}
    assert_requests_valid(stub)


def test_malformed_and_unknown_calls_are_results(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run(dsh_env, work, stdin="toolbad\ntoolunknown\n")
    assert result.returncode == 0, result.stderr
    events = assert_log_whole(home)
    bad, unknown = data_of(events, "tool/result")
    assert bad["is_error"] is True
    assert bad["content"].startswith("Error: invalid arguments: not valid JSON (")
    assert unknown["content"] == (
        f'Error: unknown tool "launch_missiles"; the tools are: {", ".join(BUILTIN_TOOLS)}'
    )
    assert data_of(events, "tool/call") == []
    assert [end["reason"]["kind"] for end in data_of(events, "turn/end")] == ["completed"] * 2
    lines = tool_lines(result.stderr)
    assert lines[1].startswith("dsh: [tool failed read] invalid arguments: not valid JSON (")
    assert lines[3] == f"dsh: [tool failed launch_missiles] {unknown['content'][7:]}"
    answers = result.stdout.split("\n")
    assert answers[0].startswith("Tool results: [read] Error: invalid arguments: ")
    assert answers[1].startswith('Tool results: [launch_missiles] Error: unknown tool "launch_m')
    assert_requests_valid(stub)


def test_a_hundred_calls_in_one_step(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    for number in range(100):
        (work / f"n{number}.txt").write_text(f"note {number}\n")
    calls = tuple(("read", json.dumps({"file_path": f"n{n}.txt"})) for n in range(100))
    stub.enqueue(ToolCalls(calls, interleaved=True))
    result = run(dsh_env, work, stdin="read them all\n")
    assert result.returncode == 0, result.stderr
    ids = [f"call_1_{n}" for n in range(100)]
    events = assert_log_whole(home)
    (asked, _) = data_of(events, "assistant/message")
    assert [(c["id"], c["arguments"]) for c in asked["tool_calls"]] == list(
        zip(ids, (arguments for _, arguments in calls), strict=True)
    )
    results = data_of(events, "tool/result")
    assert [(r["call_id"], r["content"]) for r in results] == [
        (ids[n], f"     1\tnote {n}") for n in range(100)
    ]
    tools = [m for m in stub.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        (ids[n], f"     1\tnote {n}") for n in range(100)
    ]
    assert len(tool_lines(result.stderr)) == 200
    assert_requests_valid(stub)


def test_a_one_megabyte_argument_string(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    """The call runs with its arguments whole; the step after it would not fit a 200,000-token
    window (about 250,000 tokens of arguments, and nothing to summarise), so the turn fails
    before sending it."""
    piece = 'line "quoted" \\ back, tab\t, é, 😀, \u2028, end\n'
    content = (piece * (1_100_000 // len(piece)))[:1_000_000]
    arguments = json.dumps({"file_path": "big.txt", "content": content}, ensure_ascii=False)
    assert len(arguments) > 1_000_000
    stub.enqueue(ToolCalls((("write", arguments),), fragment_size=997))
    window = ("--context-window", "200000")
    result = run(dsh_env, work, "--allow", "write", *window, stdin="write it\n")
    assert result.returncode == 1, result.stderr
    assert re.fullmatch(
        r"\[turn failed CONTEXT_WINDOW_EXCEEDED\] the conversation no longer fits the model's "
        r"context window \(about [\d,]+ tokens, the window is 200,000\): start a fresh "
        r"session \(send the rest to a new dsh run, without --continue or --resume\), or "
        r"shorten the message\n",
        result.stdout,
    )
    assert tool_lines(result.stderr) == [
        "dsh: [tool write] big.txt (new file)",
        "dsh: [tool write done] 1 line",
    ]
    events = assert_log_whole(home)
    (asked,) = data_of(events, "assistant/message")
    assert asked["tool_calls"][0]["arguments"] == arguments
    assert data_of(events, "tool/call")[0]["arguments"] == arguments
    (written,) = data_of(events, "tool/result")
    assert written["is_error"] is False, written["content"]
    assert (work / "big.txt").read_bytes() == content.encode()
    assert data_of(events, "turn/end")[0]["reason"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert len(stub.requests) == 1  # the oversized step was never sent
    assert_requests_valid(stub)


def test_bad_input_for_file_tools(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    (work / "sub").mkdir()
    with open(work / "sparse.bin", "wb") as sparse:
        os.truncate(sparse.fileno(), 2 * 1024**3)  # 2 GiB of holes: no disk used
    with open(work / "long.txt", "w") as long_text:
        long_text.write("".join(f"line {n}\n" for n in range(1, 3001)))
        os.truncate(long_text.fileno(), 2 * 1024**3)  # text first, then holes
    os.mkfifo(work / "fifo")
    (work / "twice.txt").write_text("same\nsame\n")
    (work / "f.txt").write_text("first\n")

    def call(name: str, **arguments: str) -> tuple[str, str]:
        return (name, json.dumps(arguments))

    calls = (
        call("read", file_path="sub"),
        call("read", file_path="sparse.bin"),
        call("read", file_path="long.txt"),
        call("read", file_path="fifo"),
        call("read", file_path="demo.txt"),
        call("edit", file_path="demo.txt", old_string="Goodbye", new_string="Farewell"),
        call("read", file_path="twice.txt"),
        call("edit", file_path="twice.txt", old_string="same", new_string="other"),
        call("read", file_path="f.txt"),
        call("bash", command="echo more >> f.txt"),
        call("write", file_path="f.txt", content="replaced\n"),
    )
    stub.enqueue(ToolCalls(calls))
    result = run(dsh_env, work, "--allow", "all", stdin="try these\n")
    assert result.returncode == 0, result.stderr
    events = assert_log_whole(home)
    contents = [r["content"] for r in data_of(events, "tool/result")]
    assert len(contents) == len(calls)
    (
        directory,
        sparse_result,
        long_result,
        fifo,
        _,
        not_found,
        _,
        two,
        _,
        appended,
        changed,
    ) = contents
    assert directory == "Error: cannot read sub: it is a directory (glob lists the files in it)"
    assert (
        sparse_result
        == "Error: cannot read sparse.bin: it is a binary file (a NUL byte at offset 0)"
    )
    assert long_result.startswith("     1\tline 1\n")  # not an error: a bounded piece of it
    assert long_result.endswith(
        "\n  2000\tline 2000\n[read stopped at line 2,000 (2 GiB more follow) "
        "(2,000-line limit); read on with offset=2001]"
    )
    assert fifo == "Error: cannot read fifo: it is a named pipe (FIFO), not a regular file"
    assert not_found.startswith("Error: cannot edit demo.txt: old_string was not found in it")
    assert two.startswith("Error: cannot edit twice.txt: old_string occurs 2 times (at lines 1, 2)")
    assert appended == "(no output)"
    assert changed.startswith(
        "Error: cannot write f.txt: it changed on disk since it was read "
        "(its size went from 6 to 11 bytes)"
    )
    assert (work / "demo.txt").read_text() == "Hello\n"
    assert (work / "twice.txt").read_text() == "same\nsame\n"
    assert (work / "f.txt").read_text() == "first\nmore\n"
    failed = [line for line in tool_lines(result.stderr) if line.startswith("dsh: [tool failed ")]
    assert len(failed) == 6
    assert data_of(events, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]
    assert result.stdout.startswith("Tool results: [read] Error: cannot read sub: ")
    assert_requests_valid(stub)


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root reads a file whatever its permissions: the refusal cannot be seen as root",
)
def test_read_of_a_file_without_read_permission(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    secret = work / "secret.txt"
    secret.write_text("hidden\n")
    secret.chmod(0)
    stub.enqueue(ToolCalls((("read", '{"file_path": "secret.txt"}'),)))
    result = run(dsh_env, work, stdin="read it\n")
    assert result.returncode == 0, result.stderr
    events = assert_log_whole(home)
    (refused,) = data_of(events, "tool/result")
    assert refused["content"] == (
        "Error: cannot read secret.txt: [Errno 13] Permission denied: " + repr(str(secret))
    )
    assert data_of(events, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]
    assert_requests_valid(stub)


def test_a_turn_that_no_longer_fits_names_what_a_pipe_can_do_and_why_compacting_cannot(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    """The audit's run: a 5,000-token window that the system prompt and tools mostly fill.
    The second line does not fit; compacting the first exchange would need a summary
    request as large as the conversation, so none is tried, and the line says so. ``/compact``
    and ``/new`` do not exist on a pipe: the advice is what a pipe can do."""
    lines = "".join(f"message number {n} " + "lorem ipsum " * 150 + "\n" for n in range(3))
    result = run(dsh_env, work, "-q", "--context-window", "5000", stdin=lines)
    assert result.returncode == 1, result.stderr
    rejected = [line for line in result.stdout.splitlines() if line.startswith("[turn rej")]
    assert len(rejected) == 2
    assert (
        "compacting cannot help: the request for its summary would not fit either" in (rejected[0])
    )
    assert rejected[0].endswith(
        "start a fresh session (send the rest to a new dsh run, without --continue or "
        "--resume), or shorten the message"
    )
    assert "/compact" not in result.stdout and "/new" not in result.stdout
    assert len(stub.requests) == 1  # no summary request was sent
