"""The sandbox around ``dsh``'s commands: escapes tried by a scripted model (issue 13).

Each test runs dsh on a pipe (in-process, ``tests/harness.py``: the commands it starts under
bubblewrap are real processes either way), or the real :data:`tests.support.DSH` where the
process is the point (a SIGKILL of dsh) or on a pty where a terminal matters, against a stub
server of its own, whose scripted :class:`ToolCalls` ask for ``bash`` commands
that try to get out: writes outside the working directory, a connection to a loopback server
the test started, processes that outlive the command or dsh itself, input pushed into the
terminal. Each checks three things: the sandbox held (the effect is not on the host), the result
says why (the ``tool/result`` in the session log, read independently of ``dsh_core.session``),
and the session went on (a next line got its answer, exit status 0).

Where the files live: the working directory, ``$HOME`` and the host directories that escapes aim
at are under ``/var/tmp``, not ``/tmp``: the sandbox has a private ``/tmp``, so a write aimed at
a host path under ``/tmp`` lands in that tmpfs and proves nothing about the read-only root.

Tests that need bubblewrap are skipped, saying why, only where it cannot run; those about a
machine without it (a ``PATH`` without ``bwrap``) and about the flags always run. Nothing waits
for a time: waits are for an event in the log, a process in ``/proc``, a connection recorded,
each bounded by :data:`tests.support.HANG_GUARD` as a hang guard. Every marker is fresh (a uuid,
or ``sleep 1000.<12 digits>``), so a scan cannot match another test's process, and a sandbox
that failed to hold leaves a findable file or process, removed afterwards.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import tempfile
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import StubServer, ToolCalls
from dsh_core.tools.shell import LEAVING_NOTE
from dsh_core.trust.sandbox import probe_bwrap
from tests import support
from tests.dsh_core.trust.test_sandbox import processes_with, removed, wait_processes_gone
from tests.dsh_stdio.test_agent_pipe import (
    assert_log_whole,
    assert_requests_valid,
    data_of,
    has_event,
    start_dsh,
    unique_seconds,
    wait_for_event,
)
from tests.dsh_stdio.test_agent_terminal import PROMPT, Terminal, spawn_terminal
from tests.harness import run_in_process
from tests.support import DSH, HANG_GUARD, child_env, sandbox_python, wait_until

__all__: list[str] = []


def run_dsh(env: dict[str, str], cwd: Path, *args: str, stdin: str = "") -> support.Run:
    """dsh to its end in ``cwd`` with ``stdin`` as its input, as on a pipe (in-process)."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd)


pytestmark = pytest.mark.slow

BWRAP_PROBLEM = probe_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None,
    reason=f"bubblewrap cannot run here, so the sandbox's escapes are not tried: {BWRAP_PROBLEM}",
)

HOST_DIR = "/var/tmp"
"""Where the test's directories go: on the read-only root inside the sandbox (see above)."""

NEXT = "still here"
"""The line after the turn under test: its answer shows that the session went on."""

LEAVE_REFUSED = (
    'Error: tool "bash" needs approval and stdin is not a terminal; run with --sandbox off, '
    "or let it run in the sandbox"
)
NO_OUTPUT = "(no output)"
"""A result without output, as the log and the model have it."""
NO_BWRAP = "bubblewrap is not installed (no bwrap on PATH)"
INSTALL = "Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap"


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """A stub server for this test alone: its queue, its requests, call ids from ``call_1_0``."""
    with StubServer() as server:
        yield server


@pytest.fixture
def base() -> Iterator[Path]:
    """A fresh directory under :data:`HOST_DIR` (resolved), removed with all it holds."""
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="dsh-sandbox-test-", dir=HOST_DIR)))
    assert not path.is_relative_to("/tmp"), f"{HOST_DIR} resolves into /tmp here: {path}"
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def work(base: Path) -> Path:
    """The working directory dsh runs in."""
    path = base / "work"
    path.mkdir()
    return path


@pytest.fixture
def user_home(base: Path) -> Path:
    """The ``$HOME`` of the child dsh: never the real one, and outside the working directory."""
    path = base / "home"
    path.mkdir()
    return path


@pytest.fixture
def dsh_home(tmp_path: Path) -> Path:
    """``DSH_HOME``: where dsh (not the sandbox) writes its session logs."""
    return tmp_path / "dsh-home"


@pytest.fixture
def env(stub: StubServer, dsh_home: Path, user_home: Path) -> dict[str, str]:
    """The child's environment: the canary key, the stub, a private ``DSH_HOME`` and ``HOME``."""
    return child_env(stub.url, dsh_home, HOME=str(user_home), PROMPT_TOOLKIT_NO_CPR="1")


@pytest.fixture
def bare_path(tmp_path: Path) -> str:
    """A ``PATH`` of symlinks to ``bash``, ``sh``, ``ls`` and ``python3`` only: no ``bwrap``."""
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    for program in ("bash", "sh", "ls", "python3"):
        found = shutil.which(program)
        assert found is not None, f"{program} is needed on PATH for this test"
        (bin_dir / program).symlink_to(found)
    return str(bin_dir)


# -- helpers ------------------------------------------------------------------------------------


def bash_calls(*commands: str) -> ToolCalls:
    """One step asking for one ``bash`` call per command, in order."""
    return ToolCalls(tuple(("bash", json.dumps({"command": command})) for command in commands))


def leaving(command: str, justification: str) -> ToolCalls:
    """One step asking to run ``command`` outside the sandbox."""
    arguments = {"command": command, "sandbox": False, "justification": justification}
    return ToolCalls((("bash", json.dumps(arguments)),))


def sandboxed(work: Path, *, network: bool = False) -> str:
    """The note of a sandboxed call, as the call line and the question end."""
    network_said = "network allowed" if network else "no network"
    return f"(sandboxed: writes only {work}, reads all but your credentials, {network_said})"


def explained(work: Path) -> str:
    """The line that ends the result of a command the sandbox stopped (no network allowed)."""
    return (
        "[sandbox: the command may have failed because of the sandbox: the file system is "
        f"read-only outside {work} and /tmp, and inside it for .git/config, .git/hooks, .dsh, "
        ".agents and dsh's own installation; there is no network; unix sockets are refused. If "
        "it needs more, ask to run it with sandbox: false and a justification]"
    )


def call_lines(stderr: str) -> list[str]:
    """The ``dsh: [tool bash] $ ...`` lines (one-line commands only)."""
    return [line for line in stderr.split("\n") if line.startswith("dsh: [tool bash] $ ")]


def tool_results(dsh_home: Path) -> list[dict[str, Any]]:
    """The ``tool/result`` events of the one log, which must be whole and paired."""
    return data_of(assert_log_whole(dsh_home), "tool/result")


def assert_went_on(result: support.Run) -> None:
    """The session answered the line after the turn under test, and ended well: 0, or 3 when
    dsh refused a call it could not ask about (SPEC 15), which a pipe says on stderr."""
    refused = "dsh: [tool refused " in result.stderr
    assert result.returncode == (3 if refused else 0), result.stderr
    assert result.stdout.endswith(f"You said: {NEXT}\n"), result.stdout
    assert "Traceback" not in result.stderr


def no_sessions(dsh_home: Path) -> bool:
    return not list(dsh_home.rglob("session.jsonl"))


class LoopbackServer:
    """A TCP server on ``127.0.0.1:0``, in a thread, recording each connection's peer address."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.peers: list[tuple[str, int]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, peer = self.listener.accept()
            except OSError:  # shut down: the test is over
                return
            with connection:
                self.peers.append(peer)

    def mark(self) -> tuple[str, int]:
        """Connect from the test itself and wait until that connection is recorded.

        Connections are accepted in the order they were made, so every connection made before
        this one is in :attr:`peers` by then: an absence can be asserted, not waited for.
        """
        with socket.create_connection(("127.0.0.1", self.port), timeout=HANG_GUARD) as own:
            address: tuple[str, int] = own.getsockname()
        wait_until(lambda: address in self.peers, "the test's own connection to be recorded")
        return address

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (Linux)
        self.listener.close()
        self._thread.join(HANG_GUARD)
        assert not self._thread.is_alive(), "the loopback server's thread did not end"


def inject_command(text: str, paths: list[str]) -> str:
    """A command that pushes ``text`` and a carriage return into each terminal it can reach
    (``stdin`` is descriptor 0) with ``TIOCSTI``, and prints per path what happened."""
    script = textwrap.dedent(
        """
        import fcntl, os, sys, termios
        text = sys.argv[1].encode() + b"\\r"
        for path in sys.argv[2:]:
            try:
                # No O_NOCTTY: a session leader without a terminal would make it its own.
                fd = 0 if path == "stdin" else os.open(path, os.O_RDWR)
                for byte in text:
                    fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
                print(path, "INJECTED")
            except OSError as exc:
                print(path, exc.strerror)
        """
    )
    words = [sandbox_python(), "-c", script, text, *paths]
    return " ".join(shlex.quote(word) for word in words)


def has_cap_sys_admin() -> bool:
    """Whether this process may push input into any terminal it can open (``CAP_SYS_ADMIN``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 21 & 1)
    return False


def closed(term: Terminal) -> None:
    if term.child.isalive():
        term.child.close(force=True)


# 1. Writes outside the working directory.


@needs_bwrap
def test_writes_outside_the_working_directory_are_refused(
    env: dict[str, str], stub: StubServer, base: Path, work: Path, user_home: Path, dsh_home: Path
) -> None:
    token = uuid.uuid4().hex
    host_dir = base / f"host-dir-{token}"  # a host directory outside, for a symlink to point at
    host_dir.mkdir()
    (work / "link").symlink_to(host_dir)
    etc = Path(f"/etc/dsh-sandbox-test-{token}")
    # What each command writes to, as the shell names it in its error, and where on the host.
    targets = {
        "$HOME": (f"{user_home}/escaped-{token}", user_home / f"escaped-{token}"),
        "/etc": (str(etc), etc),
        "a symlink out": (f"link/escaped-{token}", host_dir / f"escaped-{token}"),
        "..": (f"../outside-{token}", base / f"outside-{token}"),
    }
    commands = [
        f'echo escaped > "$HOME/escaped-{token}"',
        f"echo escaped > {etc}",
        f"echo escaped > link/escaped-{token}",
        f"echo escaped > ../outside-{token}",
        # Allowed: the working directory; and /tmp, a private one.
        f"echo inside > inside-{token} && echo private > /tmp/{token} && cat /tmp/{token}",
    ]
    stub.enqueue(bash_calls(*commands))
    try:
        result = run_dsh(env, work, "--allow", "shell", stdin=f"write around\n{NEXT}\n")
    finally:
        # As root (CI), every one of these would succeed unsandboxed.
        escaped = [what for what, (_, path) in targets.items() if not removed(path)]
        in_host_tmp = not removed(Path("/tmp") / token)
    assert escaped == []
    assert not in_host_tmp
    assert (work / f"inside-{token}").read_text() == "inside\n"

    assert_went_on(result)
    assert call_lines(result.stderr) == [
        f"dsh: [tool bash] $ {command} {sandboxed(work)}" for command in commands
    ]
    *refused, inside = tool_results(dsh_home)
    for (what, (shown, _)), outcome in zip(targets.items(), refused, strict=True):
        content = outcome["content"]
        assert f": {shown}: Read-only file system\n" in content, what
        assert content.endswith(f"\n[exit code: 1]\n{explained(work)}"), what
        assert (outcome["is_error"], outcome["exit_code"]) == (False, 1), what
    assert (inside["content"], inside["exit_code"]) == ("private\n", 0)
    assert_requests_valid(stub)


# 2. The network.


@needs_bwrap
@pytest.mark.parametrize("network", [False, True], ids=["no-network", "allow-network"])
def test_a_loopback_server_is_out_of_reach(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path, network: bool
) -> None:
    server = LoopbackServer()
    try:
        port = server.port
        attempt = (
            f'import socket; socket.create_connection(("127.0.0.1", {port}), timeout=30); '
            'print("connected-python")'
        )
        commands = [
            f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected-bash",
            f"{shlex.quote(sandbox_python())} -c {shlex.quote(attempt)}",
        ]
        stub.enqueue(bash_calls(*commands))
        allow = "shell,network" if network else "shell"
        result = run_dsh(env, work, "--allow", allow, stdin=f"connect\n{NEXT}\n")
        # Connections are recorded in the order made: the test's own comes after the sandbox's.
        own = server.mark()
    finally:
        server.close()

    assert_went_on(result)
    assert call_lines(result.stderr) == [
        f"dsh: [tool bash] $ {command} {sandboxed(work, network=network)}" for command in commands
    ]
    bash, python = tool_results(dsh_home)
    if network:
        assert len(server.peers) == 3 and server.peers[-1] == own
        assert (bash["content"], bash["exit_code"]) == ("connected-bash\n", 0)
        assert (python["content"], python["exit_code"]) == ("connected-python\n", 0)
        return
    assert server.peers == [own]  # none from the sandbox: it has a loopback of its own
    assert "connect: Connection refused\n" in bash["content"]
    assert "ConnectionRefusedError: [Errno 111] Connection refused\n" in python["content"]
    for outcome in (bash, python):
        assert outcome["content"].endswith(f"\n[exit code: 1]\n{explained(work)}")
        assert "connected" not in outcome["content"]
    assert_requests_valid(stub)


# 3. SIGKILL of dsh while a sandboxed command runs.


@needs_bwrap
def test_sigkill_of_dsh_leaves_no_sandboxed_process(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path
) -> None:
    seconds = unique_seconds()
    stub.enqueue(bash_calls(f"sleep {seconds}"))
    proc = start_dsh(env, work, "--allow", "shell")
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"hang\n")
        proc.stdin.flush()
        wait_for_event(proc, dsh_home, "tool/call")
        sleeping: list[int] = []

        def running() -> bool:
            sleeping[:] = processes_with(f"sleep\0{seconds}\0")
            return bool(sleeping)

        wait_until(running, f"sleep {seconds} to run")
        # It runs in the sandbox's own PID namespace, not dsh's.
        assert os.readlink(f"/proc/{sleeping[0]}/ns/pid") != os.readlink("/proc/self/ns/pid")
        proc.kill()  # dsh cannot clean up: only bwrap's --die-with-parent can
        proc.communicate(timeout=HANG_GUARD)
        assert proc.returncode == -signal.SIGKILL
        assert not has_event(dsh_home, "tool/result")
        # The sleep and bwrap: everything whose command line holds the marker.
        wait_processes_gone(seconds)
        result = run_dsh(env, work, "-c", "--allow", "shell", stdin="hello again\n")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in processes_with(seconds):
            os.kill(pid, signal.SIGKILL)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "[turn interrupted by a previous process exit]\nYou said: hello again\n"
    events = assert_log_whole(dsh_home)
    (call,) = data_of(events, "tool/call")
    (outcome,) = data_of(events, "tool/result")
    assert (outcome["call_id"], outcome["is_error"]) == (call["call_id"], True)
    assert outcome["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert [end["reason"]["kind"] for end in data_of(events, "turn/end")] == [
        "interrupted",
        "completed",
    ]
    last = stub.requests[-1]["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
    assert_requests_valid(stub)


# 4. A command that leaves processes behind in the background.


@needs_bwrap
def test_background_processes_end_with_the_sandbox(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path
) -> None:
    # Unsandboxed, dsh kills the command's process group when it exits, and a child that left
    # the group (setsid, a double fork) lives on: process.py's docstring says so, and it is not
    # tested. In the sandbox, the PID namespace ends when the command does, and all of it with
    # it.
    detached, orphaned = unique_seconds(), unique_seconds()
    commands = [
        f"setsid sleep {detached} & disown; echo started",
        f"( sleep {orphaned} & ); echo double-forked",
    ]
    stub.enqueue(bash_calls(*commands))
    try:
        result = run_dsh(env, work, "--allow", "shell", stdin=f"fork\n{NEXT}\n")
        assert_went_on(result)  # the sleeps held neither the output pipe nor the turn
        wait_processes_gone(detached)
        wait_processes_gone(orphaned)
    finally:
        for pid in processes_with(detached) + processes_with(orphaned):
            os.kill(pid, signal.SIGKILL)
    results = tool_results(dsh_home)
    assert [(r["content"], r["exit_code"]) for r in results] == [
        ("started\n", 0),
        ("double-forked\n", 0),
    ]
    assert_requests_valid(stub)


# 5. TIOCSTI: pushing input into the terminal.


@needs_bwrap
def test_no_terminal_to_inject_into_on_a_pipe(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path
) -> None:
    stub.enqueue(bash_calls(inject_command(f"injected-{uuid.uuid4().hex}", ["stdin", "/dev/tty"])))
    result = run_dsh(env, work, "--allow", "shell", stdin=f"inject\n{NEXT}\n")
    assert_went_on(result)
    (outcome,) = tool_results(dsh_home)
    # stdin is /dev/null; no controlling terminal (--new-session).
    assert outcome["content"] == (
        "stdin Inappropriate ioctl for device\n/dev/tty No such device or address\n"
    )


def inject_on_a_terminal(
    argv: list[str], env: dict[str, str], work: Path, dsh_home: Path, stub: StubServer
) -> tuple[Terminal, str, str, str]:
    """dsh on a pty runs a command that tries to inject a line into that pty.

    Returns the terminal (at its prompt after the turn), the pty's path, the injected text
    and the command's output.
    """
    term = spawn_terminal(argv, env, work, dsh_home)
    term.child.expect_exact(PROMPT)
    tty = os.readlink(f"/proc/{term.child.pid}/fd/0")
    assert tty.startswith("/dev/pts/")
    text = f"injected-{uuid.uuid4().hex}"
    paths = ["stdin", "/dev/tty", tty]
    stub.enqueue(bash_calls(inject_command(text, paths)))
    term.child.sendline("inject")
    term.child.expect_exact("Tool results: [bash]")
    term.child.expect_exact(PROMPT)
    (outcome,) = term.events("tool/result")
    return term, tty, text, outcome["content"]


@needs_bwrap
def test_no_injection_into_dsh_s_terminal(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path
) -> None:
    term = None
    try:
        # dsh has a controlling terminal here; its command, in its own session, has none, and
        # the sandbox's /dev has no pty of the host's.
        term, tty, _, content = inject_on_a_terminal(
            [*DSH, "--allow", "shell"], env, work, dsh_home, stub
        )
        assert content == (
            "stdin Inappropriate ioctl for device\n"
            "/dev/tty No such device or address\n"
            f"{tty} No such file or directory\n"
        )
        marker = f"marker-{uuid.uuid4().hex}"
        term.child.sendline(marker)
        term.child.expect_exact(f"You said: {marker}")
        assert term.leave() == 0
        # Nothing arrived as input: the next turn is the marker alone.
        assert [data["text"] for data in term.events("user/message")] == ["inject", marker]
    finally:
        if term is not None:
            closed(term)


@pytest.mark.skipif(
    not has_cap_sys_admin(),
    reason="the check's control pushes input into a terminal that is not its own: that needs "
    "CAP_SYS_ADMIN (root), which this test process lacks",
)
def test_the_injection_check_sees_an_injection(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path
) -> None:
    """The control: unsandboxed, as root, a command opens the pty by its path and injects a
    line, which dsh reads as the next turn. So the test above can fail."""
    term = None
    try:
        term, tty, text, content = inject_on_a_terminal(
            [*DSH, "--allow", "shell", "--sandbox", "off"], env, work, dsh_home, stub
        )
        assert content.endswith(f"{tty} INJECTED\n")
        term.child.expect_exact(f"You said: {text}")
        assert term.leave() == 0
        assert [data["text"] for data in term.events("user/message")] == ["inject", text]
    finally:
        if term is not None:
            closed(term)


# 6. A working directory that is / or $HOME: the question says what that means.


@needs_bwrap
@pytest.mark.parametrize("where", ["root", "home"])
def test_the_question_says_what_a_wide_working_directory_means(
    env: dict[str, str], stub: StubServer, user_home: Path, dsh_home: Path, where: str
) -> None:
    if where == "root":  # nothing is written there: the command only asks, and is refused
        cwd = Path("/")
        note = (
            "(sandboxed: writes anywhere under / — the working directory is the root; "
            "reads all but your credentials; no network)"
        )
    else:
        cwd = user_home
        note = (
            f"(sandboxed: writes only {user_home} — your home directory, dotfiles and all; "
            "reads all but your credentials; no network)"
        )
    stub.enqueue(bash_calls("true"))
    term = spawn_terminal(DSH, env, cwd, dsh_home)
    try:
        term.send_turn("look")
        term.child.expect_exact(f"[tool bash] $ true {note}\r\n")
        term.expect_question("bash", "$ true", note)
        term.keys("n\r")
        term.child.expect_exact('[tool refused bash] the user rejected tool "bash"\r\n')
        term.send_turn(NEXT)
        term.child.expect_exact(f"You said: {NEXT}")
        assert term.leave() == 0
    finally:
        closed(term)
    assert term.decisions() == ["rejected"]
    assert term.events("tool/call") == []
    (outcome,) = term.events("tool/result")
    assert outcome["content"] == 'Error: the user rejected tool "bash"'


# 7. Without bubblewrap, and the flags.


def test_sandbox_on_without_bwrap_is_a_startup_failure(
    env: dict[str, str], work: Path, dsh_home: Path, bare_path: str
) -> None:
    bare = {**env, "PATH": bare_path}
    for args, extra in ((["--sandbox", "on"], {}), ([], {"DSH_SANDBOX": "on"})):
        result = run_dsh({**bare, **extra}, work, "--allow", "shell", *args, stdin="hello\n")
        assert (result.returncode, result.stdout) == (2, ""), (args, extra)
        assert result.stderr == f"dsh: startup failed: --sandbox on: {NO_BWRAP} ({INSTALL})\n"
        assert no_sessions(dsh_home)


def test_auto_without_bwrap_runs_unsandboxed_and_says_so_once(
    env: dict[str, str], stub: StubServer, base: Path, work: Path, dsh_home: Path, bare_path: str
) -> None:
    token = uuid.uuid4().hex
    outside = base / f"unsandboxed-{token}"
    first, second = f"echo written > ../unsandboxed-{token}", "true"
    stub.enqueue(bash_calls(first), bash_calls(second))
    bare = {**env, "PATH": bare_path}
    result = run_dsh(bare, work, "--allow", "shell", stdin=f"one\ntwo\n{NEXT}\n")
    assert_went_on(result)
    unsandboxed = f"(not sandboxed: {NO_BWRAP})"
    assert call_lines(result.stderr) == [
        f"dsh: [tool bash] $ {first} {unsandboxed}",
        f"dsh: [tool bash] $ {second} {unsandboxed}",
    ]
    notices = [line for line in result.stderr.split("\n") if "without a sandbox" in line]
    assert notices == [f"dsh: commands run without a sandbox: {NO_BWRAP}; to have one: {INSTALL}"]
    assert outside.read_text() == "written\n"  # what the line says is true: no sandbox
    assert [r["content"] for r in tool_results(dsh_home)] == [NO_OUTPUT, NO_OUTPUT]


def test_dsh_sandbox_off_equals_the_flag_and_a_bad_value_fails(
    env: dict[str, str], stub: StubServer, base: Path, work: Path, tmp_path: Path, bare_path: str
) -> None:
    runs: dict[str, support.Run] = {}
    ways: dict[str, tuple[list[str], dict[str, str]]] = {
        "flag": (["--sandbox", "off"], {}),
        "variable": ([], {"DSH_SANDBOX": "off"}),
        # The flag wins over the variable: with no bwrap, "on" would fail at startup.
        "flag over variable": (["--sandbox", "off"], {"DSH_SANDBOX": "on", "PATH": bare_path}),
    }
    for name, (args, extra) in ways.items():
        stub.enqueue(bash_calls("echo written > ../off-$DSH_TEST_WAY"))
        home = tmp_path / f"dsh-home-{len(runs)}"
        way_env = {**env, "DSH_HOME": str(home), "DSH_TEST_WAY": str(len(runs)), **extra}
        runs[name] = run_dsh(way_env, work, "--allow", "shell", *args, stdin=f"go\n{NEXT}\n")
        assert_went_on(runs[name])
        assert (base / f"off-{len(runs) - 1}").read_text() == "written\n", name
        assert call_lines(runs[name].stderr) == [
            "dsh: [tool bash] $ echo written > ../off-$DSH_TEST_WAY (not sandboxed)"
        ], name
        assert "without a sandbox" not in runs[name].stderr  # off is chosen: no notice
    assert runs["flag"].stdout == runs["variable"].stdout == runs["flag over variable"].stdout

    for args, extra, source in (
        ([], {"DSH_SANDBOX": "sometimes"}, "DSH_SANDBOX"),
        (["--sandbox", "sometimes"], {}, "--sandbox"),
    ):
        home = tmp_path / "dsh-home-bad"
        bad = run_dsh({**env, "DSH_HOME": str(home), **extra}, work, *args, stdin="hello\n")
        assert (bad.returncode, bad.stdout) == (2, "")
        assert bad.stderr == (
            f"dsh: startup failed: {source} must be auto, on or off, not 'sometimes'\n"
        )
        assert no_sessions(home)


# 8. Leaving the sandbox.


@needs_bwrap
def test_leaving_the_sandbox_on_a_pipe_is_refused(
    env: dict[str, str], stub: StubServer, work: Path, user_home: Path, dsh_home: Path
) -> None:
    left = user_home / f"left-{uuid.uuid4().hex}"
    stub.enqueue(leaving(f"touch $HOME/{left.name}", "needs the real home"))
    result = run_dsh(env, work, "--allow", "shell", stdin=f"leave\n{NEXT}\n")
    assert_went_on(result)
    assert removed(left)  # refused: it never ran
    assert f"dsh: [tool refused bash] {LEAVE_REFUSED.removeprefix('Error: ')}\n" in result.stderr
    events = assert_log_whole(dsh_home)
    assert data_of(events, "tool/call") == []
    assert [d["outcome"] for d in data_of(events, "approval/decided")] == ["unavailable"]
    (outcome,) = data_of(events, "tool/result")
    assert (outcome["is_error"], outcome["content"]) == (True, LEAVE_REFUSED)


def test_leaving_the_sandbox_runs_with_sandbox_off(
    env: dict[str, str], stub: StubServer, work: Path, user_home: Path, dsh_home: Path
) -> None:
    left = user_home / f"left-{uuid.uuid4().hex}"
    command = f"touch $HOME/{left.name}"
    stub.enqueue(leaving(command, "needs the real home"))
    result = run_dsh(env, work, "--allow", "shell", "--sandbox", "off", stdin=f"leave\n{NEXT}\n")
    assert_went_on(result)
    assert left.exists()
    assert call_lines(result.stderr) == [f"dsh: [tool bash] $ {command} (not sandboxed)"]
    (outcome,) = tool_results(dsh_home)
    assert (outcome["is_error"], outcome["content"], outcome["exit_code"]) == (False, NO_OUTPUT, 0)


@needs_bwrap
def test_leaving_the_sandbox_on_a_terminal_asks_even_with_allow_shell(
    env: dict[str, str], stub: StubServer, work: Path, user_home: Path, dsh_home: Path
) -> None:
    left = user_home / f"left-{uuid.uuid4().hex}"
    command = f"touch $HOME/{left.name}"
    stub.enqueue(leaving(command, "needs the real home"))
    term = spawn_terminal([*DSH, "--allow", "shell"], env, work, dsh_home)
    try:
        term.send_turn("leave")
        term.child.expect_exact('the model\'s justification: "needs the real home"\r\n')
        term.expect_question("bash", f"$ {command}", LEAVING_NOTE, once=True)
        assert not left.exists()  # asked before it ran
        term.keys("y\r")
        term.child.expect_exact("[tool bash exit 0]")
        term.send_turn(NEXT)
        term.child.expect_exact(f"You said: {NEXT}")
        assert term.leave() == 0
    finally:
        closed(term)
    assert left.exists()
    assert term.decisions() == ["allowed"]
    (outcome,) = term.events("tool/result")
    assert (outcome["is_error"], outcome["content"]) == (False, NO_OUTPUT)
