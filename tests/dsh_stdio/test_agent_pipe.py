"""The agent on a pipe, end to end: the real ``dsh`` process, real pipes, the stub server.

What is here needs the process: signals, a SIGKILL mid-call, the process's own memory, the
environment its commands inherit, how it finds ``bwrap``. What does not (tool steps, approval
on a pipe, paths, calls that cannot run) runs in-process in ``test_pipe.py``, which imports
the log checks below.

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
from dsh_core.trust.sandbox import probe_bwrap
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
BUILTIN_TOOLS = [
    "read",
    "glob",
    "grep",
    "write",
    "edit",
    "bash",
    "subagent",
    "todo_write",
    "ask_user_question",
    "web_fetch",
    "job_output",
    "job_list",
    "job_kill",
]
"""The tools of a session with no skill and no MCP server, and no search endpoint (SPEC 7, 13
and 16: ``web_search`` is offered only where it can work)."""


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
            unasked = data.get("outcome") in ("granted-by-flag", "allowed-always")
            if (kind == "tool/call" or (kind == "approval/decided" and unasked)) and (
                call_id in waiting
            ):
                pass  # one of a batch of reads (granted ones too) may start before the call due
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
    granted = event("approval/decided", call_id="b", outcome="granted-by-flag")
    assert pairing_problems([asked, granted, answer_a, answer_b]) == []  # a batch's read


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
        before_kib = proc_status(proc.pid, fds=False)["VmHWM"]
        stub.enqueue(ToolCalls((("bash", json.dumps({"command": command})),)))
        proc.stdin.write(b"flood\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        peak_kib = proc_status(proc.pid, fds=False)["VmHWM"]  # dsh's own peak, before it exits
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


# 10. A grep over a tree big enough to divide (dsh_core.tools.tree.divided): the same lines.


def test_a_grep_over_thousands_of_files_finds_every_line_in_walk_order(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    # 3,000 files: past the 2,000 after which the walk goes on in two processes.
    planted = {"d00/f000.txt": 1, "d14/f050.txt": 3, "d29/f099.txt": 2, "d29/deep/f7.txt": 1}
    for d in range(30):
        (work / f"d{d:02}").mkdir()
        for f in range(100):
            (work / f"d{d:02}" / f"f{f:03}.txt").write_text("nothing\n")
    (work / "d29" / "deep").mkdir()
    for name, line in planted.items():
        (work / name).write_text("nothing\n" * (line - 1) + f"needle in {name}\n")
    stub.enqueue(ToolCalls((("grep", '{"pattern": "needle in"}'),)))
    result = run_dsh(dsh_env, work, stdin="find the needles\n")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    (output,) = data_of(assert_log_whole(home), "tool/result")
    assert output["content"] == "\n".join(
        f"{name}:{line}:needle in {name}" for name, line in planted.items()
    )
    assert_requests_valid(stub)
