"""``bash`` under bubblewrap, on real processes: what the sandbox refuses, and how it says so.

Tests marked ``needs_bwrap`` run the real bwrap and are skipped, saying why, only where it
cannot run; the others (no bwrap on ``PATH``, a bwrap that fails, the notes, the explained
failures) always run. Tests wait for events (a line on a FIFO, a process gone from ``/proc``),
never for durations. Every probe of an escape is named with a fresh token, so a sandbox that
failed to hold leaves a findable file (removed afterwards) and a test that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from dsh_core.errors import ABORTED
from dsh_core.tools import Access, ToolOutput
from dsh_core.tools.launchers import Launcher, Sandbox, Unsandboxed
from dsh_core.tools.sandbox import (
    INSTALL_HINT,
    SANDBOX_UNAVAILABLE,
    AutoSandbox,
    Bwrap,
    SandboxUnavailable,
    _probe,
    choose_launcher,
    probe_bwrap,
)
from dsh_core.tools.shell import LEAVING_NOTE, BashTool
from dsh_core.tools.workspace import Workspace
from tests.conftest import CANARY_KEY
from tests.dsh_core.test_tools_shell import (  # noqa: F401 (fixtures used by name)
    FAST,
    ROOT,
    Fifo,
    bash_run,
    run,
    sigint_not_ignored,
)
from tests.support import sandbox_python, wait_until

BWRAP_PROBLEM = probe_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None,
    reason=f"bubblewrap cannot run here, so the sandbox is not tested: {BWRAP_PROBLEM}",
)
HINT = "If it needs more, ask to run it with sandbox: false and a justification]"

pytestmark = pytest.mark.usefixtures("sigint_not_ignored")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "work"
    root.mkdir()
    return Workspace.at(root, tmp_path / "outputs")


def sandboxed(workspace: Workspace, *, network: bool = False) -> BashTool:
    launcher = choose_launcher("on", workspace=workspace, network=network)
    return BashTool(workspace, launcher=launcher, timings=FAST)


@pytest.fixture
def bash(workspace: Workspace) -> BashTool:
    return sandboxed(workspace)


@pytest.fixture
def token() -> str:
    return f"dsh-sandbox-test-{uuid.uuid4().hex}"


@pytest.fixture
def no_bwrap_path(tmp_path: Path) -> str:
    """A ``PATH`` with a shell and the usual tools, and no bwrap."""
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    for name in ("sh", "bash", "cat", "echo", "touch"):
        found = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True)
        if found.returncode == 0:
            (bin_dir / name).symlink_to(found.stdout.strip())
    return str(bin_dir)


def removed(path: Path) -> bool:
    """Whether ``path`` did not exist; removes it if it did (an escape, and the test fails)."""
    if not os.path.lexists(path):
        return True
    if path.is_dir():
        path.rmdir()
    else:
        path.unlink()
    return False


def processes_with(text: str) -> list[int]:
    """Live processes (not zombies) whose command line holds ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue  # gone meanwhile
        if text.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def wait_processes_gone(text: str) -> None:
    """Wait until no process's command line holds ``text``; kill leftovers if the test fails."""
    try:
        wait_until(lambda: not processes_with(text), f"the processes running {text!r} to end")
    finally:
        for pid in processes_with(text):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- choosing the launcher: always run -----------------------------------------------------------


def test_off_never_sandboxes(workspace: Workspace) -> None:
    launcher = choose_launcher("off", workspace=workspace, network=False)
    assert launcher == Unsandboxed()
    assert launcher.note == "(not sandboxed)"


def test_on_without_bwrap_names_the_package(workspace: Workspace, no_bwrap_path: str) -> None:
    workspace.environment = {**workspace.environment, "PATH": no_bwrap_path}
    with pytest.raises(SandboxUnavailable) as caught:
        choose_launcher("on", workspace=workspace, network=False)
    assert caught.value.code == SANDBOX_UNAVAILABLE
    assert caught.value.message == (
        "--sandbox on: bubblewrap is not installed (no bwrap on PATH) "
        "(Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)"
    )


def test_auto_without_bwrap_runs_unsandboxed_and_says_so(
    workspace: Workspace, no_bwrap_path: str, tmp_path: Path
) -> None:
    workspace.environment = {**workspace.environment, "PATH": no_bwrap_path}
    heard: list[Launcher] = []
    launcher = choose_launcher("auto", workspace=workspace, network=False, on_chosen=heard.append)
    assert isinstance(launcher, AutoSandbox) and launcher.chosen is None
    tool = BashTool(workspace, launcher=launcher, timings=FAST)
    note = "(not sandboxed: bubblewrap is not installed (no bwrap on PATH))"
    assert tool.prepare({"command": "true"}).access == Access("shell", note=note, scope="true")
    assert heard == [Unsandboxed(note=note)]
    # Unsandboxed for real: it writes outside the working directory, and a failure is plain.
    outside = tmp_path / "outside.txt"
    output = bash_run(tool, f"echo written > {outside}; exit 3")
    assert output.content == "[exit code: 3]"
    assert outside.read_text() == "written\n"
    # sandbox: false changes nothing without a sandbox.
    leaving = {"command": "true", "sandbox": False, "justification": "needs the network"}
    assert tool.prepare(leaving).access == Access("shell", note=note, scope="true")
    assert len(heard) == 1


def test_auto_does_not_probe_before_the_first_call(
    workspace: Workspace, no_bwrap_path: str
) -> None:
    workspace.environment = {**workspace.environment, "PATH": no_bwrap_path + ":/nowhere"}
    before = _probe.cache_info()
    launcher = choose_launcher("auto", workspace=workspace, network=False)
    tool = BashTool(workspace, launcher=launcher)
    assert tool.spec.name == "bash" and tool.describe({"command": "ls"}) == "$ ls"
    assert _probe.cache_info() == before
    tool.prepare({"command": "ls"})
    assert _probe.cache_info().misses == before.misses + 1
    tool.prepare({"command": "ls"})  # chosen once, probed once
    assert _probe.cache_info().misses == before.misses + 1


def test_a_bwrap_that_fails_says_why(workspace: Workspace, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin-broken-bwrap"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    message = "bwrap: No permissions to create new namespace, likely because the kernel does not"
    fake.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    fake.chmod(0o755)
    workspace.environment = {**workspace.environment, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    problem = f"{fake} does not work here (exit status 1: {message})"
    assert probe_bwrap(f"{bin_dir}:/usr/bin:/bin") == problem
    launcher = choose_launcher("auto", workspace=workspace, network=False)
    assert launcher.note == f"(not sandboxed: {problem})"
    with pytest.raises(SandboxUnavailable) as caught:
        choose_launcher("on", workspace=workspace, network=False)
    assert caught.value.message == f"--sandbox on: {problem} ({INSTALL_HINT})"
    assert "bubblewrap" in caught.value.message


# --- the notes and the explanations: always run -----------------------------------------------


def test_the_note_says_what_the_sandbox_allows(tmp_path: Path) -> None:
    home = tmp_path / "home" / "user"
    work = tmp_path / "work"
    assert Bwrap(work, home=home).note == f"(sandboxed: writes only {work}, no network)"
    assert Bwrap(work, network=True).note == f"(sandboxed: writes only {work}, network allowed)"
    assert Bwrap(Path("/"), home=home).note == (
        "(sandboxed: writes anywhere under / — the working directory is the root; no network)"
    )
    assert Bwrap(home, home=home).note == (
        f"(sandboxed: writes only {home} — your home directory, dotfiles and all; no network)"
    )
    holder = tmp_path / "home"
    assert Bwrap(holder, home=home, network=True).note == (
        f"(sandboxed: writes only {holder} — it holds your home directory {home}; network allowed)"
    )


def test_the_note_for_a_workspace_at_home(tmp_path: Path) -> None:
    home = tmp_path / "me"
    home.mkdir()
    workspace = Workspace.at(home, tmp_path / "out")
    workspace.environment = {**workspace.environment, "HOME": str(home)}
    launcher = Bwrap.for_workspace(workspace)
    assert launcher.note == (
        f"(sandboxed: writes only {home} — your home directory, dotfiles and all; no network)"
    )
    assert isinstance(launcher, Sandbox)


@pytest.mark.parametrize(
    "output",
    [
        "touch: cannot touch '/etc/x': Read-only file system\n",
        "OSError: [Errno 30] Read-only file system: '/root/.cache'\n",
        "curl: (6) Could not resolve host: example.com\n",
        "Failed to establish a new connection: [Errno -3] Temporary failure in name resolution",
        "dial tcp: lookup proxy.golang.org: dial udp 8.8.8.8:53: connect: network is unreachable",
        "npm ERR! request to https://registry.npmjs.org/ failed, reason: getaddrinfo EAI_AGAIN",
        "ConnectionRefusedError: [Errno 111] Connection refused\n",
    ],
)
def test_a_failure_the_sandbox_caused_is_explained(output: str) -> None:
    line = Bwrap(Path("/src")).explain(output)
    assert line == (
        "[sandbox: the command may have failed because of the sandbox: the file system is "
        f"read-only outside /src and /tmp; there is no network. {HINT}"
    )


def test_other_failures_get_the_limits_only() -> None:
    assert Bwrap(Path("/src")).explain("FAILED tests/test_x.py::test_y\n") == (
        "[sandbox: the file system is read-only outside /src and /tmp; there is no network]"
    )
    # With the network allowed, a network failure is not the sandbox's doing.
    allowed = Bwrap(Path("/src"), network=True)
    assert allowed.explain("curl: (6) Could not resolve host: x") == (
        "[sandbox: the file system is read-only outside /src and /tmp]"
    )
    assert allowed.explain("Read-only file system").endswith(HINT)
    assert Bwrap(Path("/")).explain("boom") == "[sandbox: there is no network]"


def test_the_options(tmp_path: Path) -> None:
    work = tmp_path / "work"
    options = Bwrap(work).arguments()
    text = " ".join(options)
    for flag in (
        "--ro-bind / /",
        "--dev /dev",
        "--proc /proc",
        "--ro-bind /proc/sys /proc/sys",
        "--tmpfs /tmp",
        f"--bind {work} {work}",
        "--unshare-net",
        "--unshare-pid",
        "--new-session",
        "--die-with-parent",
        "--cap-drop ALL",
        f"--chdir {work}",
    ):
        assert flag in text
    assert "--as-pid-1" not in options
    # Order matters: the working directory goes on top of the private /tmp.
    assert text.index("--tmpfs /tmp") < text.index(f"--bind {work} {work}")
    assert "--unshare-net" not in Bwrap(work, network=True).arguments()
    whole = " ".join(Bwrap(Path("/")).arguments())
    assert whole.index("--bind / /") < whole.index("--dev /dev")


# --- the sandbox holds: real bwrap ---------------------------------------------------------------


@needs_bwrap
def test_writes_outside_are_refused_and_explained(
    bash: BashTool, workspace: Workspace, token: str
) -> None:
    home = Path(os.path.realpath(workspace.environment.get("HOME") or os.path.expanduser("~")))
    (workspace.root / "to-etc").symlink_to("/etc")
    (workspace.root / "to-home-file").symlink_to(home / token)
    up = "../" * len(workspace.root.parts)  # from the working directory up to /, and past it
    targets = {
        "/etc": f"/etc/{token}",
        "a symlink to /etc": f"to-etc/{token}",
        "..": f"{up}etc/{token}",
    }
    if not home.is_relative_to("/tmp"):  # a home in /tmp would be in the private /tmp
        targets["$HOME"] = f'"$HOME/{token}"'
        targets["a symlink to a file at home"] = "to-home-file"
    try:
        for what, target in targets.items():
            output = bash_run(bash, f"echo escaped > {target}")
            assert "Read-only file system" in output.content, what
            assert output.exit_code == 1 and output.failure is None, what
            assert output.content.endswith(
                "[exit code: 1]\n[sandbox: the command may have failed because of the sandbox: "
                f"the file system is read-only outside {workspace.root} and /tmp; there is no "
                f"network. {HINT}"
            ), what
    finally:
        escaped = [path for path in (home / token, Path("/etc") / token) if not removed(path)]
    assert escaped == []


@needs_bwrap
def test_writes_inside_and_to_a_private_tmp(
    bash: BashTool, workspace: Workspace, token: str
) -> None:
    host_file = Path("/tmp") / token
    host_file.write_text("the host's /tmp\n")
    try:
        command = (
            f"mkdir -p sub && echo inside > sub/file && cat sub/file; "
            f"echo private > /tmp/{token}.new && cat /tmp/{token}.new; "
            f"test -e /tmp/{token} && echo sees-host-tmp || echo no-host-tmp"
        )
        output = bash_run(bash, command)
        assert output.content == "inside\nprivate\nno-host-tmp\n"
        assert (workspace.root / "sub" / "file").read_text() == "inside\n"
    finally:
        host_file.unlink()
    assert removed(Path("/tmp") / f"{token}.new")


@needs_bwrap
def test_the_kernel_and_the_mounts_stay_read_only(bash: BashTool, token: str) -> None:
    # As root, bwrap keeps every capability unless told otherwise: a remount would undo it all.
    command = (
        "mount -o remount,rw / 2>/dev/null && echo remounted; "
        "grep CapEff /proc/self/status; "
        "echo x > /proc/sys/vm/drop_caches; "
        f"echo escaped > /etc/{token}"
    )
    try:
        output = bash_run(bash, command)
    finally:
        escaped = not removed(Path("/etc") / token)
    assert not escaped
    assert "remounted" not in output.content
    assert "CapEff:\t0000000000000000\n" in output.content
    assert "drop_caches: Read-only file system" in output.content


@needs_bwrap
def test_no_network(workspace: Workspace) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        attempt = (
            f'import socket; socket.create_connection(("127.0.0.1", {port}), timeout=30); '
            'print("connected")'
        )
        connect = f"{sandbox_python()} -c {shlex.quote(attempt)}"
        output = bash_run(sandboxed(workspace), connect)
        assert "ConnectionRefusedError: [Errno 111] Connection refused" in output.content
        assert output.content.endswith(HINT)
        assert "connected" not in output.content.splitlines()
        output = bash_run(sandboxed(workspace, network=True), connect)
        assert output.content == "connected\n"
        assert output.exit_code == 0


@needs_bwrap
def test_a_background_child_dies_with_the_command(bash: BashTool, token: str) -> None:
    # Even one that left the process group: the PID namespace ends with the command.
    duration = f"1000.{int(token[-12:], 16)}"
    output = bash_run(bash, f"sleep {duration} & setsid sleep {duration} & echo started")
    assert (output.content, output.exit_code) == ("started\n", 0)
    wait_processes_gone(f"sleep\0{duration}")


@needs_bwrap
def test_nothing_is_left_when_dsh_is_killed(workspace: Workspace, tmp_path: Path) -> None:
    fifo = Fifo(workspace.root / "events")
    duration = f"1000.{uuid.uuid4().int % 10**12}"
    script = textwrap.dedent(
        """
        import asyncio, sys
        from pathlib import Path
        from dsh_core.tools.sandbox import choose_launcher
        from dsh_core.tools.shell import BashTool
        from dsh_core.tools.workspace import Workspace

        workspace = Workspace.at(Path(sys.argv[1]), Path(sys.argv[2]))
        launcher = choose_launcher("on", workspace=workspace)
        tool = BashTool(workspace, launcher=launcher)
        asyncio.run(tool.prepare({"command": sys.argv[3]}).run())
        """
    )
    command = f"sleep {duration} & echo ready > events; wait"
    argv = [sys.executable, "-c", script, str(workspace.root), str(tmp_path / "out"), command]
    child = subprocess.Popen(argv, cwd=ROOT)
    try:
        assert run(fifo.line()) == "ready"
        # The shell wrote "ready" after forking the sleep, maybe before its exec.
        running = f"sleep\0{duration}"
        wait_until(lambda: bool(processes_with(running)), "the sandboxed sleep to run")
        child.kill()
        child.wait()
        wait_processes_gone(f"sleep\0{duration}")
        wait_processes_gone(str(workspace.root))  # bwrap and its relay too
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(fifo.fd)


@needs_bwrap
def test_ctrl_c_reaches_the_command_inside(workspace: Workspace, token: str) -> None:
    # The relay passes SIGINT on, so the command can end its own way (pytest's summary). The
    # real escalation: SIGTERM would come only 2 s later.
    launcher = choose_launcher("on", workspace=workspace)
    bash = BashTool(workspace, launcher=launcher)
    fifo = Fifo(workspace.root / "events")  # inside: the sandbox's /tmp is not the test's
    duration = f"1000.{int(token[-12:], 16)}"
    command = (
        "trap 'echo got SIGINT; exit 5' INT; echo started; "
        f"echo 0 > {fifo.path}; sleep {duration} & wait"
    )
    invocation = bash.prepare({"command": command})

    async def main() -> ToolOutput:
        task = asyncio.ensure_future(invocation.run())
        await fifo.line()
        task.cancel()
        return await task

    try:
        output = run(main())
    finally:
        os.close(fifo.fd)
    assert output.failure is not None and output.failure.code == ABORTED
    assert output.content == (
        "Error: the command was cancelled (sent SIGINT)\nstarted\ngot SIGINT\n[exit code: 5]"
    )
    wait_processes_gone(f"sleep\0{duration}")


@needs_bwrap
def test_a_timeout_kills_all_of_it(bash: BashTool, token: str) -> None:
    duration = f"1000.{int(token[-12:], 16)}"
    output = bash_run(bash, f"trap '' INT TERM; sleep {duration} & wait", timeout_s=1)
    assert output.failure is not None
    assert output.failure.message == "command timed out after 1 s (sent SIGTERM, then SIGKILL)"
    assert output.content.endswith("[killed by signal 9 (SIGKILL)]")
    wait_processes_gone(f"sleep\0{duration}")


@needs_bwrap
def test_no_terminal_to_inject_into(bash: BashTool) -> None:
    # TIOCSTI pushes input into a terminal; the sandbox has none to reach: not its standard
    # input, not a controlling terminal (its own session), not the test's open terminal.
    master, follower = pty.openpty()
    try:
        name = os.ttyname(follower)
        attempt = textwrap.dedent(
            f"""
            import fcntl, os, termios
            print("tty_nr", open("/proc/self/stat").read().rpartition(")")[2].split()[4])
            for what in ("stdin", "/dev/tty", {name!r}):
                try:
                    fd = 0 if what == "stdin" else os.open(what, os.O_RDWR)
                    fcntl.ioctl(fd, termios.TIOCSTI, b"x")
                    print(what, "INJECTED")
                except OSError as exc:
                    print(what, exc.strerror)
            """
        )
        output = bash_run(bash, f"{sandbox_python()} -c {shlex.quote(attempt)}")
        assert output.content == (
            "tty_nr 0\n"
            "stdin Inappropriate ioctl for device\n"
            "/dev/tty No such device or address\n"
            f"{name} No such file or directory\n"
        )
        os.set_blocking(follower, False)
        with pytest.raises(BlockingIOError):
            os.read(follower, 1)  # nothing was pushed into the test's terminal
    finally:
        os.close(master)
        os.close(follower)


@needs_bwrap
def test_no_api_key_and_none_of_our_processes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY_KEY)
    root = tmp_path / "work"
    root.mkdir()
    workspace = Workspace.at(root, tmp_path / "out")
    # Every process it can see, and its environment: the canary is in ours, not there.
    command = (
        'for p in /proc/[0-9]*; do echo "${p#/proc/}: $(tr "\\0" " " < $p/cmdline)"; done; '
        "cat /proc/[0-9]*/environ | tr '\\0' '\\n' | grep -c DEEPSEEK || true"
    )
    output = bash_run(sandboxed(workspace), command)
    assert CANARY_KEY not in output.content
    *processes, count = output.content.splitlines()
    assert count == "0"
    # Its own PID namespace: bwrap's init and the shell, nothing of ours.
    assert [line.partition(":")[0] for line in processes] == ["1", "2"]
    assert "bwrap" in processes[0]


@needs_bwrap
def test_the_root_as_working_directory_keeps_proc_and_tmp_private(
    tmp_path: Path, token: str
) -> None:
    host_file = Path("/tmp") / token
    host_file.write_text("the host's /tmp\n")
    try:
        workspace = Workspace.at(Path("/"), tmp_path / "out")
        tool = sandboxed(workspace)
        assert tool.prepare({"command": "true"}).access.note == (
            "(sandboxed: writes anywhere under / — the working directory is the root; no network)"
        )
        output = bash_run(tool, f"cat /proc/1/comm; test -e /tmp/{token} || echo private-tmp")
        assert output.content == "bwrap\nprivate-tmp\n"
    finally:
        host_file.unlink()


@needs_bwrap
def test_agent_sockets_are_hidden(workspace: Workspace) -> None:
    named, other = workspace.root / "agent.sock", workspace.root / "other.sock"
    workspace.environment = {**workspace.environment, "SSH_AUTH_SOCK": str(named)}
    servers = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    try:
        for server, path in zip(servers, (named, other), strict=True):
            server.bind(str(path))
            server.listen()
        attempt = textwrap.dedent(
            """
            import socket, sys
            for path in sys.argv[1:]:
                try:
                    socket.socket(socket.AF_UNIX).connect(path)
                    print(path, "connected")
                except OSError as exc:
                    print(path, exc.strerror)
            """
        )
        command = f"{sandbox_python()} -c {shlex.quote(attempt)} {named} {other}"
        output = bash_run(sandboxed(workspace), command)
        assert output.content == f"{named} Connection refused\n{other} connected\n"
    finally:
        for server in servers:
            server.close()


# --- leaving the sandbox ------------------------------------------------------------------------


@needs_bwrap
def test_leaving_the_sandbox(bash: BashTool, workspace: Workspace, tmp_path: Path) -> None:
    arguments = {
        "command": f"echo out > {tmp_path / 'outside.txt'}",
        "sandbox": False,
        "justification": "  writes the\nbuild cache  ",
    }
    invocation = bash.prepare(arguments)
    assert invocation.access == Access("shell", leaves_sandbox=True, note=LEAVING_NOTE)
    assert invocation.quoted == (("justification", "writes the build cache"),)
    output = run(invocation.run())
    assert (output.content, output.exit_code) == ("", 0)
    assert (tmp_path / "outside.txt").read_text() == "out\n"
    # Unsandboxed, a failure gets no sandbox line.
    failed = run(bash.prepare({**arguments, "command": "exit 2"}).run())
    assert failed.content == "[exit code: 2]"


@needs_bwrap
def test_network_allowed_by_the_launcher_of_auto(workspace: Workspace) -> None:
    heard: list[Launcher] = []
    launcher = choose_launcher("auto", workspace=workspace, network=True, on_chosen=heard.append)
    assert launcher.note == f"(sandboxed: writes only {workspace.root}, network allowed)"
    assert len(heard) == 1 and isinstance(heard[0], Bwrap)
