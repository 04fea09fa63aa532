"""The ``bash`` tool on real processes: results, the cap, timeouts, cancellation, what it leaks.

Tests wait for events (a line the command writes to a FIFO, a process group emptying), never
for durations; the shortened :data:`FAST` escalation only keeps the module quick.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.loop import Conversation
from dsh_core.chain import error_chain
from dsh_core.errors import ABORTED, TOOL_FAILED
from dsh_core.model.seam import Finish, ToolCall, ToolCallRequest
from dsh_core.session import SessionStore
from dsh_core.session.events import ToolResult, TurnEnd
from dsh_core.testing import ScriptedModel
from dsh_core.tools import Access, Toolbox, ToolError, ToolOutput, process
from dsh_core.tools.process import (
    CANCEL_ESCALATION,
    SAVED_OUTPUT_LIMIT,
    TIMEOUT_ESCALATION,
    Timings,
)
from dsh_core.tools.shell import LEAVING_NOTE, BashTool, shell_argv
from dsh_core.tools.specs import DEFAULT_TIMEOUT_S, OUTPUT_LIMIT
from dsh_core.trust.launchers import Launch
from dsh_core.trust.workspace import Workspace, child_environment
from tests.conftest import CANARY_KEY
from tests.dsh_core.session.test_session import numbered, ticking

T = TypeVar("T")

FAST = Timings(
    on_cancel=((0.0, signal.SIGINT), (0.2, signal.SIGTERM), (0.4, signal.SIGKILL)),
    on_timeout=((0.0, signal.SIGTERM), (0.2, signal.SIGKILL)),
    pipe_grace=0.1,
)
ROOT = Path(__file__).resolve().parents[3]


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


@pytest.fixture(autouse=True)
def sigint_not_ignored() -> Iterator[None]:
    """Handle SIGINT, as dsh's front door does, so commands start with its default action.

    A test run started with SIGINT ignored (a background job of a script) would otherwise pass
    the ignoring on to every command, and the escalation's first step would do nothing.
    """
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "work"
    root.mkdir()
    return Workspace(root, tmp_path / "home" / "outputs")


@pytest.fixture
def bash(workspace: Workspace) -> BashTool:
    return BashTool(workspace, timings=FAST)


def bash_run(tool: BashTool, command: str, **arguments: Any) -> ToolOutput:
    return run(tool.prepare({"command": command, **arguments}).run())


class Fifo:
    """A named pipe a command writes lines to, so the test can wait for what it did."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        # Opened for writing too: the pipe never reads as ended, and a writer never blocks.
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.buffer = b""

    async def line(self) -> str:
        async with asyncio.timeout(60):  # a bound for a broken test, not a measurement
            while b"\n" not in self.buffer:
                await wait_readable(self.fd)
                with contextlib.suppress(BlockingIOError):
                    self.buffer += os.read(self.fd, 4096)
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


async def wait_readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def resolve() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, resolve)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Fifo]:
    pipe = Fifo(tmp_path / "events")
    yield pipe
    os.close(pipe.fd)


def live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are alive (a zombie has no life left to end)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def wait_group_gone(pgid: int) -> None:
    """Wait until group ``pgid`` has no live process (SIGKILL lands asynchronously)."""
    deadline = time.monotonic() + 30  # a bound for a broken product, not a measurement
    while (members := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in members:  # leave nothing behind, even when the test fails
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert members == []


async def cancel_when_told(
    tool: BashTool, command: str, fifo: Fifo, cancels: int = 1
) -> tuple[ToolOutput, int]:
    """Run ``command``; cancel the call when it writes a line, again at each further line.

    Returns the output and the first line (the command's ``$$``: its process group).
    """
    invocation = tool.prepare({"command": command})

    async def go() -> ToolOutput:
        return await invocation.run()

    task = asyncio.create_task(go())
    first = await fifo.line()
    task.cancel()
    for _ in range(cancels - 1):
        await fifo.line()
        task.cancel()
    return await task, int(first)


# --- arguments ----------------------------------------------------------------------------------


def test_spec_describe_and_access(bash: BashTool) -> None:
    assert bash.spec.name == "bash"
    assert bash.spec.parameters["required"] == ["command"]
    assert bash.describe({"command": "ls -la\necho 'x'"}) == "$ ls -la\necho 'x'"
    invocation = bash.prepare({"command": "pytest -q", "timeout_s": 300})
    assert invocation.access == Access("shell", note="(not sandboxed)", scope="pytest")
    assert invocation.summary == "$ pytest -q"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "command must be a non-empty string"),
        ({"command": ""}, "command must be a non-empty string"),
        ({"command": " \n"}, "command must be a non-empty string"),
        ({"command": ["ls"]}, "command must be a non-empty string"),
        ({"command": "ls\0"}, "command must not contain a NUL character"),
        ({"command": "ls", "timeout_s": 0}, "timeout_s must be a number of seconds"),
        ({"command": "ls", "timeout_s": 601}, "from 1 to 600, not 601"),
        ({"command": "ls", "timeout_s": "10"}, "not '10'"),
        ({"command": "ls", "timeout_s": True}, "not True"),
        ({"command": "ls", "timeout_s": float("nan")}, "not nan"),
        ({"command": "ls", "timeout": 5}, 'unknown argument "timeout"; bash takes command and'),
        ({"command": "ls", "a": 1, "b": 2}, 'unknown arguments "a", "b"'),
    ],
)
def test_bad_arguments(bash: BashTool, arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ToolError) as caught:
        bash.prepare(arguments)
    assert caught.value.message.startswith("invalid arguments: ")
    assert problem in caught.value.message


@pytest.mark.parametrize("timeout_s", [None, 1, 1.5, 600])
def test_good_timeouts(bash: BashTool, timeout_s: float | None) -> None:
    bash.prepare({"command": "true", "timeout_s": timeout_s})


def test_the_default_timings_are_the_specs() -> None:
    assert DEFAULT_TIMEOUT_S == 120
    assert CANCEL_ESCALATION == (
        (0.0, signal.SIGINT),
        (2.0, signal.SIGTERM),
        (5.0, signal.SIGKILL),
    )
    assert TIMEOUT_ESCALATION[0] == (0.0, signal.SIGTERM)
    assert TIMEOUT_ESCALATION[-1][1] == signal.SIGKILL


# --- results ------------------------------------------------------------------------------------


def test_exit_zero_and_non_zero(bash: BashTool) -> None:
    assert bash_run(bash, "echo hello") == ToolOutput("hello\n", exit_code=0)
    assert bash_run(bash, "true") == ToolOutput("", exit_code=0)
    assert bash_run(bash, "echo out; exit 3") == ToolOutput("out\n[exit code: 3]", exit_code=3)
    assert bash_run(bash, "printf abc; exit 1") == ToolOutput("abc\n[exit code: 1]", exit_code=1)
    assert bash_run(bash, "exit 7") == ToolOutput("[exit code: 7]", exit_code=7)


def test_killed_by_a_signal_says_which(bash: BashTool) -> None:
    output = bash_run(bash, "echo before; kill -9 $$")
    assert output == ToolOutput("before\n[killed by signal 9 (SIGKILL)]", exit_code=137)


def test_stdout_and_stderr_interleave(bash: BashTool) -> None:
    output = bash_run(bash, "for i in 1 2 3; do echo out$i; echo err$i >&2; done")
    assert output.content == "out1\nerr1\nout2\nerr2\nout3\nerr3\n"


def test_where_and_how_it_runs(bash: BashTool, workspace: Workspace) -> None:
    # The working directory; stdin /dev/null (cat would wait forever on anything else); its
    # own session and process group, not ours.
    command = "pwd; cat; readlink /proc/$$/fd/0; echo $$; cut -d' ' -f5,6 /proc/$$/stat"
    lines = bash_run(bash, command).content.splitlines()
    assert lines[:2] == [str(workspace.root), "/dev/null"]
    pid = lines[2]
    assert lines[3] == f"{pid} {pid}"
    assert int(pid) != os.getpgrp()


def test_bash_else_sh(workspace: Workspace, tmp_path: Path) -> None:
    tool = BashTool(workspace, timings=FAST)
    output = bash_run(tool, 'echo "$0"; echo "${BASH_VERSION:+bash}"')
    assert output.content.splitlines()[0].endswith("/bash")
    assert output.content.splitlines()[1] == "bash"
    # A PATH with sh and no bash: the command runs with sh.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to("/bin/sh")
    workspace.environment = {"PATH": str(bin_dir)}
    output = bash_run(tool, 'echo "$0"; echo "${BASH_VERSION:-no bash}"')
    assert output.content == f"{bin_dir}/sh\nno bash\n"
    assert shell_argv("ls", {"PATH": str(tmp_path / "empty")}) == ["/bin/sh", "-c", "ls"]


def test_a_launcher_wraps_the_command_line(workspace: Workspace) -> None:
    class Wrapped:
        note = "(wrapped)"

        @contextlib.contextmanager
        def launch(self, argv: Any) -> Iterator[Launch]:
            launch = Launch(["/usr/bin/env", "WRAPPED=yes", *argv])
            yield launch
            launch.notes.append("[undone afterwards]")  # a note is the result's last line

    tool = BashTool(workspace, launcher=Wrapped())
    invocation = tool.prepare({"command": "echo $WRAPPED"})
    assert invocation.access.note == "(wrapped)"
    assert run(invocation.run()).content == "yes\n[undone afterwards]"


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    tool = BashTool(Workspace(tmp_path / "gone", tmp_path / "out"))
    with pytest.raises(ToolError) as caught:
        bash_run(tool, "true")
    assert caught.value.code == TOOL_FAILED
    chain = error_chain(caught.value)
    assert chain.startswith("could not start /")
    assert f"in {tmp_path / 'gone'}: [Errno 2] No such file or directory" in chain


def test_invalid_utf8_is_replaced(bash: BashTool) -> None:
    output = bash_run(bash, r"printf 'caf\303\251 \377 ok'")
    assert output.content == "café \ufffd ok"


# --- what reaches the child ---------------------------------------------------------------------


def test_no_api_key_in_the_output_or_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY_KEY)
    monkeypatch.setenv("COPIED_KEY", f"Bearer {CANARY_KEY}")
    monkeypatch.setenv("DSH_TEST_KEPT", "kept")
    root = tmp_path / "work"
    root.mkdir()
    workspace = Workspace(root, tmp_path / "out")
    assert workspace.environment == child_environment()
    monkeypatch.setenv("DSH_TEST_LATE", "set after the workspace was made")
    # env, then enough output to be cut, so the file holds the env lines too.
    output = bash_run(BashTool(workspace), "env; yes 0123456789 | head -c 40000")
    assert output.truncated and output.output_file is not None
    saved = Path(output.output_file).read_text()
    for text in (output.content, saved):
        assert CANARY_KEY not in text
        assert "DEEPSEEK_API_KEY" not in text
        assert "COPIED_KEY" not in text
        assert "DSH_TEST_LATE" not in text
    assert "DSH_TEST_KEPT=kept" in saved


def test_no_descriptor_of_ours_reaches_the_child(bash: BashTool, tmp_path: Path) -> None:
    # Like the session log's locked descriptor, made inheritable to prove close_fds closes it.
    fd = os.open(tmp_path / "session.jsonl", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.set_inheritable(fd, True)
        output = bash_run(bash, f"test -e /proc/$$/fd/{fd} && echo open || echo closed")
    finally:
        os.close(fd)
    assert output.content == "closed\n"


PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4


def prctl(option: int, value: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, value, 0, 0, 0))


def test_dsh_is_not_dumpable_once_a_command_ran(bash: BashTool) -> None:
    # Its /proc/<pid>/environ still holds the API key it started with: a command of the same
    # user must not read it (cat /proc/$PPID/environ).
    bash_run(bash, "true")
    assert prctl(PR_GET_DUMPABLE) == 0


def test_a_command_cannot_read_the_environment_dsh_started_with() -> None:
    # Root reads any process's /proc files, so this runs in a forked child that gave up root,
    # and that is dumpable again (a uid change makes a process non-dumpable) as dsh starts.
    work = Path(tempfile.mkdtemp(prefix="dsh-environ-"))
    command = {"command": "cat /proc/$PPID/environ > /dev/null && echo readable"}

    def attempt() -> list[str]:
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        assert prctl(PR_SET_DUMPABLE, 1) == 0
        tool = BashTool(Workspace.at(work, work / "out"))
        # The control: with the protection left out, the command reads dsh's environment.
        hide = process.hide_own_environment
        process.hide_own_environment = lambda: None  # type: ignore[assignment]
        unprotected = run(tool.prepare(command).run()).content
        process.hide_own_environment = hide
        hide.cache_clear()  # the fork copied the parent's "done already"
        protected = run(tool.prepare(command).run()).content
        return [unprotected, protected]

    try:
        work.chmod(0o755)  # mkdtemp's 0700 would keep the child out
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            try:
                os.close(read_end)
                result = json.dumps(attempt())
            except BaseException as exc:
                result = json.dumps([f"raised {error_chain(exc)}"])
            os.write(write_end, result.encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            result = json.loads(pipe.read())
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(work)
    unprotected, protected = result if len(result) == 2 else (result[0], "")
    assert unprotected == "readable\n"
    assert "Permission denied" in protected and "[exit code: 1]" in protected, protected


# --- the cap ------------------------------------------------------------------------------------


def test_short_output_is_whole(bash: BashTool) -> None:
    output = bash_run(bash, f"head -c {OUTPUT_LIMIT} /dev/zero | tr '\\0' x")
    assert output.content == "x" * OUTPUT_LIMIT
    assert (output.truncated, output.output_file) == (False, None)


_LINE = b"abcdefghi\n"
_HUNDRED_MB = 100_000_000
_MEASURE = """
import asyncio, json, sys
from pathlib import Path
from dsh_core.tools.shell import BashTool
from dsh_core.trust.workspace import Workspace

def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

before = peak_kb()
tool = BashTool(Workspace(Path(sys.argv[1]), Path(sys.argv[2])))
output = asyncio.run(tool.prepare({"command": sys.argv[3]}).run())
print(json.dumps({
    "before": before, "peak": peak_kb(), "content": output.content,
    "truncated": output.truncated, "output_file": output.output_file,
}))
"""


def test_100_mb_of_output(workspace: Workspace) -> None:
    # In a process of its own, so its peak memory is the tool's alone.
    command = f"yes abcdefghi | head -c {_HUNDRED_MB}"
    found = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(workspace.root), str(workspace.output_dir), command],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    result = json.loads(found.stdout)
    # Peak RSS well under 150 MB, and no more than a few MB above what the imports took.
    assert result["peak"] < 150_000
    assert result["peak"] - result["before"] < 30_000
    path = Path(result["output_file"])
    half = OUTPUT_LIMIT // 2
    lines = _LINE.decode() * (half // len(_LINE))
    cut = _HUNDRED_MB - OUTPUT_LIMIT
    assert result["truncated"] is True
    # The file keeps the first 64 MiB (SPEC 10.8), and the result says so.
    assert result["content"] == (
        f"{lines}[... {cut:,} of {_HUNDRED_MB:,} characters cut here; the first 64 MiB of "
        f"the output are in {path}; the rest was not saved]\n{lines}"
    )
    assert path.parent == workspace.output_dir
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(workspace.output_dir.stat().st_mode) == 0o700
    assert path.stat().st_size == SAVED_OUTPUT_LIMIT
    chunk = _LINE * 100_000
    with path.open("rb") as file:
        while data := file.read(len(chunk)):
            assert data == chunk[: len(data)]


# --- ending it ----------------------------------------------------------------------------------


@pytest.mark.slow  # it waits out a real 5 s timeout: not for the quick set
def test_a_command_that_never_ends_times_out(bash: BashTool) -> None:
    # TERM ignored: the timeout escalates to SIGKILL. The shell must have set its trap before
    # the timeout: 5 s leaves a loaded machine room to start it.
    output = bash_run(bash, "trap '' TERM; echo $$; sleep 1000", timeout_s=5)
    assert output.failure is not None and output.failure.code == TOOL_FAILED
    assert output.failure.message == "command timed out after 5 s (sent SIGTERM, then SIGKILL)"
    pgid = output.content.splitlines()[1]
    assert output.content == (
        "Error: command timed out after 5 s (sent SIGTERM, then SIGKILL)\n"
        f"{pgid}\n[killed by signal 9 (SIGKILL)]"
    )
    assert output.exit_code == 137
    wait_group_gone(int(pgid))


def test_a_background_child_holding_the_pipe(bash: BashTool) -> None:
    output = bash_run(bash, "echo $$; sleep 1000 & echo started")
    pgid, started = output.content.splitlines()
    assert (started, output.exit_code, output.failure) == ("started", 0, None)
    wait_group_gone(int(pgid))


def test_a_child_that_left_the_group_does_not_hold_the_call(bash: BashTool) -> None:
    # Out of killpg's reach (see the process module's docstring), but the call returns.
    output = bash_run(bash, "setsid sleep 1000 & echo $!")
    escaped = int(output.content)
    try:
        assert (output.exit_code, output.failure) == (0, None)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


def test_cancel_keeps_the_partial_output(workspace: Workspace, fifo: Fifo) -> None:
    tool = BashTool(workspace)  # the real escalation: SIGINT ends this at once
    command = f"for i in 1 2 3; do echo line$i; done; echo $$ > {fifo.path}; sleep 1000"
    output, pgid = run(cancel_when_told(tool, command, fifo))
    assert output.failure is not None and output.failure.code == ABORTED
    assert output.failure.message.startswith("the command was cancelled (sent SIGINT")
    assert output.content.startswith(f"Error: {output.failure.message}\nline1\nline2\nline3\n")
    assert "\n[killed by signal " in output.content
    wait_group_gone(pgid)


def test_cancel_escalates_to_sigkill(bash: BashTool, fifo: Fifo) -> None:
    # "waiting" goes out before the line that triggers the cancel, so it is always in the output.
    command = f"trap '' INT TERM; echo waiting; echo $$ > {fifo.path}; sleep 1000"
    output, pgid = run(cancel_when_told(bash, command, fifo))
    message = "the command was cancelled (sent SIGINT, then SIGTERM, then SIGKILL)"
    assert output.failure is not None and output.failure.code == ABORTED
    assert output.content == f"Error: {message}\nwaiting\n[killed by signal 9 (SIGKILL)]"
    wait_group_gone(pgid)


def test_a_second_cancel_does_not_cut_the_cleanup_short(bash: BashTool, fifo: Fifo) -> None:
    # The SIGINT trap reports to the test, which cancels again while the escalation runs.
    command = (
        f"trap 'echo INT > {fifo.path}' INT; trap '' TERM; echo $$ > {fifo.path}; "
        "while :; do sleep 1000 & wait; done"
    )
    output, pgid = run(cancel_when_told(bash, command, fifo, cancels=2))
    assert output.failure is not None and output.failure.code == ABORTED
    assert output.failure.message == (
        "the command was cancelled (sent SIGINT, then SIGTERM, then SIGKILL)"
    )
    assert output.content.endswith("[killed by signal 9 (SIGKILL)]")
    wait_group_gone(pgid)


def test_the_loop_records_a_cancelled_commands_partial_output(
    workspace: Workspace, fifo: Fifo, tmp_path: Path
) -> None:
    model = ScriptedModel()
    command = json.dumps({"command": f"echo partial; echo $$ > {fifo.path}; sleep 1000"})
    model.enqueue([ToolCallRequest(ToolCall("call_1", "bash", command)), Finish("tool-calls")])
    store = SessionStore(tmp_path / "dsh", clock=ticking(), new_id=numbered())
    with store.create(workspace.root) as log:
        conversation = Conversation(
            model,
            log,
            model_name="m",
            toolbox=Toolbox([BashTool(workspace)]),
            approval=ApprovalPolicy.granting(["shell"]),
        )

        async def main() -> tuple[TurnEnd, int]:
            turn = asyncio.create_task(conversation.run_turn("run it"))
            pgid = int(await fifo.line())
            conversation.cancel("user")
            return await turn, pgid

        end, pgid = run(main())
        (result,) = [e.record for e in log.events if isinstance(e.record, ToolResult)]
    assert end == TurnEnd(1, "aborted", reason="user")
    assert result.error is not None and result.error.code == ABORTED
    assert result.content.startswith("Error: the command was cancelled (sent SIGINT")
    assert "\npartial\n[killed by signal " in result.content
    wait_group_gone(pgid)


# --- leaving a sandbox (issue 13), with a launcher that stands for one --------------------------
# The real bubblewrap is tested in test_tools_sandbox.py; these run everywhere.

from dsh_core.agent.approval import Answer, Question  # noqa: E402
from dsh_core.errors import TOOL_REFUSED  # noqa: E402
from dsh_core.model.seam import TextDelta  # noqa: E402
from dsh_core.session.events import ApprovalDecided  # noqa: E402
from dsh_core.trust.launchers import DeferredLauncher, Launcher, Sandbox  # noqa: E402


class FakeSandbox:
    """Counts as a sandbox (it can be left, it explains failures); marks what it runs."""

    note = "(sandboxed: a stand-in)"

    def launch(self, argv: Any) -> contextlib.AbstractContextManager[Launch]:
        return contextlib.nullcontext(Launch(["/usr/bin/env", "IN_FAKE_SANDBOX=yes", *argv]))

    def explain(self, output: str) -> str:
        return f"[stand-in sandbox: {len(output)} characters seen]"


class Deferred:
    """A launcher chosen at the first call, counting how often it was asked to choose."""

    def __init__(self, chosen: Launcher) -> None:
        self.chosen = chosen
        self.resolved = 0

    @property
    def note(self) -> str:
        return self.resolve().note

    def launch(self, argv: Any) -> contextlib.AbstractContextManager[Launch]:
        return self.resolve().launch(argv)

    def resolve(self) -> Launcher:
        self.resolved += 1
        return self.chosen


@pytest.fixture
def boxed(workspace: Workspace) -> BashTool:
    return BashTool(workspace, launcher=FakeSandbox(), timings=FAST)


def test_the_stand_ins_are_what_they_stand_for() -> None:
    assert isinstance(FakeSandbox(), Sandbox)
    assert isinstance(Deferred(FakeSandbox()), DeferredLauncher)
    assert not isinstance(Deferred(FakeSandbox()), Sandbox)


def test_the_spec_offers_to_leave_the_sandbox(bash: BashTool) -> None:
    properties = bash.spec.parameters["properties"]
    assert properties["sandbox"]["type"] == "boolean"
    assert properties["justification"]["type"] == "string"
    assert "sandbox: false" in bash.spec.description
    assert "justification" in bash.spec.description


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"sandbox": False}, "sandbox: false needs a justification, a non-empty string"),
        ({"sandbox": False, "justification": " \n"}, "sandbox: false needs a justification"),
        ({"sandbox": False, "justification": ["x"]}, "sandbox: false needs a justification"),
        ({"sandbox": "false", "justification": "x"}, "sandbox must be true or false, not 'false'"),
        ({"sandbox": 0, "justification": "x"}, "sandbox must be true or false, not 0"),
    ],
)
def test_leaving_needs_a_justification(
    boxed: BashTool, arguments: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ToolError) as caught:
        boxed.prepare({"command": "ls", **arguments})
    assert caught.value.message.startswith(f"invalid arguments: {problem}")


@pytest.mark.parametrize(
    "arguments",
    [{}, {"sandbox": True}, {"sandbox": None}, {"justification": "not asked to leave"}],
)
def test_staying_in_the_sandbox(boxed: BashTool, arguments: dict[str, Any]) -> None:
    invocation = boxed.prepare({"command": "echo $IN_FAKE_SANDBOX", **arguments})
    assert invocation.access == Access("shell", note="(sandboxed: a stand-in)", scope=None)
    assert run(invocation.run()).content == "yes\n"


def test_leaving_the_sandbox(boxed: BashTool) -> None:
    arguments = {
        "command": "echo ${IN_FAKE_SANDBOX:-outside}; exit 4",
        "sandbox": False,
        "justification": "pip must\n  reach PyPI",
    }
    invocation = boxed.prepare(arguments)
    assert invocation.access == Access("shell", leaves_sandbox=True, note=LEAVING_NOTE)
    assert invocation.quoted == (("justification", "pip must reach PyPI"),)
    assert invocation.summary == "$ echo ${IN_FAKE_SANDBOX:-outside}; exit 4"
    # Outside: not wrapped, and a failure is not the sandbox's to explain.
    assert run(invocation.run()).content == "outside\n[exit code: 4]"


def test_leaving_without_a_sandbox_changes_nothing(bash: BashTool) -> None:
    invocation = bash.prepare({"command": "ls", "sandbox": False, "justification": "why not"})
    assert invocation.access == Access("shell", note="(not sandboxed)", scope="ls")
    assert invocation.quoted == ()


def test_the_unknown_argument_message_names_the_new_ones(bash: BashTool) -> None:
    with pytest.raises(ToolError) as caught:
        bash.prepare({"command": "ls", "sandboxed": False})
    assert caught.value.message == (
        'invalid arguments: unknown argument "sandboxed"; bash takes command and timeout_s '
        "(and sandbox: false with a justification, to leave the sandbox; "
        "run_in_background: true for a command that keeps running)"
    )


def test_a_failure_inside_a_sandbox_is_explained(boxed: BashTool) -> None:
    assert bash_run(boxed, "echo out; exit 3") == ToolOutput(
        "out\n[exit code: 3]\n[stand-in sandbox: 4 characters seen]", exit_code=3
    )
    assert bash_run(boxed, "printf out; kill -9 $$").content == (
        "out\n[killed by signal 9 (SIGKILL)]\n[stand-in sandbox: 3 characters seen]"
    )
    assert bash_run(boxed, "echo fine") == ToolOutput("fine\n", exit_code=0)
    # A timeout is dsh's doing, not the sandbox's: no line.
    timed_out = bash_run(boxed, "echo slow; exec sleep 1000", timeout_s=1)
    assert timed_out.failure is not None
    assert timed_out.content.endswith("slow\n[killed by signal 15 (SIGTERM)]")


def test_a_deferred_launcher_chooses_at_the_first_call(workspace: Workspace) -> None:
    launcher = Deferred(FakeSandbox())
    tool = BashTool(workspace, launcher=launcher, timings=FAST)
    assert (tool.spec.name, tool.describe({"command": "ls"})) == ("bash", "$ ls")
    assert launcher.resolved == 0
    invocation = tool.prepare({"command": "echo $IN_FAKE_SANDBOX; exit 1"})
    assert invocation.access == Access("shell", note="(sandboxed: a stand-in)", scope=None)
    assert run(invocation.run()).content == (
        "yes\n[exit code: 1]\n[stand-in sandbox: 4 characters seen]"
    )
    leaving = tool.prepare({"command": "ls", "sandbox": False, "justification": "x"})
    assert leaving.access.leaves_sandbox


def leave_in_a_conversation(
    workspace: Workspace, tmp_path: Path, approval: ApprovalPolicy
) -> tuple[ToolResult, ApprovalDecided]:
    """One turn whose model asks to leave the sandbox; the call's result and decision."""
    model = ScriptedModel()
    arguments = {"command": "echo ran", "sandbox": False, "justification": "needs the network"}
    call = ToolCall("call_1", "bash", json.dumps(arguments))
    model.enqueue([ToolCallRequest(call), Finish("tool-calls")], [TextDelta("ok"), Finish("stop")])
    store = SessionStore(tmp_path / "dsh", clock=ticking(), new_id=numbered())
    with store.create(workspace.root) as log:
        toolbox = Toolbox([BashTool(workspace, launcher=FakeSandbox(), timings=FAST)])
        conversation = Conversation(model, log, model_name="m", toolbox=toolbox, approval=approval)
        end = run(conversation.run_turn("go"))
        records = [event.record for event in log.events]
    assert end == TurnEnd(1, "completed")
    (result,) = [r for r in records if isinstance(r, ToolResult)]
    (decided,) = [r for r in records if isinstance(r, ApprovalDecided)]
    return result, decided


def test_leaving_is_refused_on_a_pipe_even_with_allow_shell(
    workspace: Workspace, tmp_path: Path
) -> None:
    approval = ApprovalPolicy.granting(["shell"])
    result, decided = leave_in_a_conversation(workspace, tmp_path, approval)
    assert decided.outcome == "unavailable"
    assert result.error is not None and result.error.code == TOOL_REFUSED
    assert result.content == (
        'Error: tool "bash" needs approval and stdin is not a terminal; '
        "run with --sandbox off, or let it run in the sandbox"
    )


def test_leaving_runs_on_a_pipe_with_sandbox_off(workspace: Workspace, tmp_path: Path) -> None:
    approval = ApprovalPolicy(frozenset(["shell"]), sandbox_off=True)
    result, decided = leave_in_a_conversation(workspace, tmp_path, approval)
    assert decided.outcome == "granted-by-flag"
    assert (result.content, result.is_error) == ("ran\n", False)


def test_leaving_is_asked_on_a_terminal_even_with_allow_shell(
    workspace: Workspace, tmp_path: Path
) -> None:
    asked: list[Question] = []

    async def ask(question: Question) -> Any:
        asked.append(question)
        return Answer("yes")

    approval = ApprovalPolicy.granting(["shell"], asker=ask)
    result, decided = leave_in_a_conversation(workspace, tmp_path, approval)
    assert decided.outcome == "allowed"
    assert [q.invocation.access.note for q in asked] == [LEAVING_NOTE]
    assert [q.invocation.quoted for q in asked] == [(("justification", "needs the network"),)]
    assert result.content == "ran\n"
