"""The agent on a pipe, end to end: the real ``dsh`` process, real pipes, the stub server.

Each test runs :data:`tests.support.DSH` in a working directory of its own (holding a
``demo.txt`` with ``Hello`` in it) against a stub server of its own, so request numbers and call
ids start afresh and a scripted behaviour left over by a failed test cannot leak into the next.
What is checked: stdout exactly where it is stable, the ``dsh: [tool ...]`` lines on stderr, the
exit status, the session log read independently of ``dsh_core.session`` (every call the model
asked for answered once, in order), and every request the stub received checked against
DeepSeek's two 400 rules.

Nothing here waits for a time: the signal tests wait for the ``tool/call`` line in the log and
for the command's process in ``/proc``; :data:`HANG` bounds a hang, it measures no speed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import StubServer, ToolCalls, validate_request
from dsh_core.tools.sandbox import probe_bwrap
from tests.support import (
    CANARY_KEY,
    DSH,
    assert_no_canary,
    log_problems,
    proc_status,
    wait_until,
)

pytestmark = pytest.mark.slow

HANG = 60.0
"""Seconds after which a run or a wait is a hang: a bound, not a measure of speed."""

REFUSED_SHELL = 'tool "bash" needs approval and stdin is not a terminal; run with --allow shell'
REFUSED_WRITE = 'tool "edit" needs approval and stdin is not a terminal; run with --allow write'
REFUSED_READ = 'tool "read" needs approval and stdin is not a terminal; run with --allow read'
BUILTIN_TOOLS = ["read", "glob", "grep", "write", "edit", "bash", "subagent"]
"""The tools of a session with no skill and no MCP server (SPEC 7 and 13)."""


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """A stub server for this test alone: its requests, its queue, call ids from ``call_1_0``."""
    with StubServer() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The working directory dsh runs in, with ``demo.txt`` holding ``Hello``."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "demo.txt").write_text("Hello\n")
    return path


# -- running dsh --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A finished dsh run."""

    returncode: int
    stdout: str
    stderr: str
    raw_stderr: bytes


def run_dsh(env: dict[str, str], cwd: Path, *args: str, stdin: str = "") -> Run:
    """Run dsh to its end in ``cwd`` with ``stdin`` on a pipe."""
    result = subprocess.run(
        [*DSH, *args],
        input=stdin.encode(),
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=HANG,
        check=False,
    )
    return Run(
        result.returncode,
        result.stdout.decode("utf-8", "surrogateescape"),
        result.stderr.decode("utf-8", "surrogateescape"),
        result.stderr,
    )


def start_dsh(
    env: dict[str, str], cwd: Path, *args: str, stdin: int = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    """Start dsh in ``cwd`` with pipes on stdout and stderr (and on stdin unless told)."""
    return subprocess.Popen(
        [*DSH, *args],
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


SANDBOX_NOTE = re.compile(r" \((?:sandboxed: writes [^\n]*|not sandboxed[^\n]*)\)$")
"""What a ``bash`` call line ends with: whether it runs sandboxed depends on the machine
(bubblewrap installed and working, or not), and ``test_the_call_line_says_whether_it_is_
sandboxed`` checks it; the other tests compare the lines without it."""


def tool_lines(stderr: str) -> list[str]:
    """The transcript's tool lines on stderr (a line may go on, indented, on the next), without
    the sandbox note of a ``bash`` call."""
    lines: list[str] = []
    for line in stderr.split("\n"):
        if line.startswith("dsh: [tool "):
            lines.append(
                SANDBOX_NOTE.sub("", line) if line.startswith("dsh: [tool bash]") else line
            )
        elif line.startswith("  ") and lines:
            lines[-1] += "\n" + line
    return lines


# -- reading the session log, independently of dsh_core.session ---------------------------------


def log_path(home: Path) -> Path:
    (path,) = home.rglob("session.jsonl")
    return path


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a log (header left out); a torn last line is not an event yet."""
    events = []
    for line in path.read_bytes().split(b"\n")[1:]:
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    return events


def data_of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event["data"] for event in events if event["type"] == kind]


def pairing_problems(events: list[dict[str, Any]]) -> list[str]:
    """Calls and results out of order: every call an ``assistant/message`` asks for is
    answered by exactly one ``tool/result``, in the order asked, before anything else of the
    conversation; ``approval/decided`` only for the call whose turn it is, ``tool/call`` for a
    call not answered yet (reads run side by side start before the first is answered)."""
    problems: list[str] = []
    waiting: list[str] = []
    started: set[str] = set()
    for number, event in enumerate(events):
        kind, data = event["type"], event["data"]
        where = f"event {number} ({kind})"
        if kind in ("assistant/message", "user/message", "turn/start", "turn/end") and waiting:
            problems.append(f"{where}: calls {waiting} left unanswered")
            waiting = []
        if kind == "assistant/message":
            waiting = [call["id"] for call in data.get("tool_calls") or []]
        elif kind in ("tool/call", "approval/decided", "tool/result"):
            call_id = data.get("call_id")
            if kind == "tool/call" and call_id in waiting:
                pass  # one of a batch of reads may start before the call due is answered
            elif not waiting or call_id != waiting[0]:
                problems.append(f"{where}: {call_id} is not the call due ({waiting[:1]})")
                continue
            if kind == "tool/call":
                if call_id in started:
                    problems.append(f"{where}: {call_id} started twice")
                started.add(call_id)
            elif kind == "tool/result":
                waiting.pop(0)
    if waiting:
        problems.append(f"end of log: calls {waiting} left unanswered")
    return problems


def assert_log_whole(home: Path) -> list[dict[str, Any]]:
    """The log is whole (``scan_log``'s rules) and its calls are paired; its events."""
    path = log_path(home)
    events = read_events(path)
    assert log_problems(path) + pairing_problems(events) == []
    return events


def assert_requests_valid(stub: StubServer) -> None:
    """No request broke DeepSeek's tool-call rules (the stub answered none with a 400)."""
    problems = [validate_request(request) for request in stub.requests]
    assert problems == [None] * len(problems)


def has_event(home: Path, kind: str) -> bool:
    """Whether a log under ``home`` holds an event of ``kind`` yet (read as it is written)."""
    return any(e["type"] == kind for path in home.rglob("session.jsonl") for e in read_events(path))


def wait_for_event(proc: subprocess.Popen[bytes], home: Path, kind: str) -> None:
    def seen() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"dsh exited ({proc.returncode}) before {kind} was logged")
        return has_event(home, kind)

    wait_until(seen, f"{kind} in the session log", timeout=HANG)


# -- processes, from /proc ----------------------------------------------------------------------


def cmdline(pid: int) -> list[str]:
    """A process's arguments; empty when it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]]


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` now, from each process's parent in ``/proc/*/stat``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def processes_with_argument(argument: str) -> list[int]:
    """Every process, anywhere, one of whose arguments is ``argument``."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and argument in cmdline(int(p))]


def wait_sleep_below(proc: subprocess.Popen[bytes], argument: str) -> int:
    """The pid of the ``sleep <argument>`` that dsh runs, once it runs."""
    found: list[int] = []

    def running() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"dsh exited ({proc.returncode}) before its command ran")
        found[:] = [p for p in descendants(proc.pid) if cmdline(p)[-2:] == ["sleep", argument]]
        return bool(found)

    wait_until(running, f"sleep {argument} under dsh", timeout=HANG)
    return found[0]


def unique_seconds() -> str:
    """``1000.<digits>``: a sleep no other test (or engineer) on this machine runs."""
    return f"1000.{uuid.uuid4().int % 10**12:012d}"


# 1. A turn with tool steps, end to end.


def test_a_turn_with_a_tool_step(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run_dsh(dsh_env, work, stdin="toolread\n")
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
    result = run_dsh(dsh_env, work, stdin=f"{word}\n")
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
    result = run_dsh(dsh_env, work, stdin="toolfail\n")
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


def test_the_pairing_check_can_fail() -> None:
    """The independent check above finds what it is there to find."""

    def event(kind: str, **data: Any) -> dict[str, Any]:
        return {"type": kind, "data": data}

    asked = event("assistant/message", tool_calls=[{"id": "a"}, {"id": "b"}])
    answer_a, answer_b = event("tool/result", call_id="a"), event("tool/result", call_id="b")
    end = event("turn/end")
    assert pairing_problems([asked, answer_a, answer_b, end]) == []
    assert pairing_problems([asked, answer_b, answer_a, end]) != []  # out of order
    assert pairing_problems([asked, answer_a, end]) != []  # b unanswered
    assert pairing_problems([asked, answer_a, answer_b, answer_b, end]) != []  # twice
    assert pairing_problems([asked, answer_a]) != []  # the log ends with b open
    started = event("tool/call", call_id="b")
    assert pairing_problems([asked, started, answer_a, answer_b]) == []  # side by side
    assert pairing_problems([asked, started, started, answer_a, answer_b]) != []  # twice
    approved = event("approval/decided", call_id="b")
    assert pairing_problems([asked, approved, answer_a, answer_b]) != []  # b before a


# 2. Approval on a pipe.


@pytest.mark.parametrize("one_shot", [False, True], ids=["pipe", "one-shot"])
def test_bash_is_refused_on_a_pipe_without_allow(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer, one_shot: bool
) -> None:
    if one_shot:  # dsh "question": no terminal either, so the same refusal
        result = run_dsh(dsh_env, work, "toolbash")
    else:
        result = run_dsh(dsh_env, work, stdin="toolbash\n")
    assert result.returncode == 0, result.stderr
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
    result = run_dsh(dsh_env, work, "--allow", "shell", stdin="toolbash\n")
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
    result = run_dsh(dsh_env, work, stdin="tooledit\n")
    assert result.returncode == 0, result.stderr
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
    result = run_dsh(dsh_env, work, "--allow", "write", stdin="tooledit\n")
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
    result = run_dsh(dsh_env, work, "--no-tools", stdin="toolread\n")
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


# 3. A line `y` on the pipe never approves.


def test_a_y_line_is_the_next_turn_not_an_approval(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    marker = work / "ran"
    stub.enqueue(ToolCalls((("bash", json.dumps({"command": f"touch {marker}"})),)))
    result = run_dsh(dsh_env, work, stdin="run it\ny\n")  # `y` is waiting while the call is
    assert result.returncode == 0, result.stderr
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
    result = run_dsh(dsh_env, work, stdin="toolbash\ny\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\nYou said: y\n")
    assert f"dsh: [tool refused bash] {REFUSED_SHELL}" in tool_lines(result.stderr)
    events = assert_log_whole(home)
    assert [m["text"] for m in data_of(events, "user/message")] == ["toolbash", "y"]
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["unavailable"]
    assert_requests_valid(stub)


# 4. Paths that lead out of the working directory, and names that could drive a terminal.


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
    result = run_dsh(dsh_env, work, stdin="read those\n")
    assert result.returncode == 0, result.stderr
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
    result = run_dsh(dsh_env, work, "--allow", "read", stdin="read those\n")
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
    result = run_dsh(dsh_env, work, stdin="read it\n")
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


# 5. The API key reaches no command, no output, no file.


def test_the_key_is_nowhere_even_after_env(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    dsh_env["COPIED_KEY"] = f"Bearer {CANARY_KEY}"  # a copy under another name: dropped too
    stub.enqueue(ToolCalls((("bash", '{"command": "env; seq 1 20000"}'),)))
    result = run_dsh(dsh_env, work, "--allow", "shell", stdin="show me\n")
    assert result.returncode == 0, result.stderr
    assert_no_canary(home, result.stdout, result.raw_stderr)
    assert all(CANARY_KEY not in json.dumps(request) for request in stub.requests)

    events = assert_log_whole(home)
    (output,) = data_of(events, "tool/result")
    saved = Path(output["output_file"])
    assert output["truncated"] is True and output["exit_code"] == 0
    assert saved.parent == log_path(home).parent / "tool-output"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert f"the whole output is in {saved}]" in output["content"]
    whole = saved.read_text()
    assert "DEEPSEEK_BASE_URL=" in whole  # env really ran, and wrote the environment
    assert whole.endswith("\n19999\n20000\n")
    lines = tool_lines(result.stderr)
    assert lines[0] == "dsh: [tool bash] $ env; seq 1 20000"
    assert lines[1].endswith(f" lines, cut short for the model (all of it in {saved})")
    assert_requests_valid(stub)


# 6. 100 MB of output: capped for the model, its first 64 MiB in the file, memory bounded.


def test_a_hundred_megabytes_of_output(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    """Peak memory is measured twice in one process: after a small command, then after the
    flood. Under 150 MB is the contract; the flood adding little is what shows that the output
    is not held (holding it costs 100 MB, which alone would still fit under 150 MB)."""
    size = 100_000_000
    command = f"head -c {size} /dev/zero | tr '\\0' x"
    proc = start_dsh(dsh_env, work, "--allow", "shell")
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"toolbash\n")
        proc.stdin.flush()
        small = proc.stdout.readline()  # the turn is over: its final answer has arrived
        before_kib = proc_status(proc.pid)["VmHWM"]
        stub.enqueue(ToolCalls((("bash", json.dumps({"command": command})),)))
        proc.stdin.write(b"flood\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        peak_kib = proc_status(proc.pid)["VmHWM"]  # dsh's own peak, before it exits
        out, err = proc.communicate(timeout=HANG)  # closes stdin: end of input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert small.startswith(b"Tool results: [bash] total ")
    assert answer == b"Tool results: [bash] " + b"x" * 80 + b"...\n"
    assert out == b""
    print(f"dsh peaked at {before_kib} KiB, then at {peak_kib} KiB")
    assert peak_kib < 150 * 1024
    assert peak_kib - before_kib < 50 * 1024

    events = assert_log_whole(home)
    output = data_of(events, "tool/result")[-1]
    saved = output["output_file"]
    assert output["truncated"] is True
    assert output["content"] == (
        "x" * 15_000
        + "\n[... 99,970,000 of 100,000,000 characters cut here; the first 64 MiB of the output "
        + f"are in {saved}; the rest was not saved]\n"
        + "x" * 15_000
    )
    assert os.path.getsize(saved) == 64 * 1024 * 1024  # SPEC 10.8
    with open(saved, "rb") as file:
        while chunk := file.read(1 << 20):
            assert chunk.count(b"x") == len(chunk)
    assert_requests_valid(stub)


# 7. A background child holding the pipe open.


def test_a_background_child_does_not_hold_the_turn(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    seconds = unique_seconds()
    command = f"sleep {seconds} & echo started"
    stub.enqueue(ToolCalls((("bash", json.dumps({"command": command})),)))
    try:
        result = run_dsh(dsh_env, work, "--allow", "shell", stdin="go\n")
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


# 8. A command that hangs, ended by a signal to dsh.


@pytest.mark.parametrize(
    ("sig", "status", "reason"),
    [
        (signal.SIGTERM, 143, "shutdown"),
        (signal.SIGINT, 130, "user"),
        (signal.SIGHUP, 129, "shutdown"),  # the terminal went away
    ],
    ids=["SIGTERM", "SIGINT", "SIGHUP"],
)
@pytest.mark.parametrize("one_shot", [False, True], ids=["pipe", "one-shot"])
def test_a_signal_ends_a_hanging_command(
    dsh_env: dict[str, str],
    home: Path,
    work: Path,
    stub: StubServer,
    sig: int,
    status: int,
    reason: str,
    one_shot: bool,
) -> None:
    if one_shot:
        proc = start_dsh(dsh_env, work, "--allow", "shell", "toolhang", stdin=subprocess.DEVNULL)
    else:
        proc = start_dsh(dsh_env, work, "--allow", "shell")
    sleeper = 0
    try:
        if proc.stdin is not None:
            proc.stdin.write(b"toolhang\n")
            proc.stdin.flush()
        wait_for_event(proc, home, "tool/call")
        sleeper = wait_sleep_below(proc, "1000")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err
    assert out == f"[turn aborted] {reason}\n".encode()
    assert b"Traceback" not in err
    assert cmdline(sleeper) != ["sleep", "1000"]  # ended with the turn, and reaped

    events = assert_log_whole(home)
    (outcome,) = data_of(events, "tool/result")
    assert outcome["is_error"] is True
    assert outcome["error"]["code"] == "ABORTED"
    assert outcome["content"].startswith("Error: the command was cancelled (sent SIGINT)")
    assert data_of(events, "turn/end") == [
        {"turn": 1, "reason": {"kind": "aborted", "reason": reason}}
    ]
    assert_requests_valid(stub)


# 9. SIGKILL between tool/call and tool/result, then resume.


@pytest.mark.parametrize("two_calls", [False, True], ids=["toolhang", "two-calls"])
def test_sigkill_while_a_command_runs_then_continue(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer, two_calls: bool
) -> None:
    """``toolhang``; or a step of two calls, the hanging one first, so that the second has not
    started when dsh dies: one call's outcome is unknown, the other's never began."""
    seconds = "1000"
    if two_calls:
        seconds = unique_seconds()
        hang = json.dumps({"command": f"sleep {seconds}"})
        stub.enqueue(ToolCalls((("bash", hang), ("read", '{"file_path": "demo.txt"}'))))
    proc = start_dsh(dsh_env, work, "--allow", "shell")
    sleeper = 0
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"hang on\n" if two_calls else b"toolhang\n")
        proc.stdin.flush()
        wait_for_event(proc, home, "tool/call")
        sleeper = wait_sleep_below(proc, seconds)
        proc.kill()
        proc.communicate(timeout=HANG)
        assert proc.returncode == -signal.SIGKILL
        assert not has_event(home, "tool/result")  # killed between the call and its result

        # Without the sandbox, a SIGKILLed dsh cannot take its command with it: the sleep
        # lives on, orphaned, until we end it below (the sandbox issue fixes that, with
        # bubblewrap's --die-with-parent). Resuming while it still runs also shows that it
        # holds nothing of dsh's: the session log's lock was not inherited.
        result = run_dsh(dsh_env, work, "-c", "--allow", "shell", stdin="hello again\n")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if sleeper and cmdline(sleeper)[-2:] == ["sleep", seconds]:
            os.kill(sleeper, signal.SIGKILL)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "[turn interrupted by a previous process exit]\nYou said: hello again\n"
    )
    calls = 2 if two_calls else 1
    assert (
        f"dsh: turn 1 was left open by a process that exited; answered its {calls} unfinished "
        "tool call(s) and closed it as interrupted\n"
    ) in result.stderr

    events = assert_log_whole(home)
    (started,) = data_of(events, "tool/call")  # the second call never started
    results = data_of(events, "tool/result")
    assert [(r["call_id"], r["is_error"], r["error"]["code"]) for r in results] == [
        (started["call_id"], True, "TOOL_OUTCOME_UNKNOWN"),
        *([("call_1_1", True, "TOOL_NOT_STARTED")] if two_calls else []),
    ]
    assert [end["reason"]["kind"] for end in data_of(events, "turn/end")] == [
        "interrupted",
        "completed",
    ]
    # The request after the crash carries the calls and their repaired results, and is valid.
    last = stub.requests[-1]["messages"]
    assert [m["role"] for m in last[-2 - calls :]] == ["assistant"] + ["tool"] * calls + ["user"]
    assert [m["content"] for m in last[-1 - calls : -1]] == [
        f"Error: {r['error']['message']}" for r in results
    ]
    assert_requests_valid(stub)


# 10. The model calling the same tool at every step, until the step limit.


def test_the_step_limit_ends_a_looping_model(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run_dsh(dsh_env, work, "--max-steps", "3", stdin="toolloop\nhello\n")
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


# 11. Calls that cannot run: bad arguments, a tool that does not exist.


def test_malformed_and_unknown_calls_are_results(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    result = run_dsh(dsh_env, work, stdin="toolbad\ntoolunknown\n")
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


# 12. Many calls in one step; one enormous argument string.


def test_a_hundred_calls_in_one_step(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    for number in range(100):
        (work / f"n{number}.txt").write_text(f"note {number}\n")
    calls = tuple(("read", json.dumps({"file_path": f"n{n}.txt"})) for n in range(100))
    stub.enqueue(ToolCalls(calls, interleaved=True))
    result = run_dsh(dsh_env, work, stdin="read them all\n")
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
    result = run_dsh(dsh_env, work, "--allow", "write", *window, stdin="write it\n")
    assert result.returncode == 1, result.stderr
    assert re.fullmatch(
        r"\[turn failed CONTEXT_WINDOW_EXCEEDED\] the conversation no longer fits the model's "
        r"context window \(about [\d,]+ tokens, the window is 200,000\): compact it "
        r"\(/compact\), start a fresh session \(/new, or dsh without --continue\), or shorten "
        r"the message\n",
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


# 13. Bad input for the file tools: each an error result, and the turn goes on.


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
    result = run_dsh(dsh_env, work, "--allow", "all", stdin="try these\n")
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
    result = run_dsh(dsh_env, work, stdin="read it\n")
    assert result.returncode == 0, result.stderr
    events = assert_log_whole(home)
    (refused,) = data_of(events, "tool/result")
    assert refused["content"] == (
        "Error: cannot read secret.txt: [Errno 13] Permission denied: " + repr(str(secret))
    )
    assert data_of(events, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]
    assert_requests_valid(stub)


def test_the_call_line_says_whether_it_is_sandboxed(
    dsh_env: dict[str, str], home: Path, work: Path, tmp_path: Path
) -> None:
    result = run_dsh(dsh_env, work, "--allow", "shell", stdin="toolbash\n")
    (line,) = [x for x in result.stderr.split("\n") if x.startswith("dsh: [tool bash] $")]
    if probe_bwrap(dsh_env.get("PATH")) is None:
        assert line == (
            f"dsh: [tool bash] $ ls -la (sandboxed: writes only {work}, reads all but your "
            "credentials, no network)"
        )
    else:
        assert line.startswith("dsh: [tool bash] $ ls -la (not sandboxed: ")
    # Without bwrap on the PATH (whatever this machine has): unsandboxed, said once per run.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("bash", "sh", "ls"):
        found = shutil.which(program)
        assert found is not None
        (bin_dir / program).symlink_to(found)
    bare = {**dsh_env, "PATH": str(bin_dir)}
    result = run_dsh(bare, work, "--allow", "shell", stdin="toolbash\ntoolbash\n")
    lines = [x for x in result.stderr.split("\n") if x.startswith("dsh: [tool bash] $")]
    unsandboxed = "(not sandboxed: bubblewrap is not installed (no bwrap on PATH))"
    assert lines == [f"dsh: [tool bash] $ ls -la {unsandboxed}"] * 2
    notices = [x for x in result.stderr.split("\n") if "without a sandbox" in x]
    assert notices == [
        "dsh: commands run without a sandbox: bubblewrap is not installed (no bwrap on PATH); "
        "to have one: Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap"
    ]
    # --sandbox on without it: a startup failure naming the package, and nothing written.
    refused = run_dsh(bare, work, "--sandbox", "on", stdin="hello\n")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith("dsh: startup failed: --sandbox on: bubblewrap is not")
    assert "apt install bubblewrap" in refused.stderr
    off = run_dsh(dsh_env, work, "--allow", "shell", "--sandbox", "off", stdin="toolbash\n")
    assert "dsh: [tool bash] $ ls -la (not sandboxed)\n" in off.stderr
