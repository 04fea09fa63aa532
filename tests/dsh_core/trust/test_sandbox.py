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
import errno
import os
import pty
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from dsh_core.errors import ABORTED
from dsh_core.tools import Access, ToolOutput
from dsh_core.tools.shell import LEAVING_NOTE, BashTool, shell_argv
from dsh_core.trust.confinement import confine, undo
from dsh_core.trust.launchers import Launcher, Sandbox, Unsandboxed
from dsh_core.trust.policy import installation_paths, inventory
from dsh_core.trust.repositories import RepositoryScan
from dsh_core.trust.sandbox import (
    INSTALL_HINT,
    SANDBOX_UNAVAILABLE,
    SYSTEM_BWRAP,
    AutoSandbox,
    Bwrap,
    SandboxUnavailable,
    _probe,
    choose_launcher,
    find_bwrap,
    probe_bwrap,
)
from dsh_core.trust.seccomp import socket_filter
from dsh_core.trust.workspace import Workspace
from tests.conftest import CANARY_KEY
from tests.dsh_core.tools.test_shell import (  # noqa: F401 (fixtures used by name)
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


def explained(root: Path) -> str:
    """The last line of a command the sandbox stopped, without the network."""
    return (
        "[sandbox: the command may have failed because of the sandbox: the file system is "
        f"read-only outside {root} and /tmp, and inside it for .git/config, .git/hooks, .dsh, "
        f".agents and dsh's own installation; there is no network; unix sockets are refused. "
        f"{HINT}"
    )


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


def fake_bwrap(bin_dir: Path, message: str) -> Path:
    """A ``bwrap`` in ``bin_dir`` that fails, saying ``message``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    fake = bin_dir / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


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


def test_auto_does_not_probe_before_the_first_call(workspace: Workspace, tmp_path: Path) -> None:
    # A bwrap of its own (a fresh path), so that this probe is not cached from another test.
    fake = fake_bwrap(tmp_path / f"bin-{uuid.uuid4().hex}", "no namespaces here")
    workspace.environment = {**workspace.environment, "PATH": f"{fake.parent}:/usr/bin:/bin"}
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
    message = "bwrap: No permissions to create new namespace, likely because the kernel does not"
    fake = fake_bwrap(tmp_path / "bin-broken-bwrap", message)
    path = f"{fake.parent}:/usr/bin:/bin"
    workspace.environment = {**workspace.environment, "PATH": path}
    problem = f"{fake} does not work here (exit status 1: {message})"
    assert probe_bwrap(path) == problem
    launcher = choose_launcher("auto", workspace=workspace, network=False)
    assert launcher.note == f"(not sandboxed: {problem})"
    with pytest.raises(SandboxUnavailable) as caught:
        choose_launcher("on", workspace=workspace, network=False)
    assert caught.value.message == f"--sandbox on: {problem} ({INSTALL_HINT})"
    assert "bubblewrap" in caught.value.message


def test_a_bwrap_under_the_working_directory_is_passed_over(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a sandboxed command could have planted for dsh to run outside the sandbox.
    planted = fake_bwrap(workspace.root / "bin", "planted")
    outside = fake_bwrap(tmp_path / "bin-outside", "outside")
    monkeypatch.chdir(workspace.root)  # "bin": the working directory's, whatever it is
    assert find_bwrap(f"{planted.parent}:bin:{outside.parent}", root=workspace.root) == (
        str(outside),
        None,
    )
    assert find_bwrap(f"bin:{outside.parent}", root=None) == (str(outside), None)
    # Only planted ones: the system's, where there is one; else none, saying why.
    program, problem = find_bwrap(f"{planted.parent}:bin", root=workspace.root)
    if os.access(SYSTEM_BWRAP, os.X_OK):
        assert (program, problem) == (SYSTEM_BWRAP, None)
    else:
        assert program is None
        assert problem == (
            f"the only bwrap on PATH ({planted}, bin/bwrap) is where commands can write: not used"
        )


def test_a_python_path_holding_the_working_directory_keeps_nothing_in_it(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PYTHONPATH=$HOME with the work in ~/project: dsh's installation holds the working
    # directory, which does not make a bwrap planted in it one the sandbox cannot write.
    planted = fake_bwrap(workspace.root / "bin", "planted")
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    installation_paths.cache_clear()
    try:
        assert Path(tmp_path) in installation_paths()
        program, _ = find_bwrap(str(planted.parent), root=workspace.root)
    finally:
        installation_paths.cache_clear()
    assert program != str(planted)


def test_the_shell_is_never_taken_from_under_the_working_directory(
    workspace: Workspace, tmp_path: Path
) -> None:
    planted = workspace.root / "bin"
    planted.mkdir()
    (planted / "bash").symlink_to("/bin/sh")
    environment = {"PATH": f"{planted}:/usr/bin:/bin"}
    shell = shell_argv("ls", environment, workspace.root)[0]
    assert not shell.startswith(str(workspace.root)) and shell.endswith("/bash")
    assert shell_argv("ls", environment)[0] == f"{planted}/bash"  # no root: no working directory


# --- the notes and the explanations: always run -----------------------------------------------

READS = "reads all but your credentials"
LIMITS = (
    "the file system is read-only outside /src and /tmp, and inside it for .git/config, "
    ".git/hooks, .dsh, .agents and dsh's own installation"
)


def test_the_note_says_what_the_sandbox_allows(tmp_path: Path) -> None:
    home = tmp_path / "home" / "user"
    work = tmp_path / "work"
    assert Bwrap(work, home=home).note == f"(sandboxed: writes only {work}, {READS}, no network)"
    assert Bwrap(work, network=True).note == (
        f"(sandboxed: writes only {work}, {READS}, network allowed)"
    )
    assert Bwrap(Path("/"), home=home).note == (
        f"(sandboxed: writes anywhere under / — the working directory is the root; {READS}; "
        "no network)"
    )
    assert Bwrap(home, home=home).note == (
        f"(sandboxed: writes only {home} — your home directory, dotfiles and all; {READS}; "
        "no network)"
    )
    holder = tmp_path / "home"
    assert Bwrap(holder, home=home, network=True).note == (
        f"(sandboxed: writes only {holder} — it holds your home directory {home}; {READS}; "
        "network allowed)"
    )


def test_the_note_for_a_workspace_at_home(tmp_path: Path) -> None:
    home = tmp_path / "me"
    home.mkdir()
    workspace = Workspace.at(home, tmp_path / "out")
    workspace.environment = {**workspace.environment, "HOME": str(home)}
    launcher = Bwrap.for_workspace(workspace)
    assert launcher.note == (
        f"(sandboxed: writes only {home} — your home directory, dotfiles and all; {READS}; "
        "no network)"
    )
    assert isinstance(launcher, Sandbox)


@pytest.mark.parametrize(
    "output",
    [
        "touch: cannot touch '/etc/x': Read-only file system\n",
        "OSError: [Errno 30] Read-only file system: '/root/.cache'\n",
        "mv: cannot move '.git' to 'x': Device or resource busy\n",
        "OSError: [Errno 97] Address family not supported by protocol\n",
        "curl: (6) Could not resolve host: example.com\n",
        "Failed to establish a new connection: [Errno -3] Temporary failure in name resolution",
        "dial tcp: lookup proxy.golang.org: dial udp 8.8.8.8:53: connect: network is unreachable",
        "npm ERR! request to https://registry.npmjs.org/ failed, reason: getaddrinfo EAI_AGAIN",
        "ConnectionRefusedError: [Errno 111] Connection refused\n",
    ],
)
def test_a_failure_the_sandbox_caused_is_explained(output: str) -> None:
    line = Bwrap(Path("/src"), seccomp=b"").explain(output)
    assert line == (
        f"[sandbox: the command may have failed because of the sandbox: {LIMITS}; there is no "
        f"network; unix sockets are refused. {HINT}"
    )


def test_other_failures_get_the_limits_only() -> None:
    assert Bwrap(Path("/src"), seccomp=b"").explain("FAILED tests/test_x.py::test_y\n") == (
        f"[sandbox: {LIMITS}; there is no network; unix sockets are refused]"
    )
    # With the network allowed, a network failure is not the sandbox's doing.
    allowed = Bwrap(Path("/src"), network=True, seccomp=None)
    assert allowed.explain("curl: (6) Could not resolve host: x") == f"[sandbox: {LIMITS}]"
    assert allowed.explain("Read-only file system").endswith(HINT)
    assert Bwrap(Path("/"), seccomp=None).explain("boom") == "[sandbox: there is no network]"


def test_the_options(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / ".git" / "config").write_text("")
    options = Bwrap(work.resolve()).arguments()
    work = work.resolve()
    text = " ".join(options)
    for flag in (
        "--ro-bind / /",
        "--dev /dev",
        "--proc /proc",
        "--ro-bind /proc/sys /proc/sys",
        "--ro-bind /proc/fs /proc/fs",
        "--tmpfs /tmp",
        f"--bind {work} {work}",
        f"--bind {work}/.git {work}/.git",
        f"--ro-bind {work}/.git/config {work}/.git/config",
        "--unshare-net",
        "--unshare-pid",
        "--new-session",
        "--die-with-parent",
        "--cap-drop ALL",
        f"--chdir {work}",
    ):
        assert flag in text
    assert "--as-pid-1" not in options
    # Order matters: the working directory goes on top of the private /tmp; the pin before
    # the read-only paths inside it.
    assert text.index("--tmpfs /tmp") < text.index(f"--bind {work} {work}")
    assert text.index(f"--bind {work}/.git ") < text.index(f"--ro-bind {work}/.git/config")
    assert "--unshare-net" not in Bwrap(work, network=True).arguments()
    whole = " ".join(Bwrap(Path("/")).arguments())
    assert whole.index("--bind / /") < whole.index("--dev /dev")
    # Nothing is mounted where nothing is: a mount point would be made in the person's tree.
    assert f"{work}/.dsh" not in text and "--remount-ro" not in text


# --- the confinement, as a table: always run -----------------------------------------------------


def repository(path: Path, *, hooks: bool = True) -> Path:
    """A minimal git directory in ``path/.git``: HEAD, config, and hooks/ if asked."""
    gitdir = path / ".git"
    gitdir.mkdir(parents=True)
    (gitdir / "HEAD").write_text("ref: refs/heads/main\n")
    (gitdir / "config").write_text("[core]\n")
    if hooks:
        (gitdir / "hooks").mkdir()
    return gitdir


def relative(root: Path, paths: tuple[Path, ...]) -> list[str]:
    return [str(path.relative_to(root)) for path in paths]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path.resolve()


def test_a_plain_directory_gets_no_mounts_at_its_top_only_a_look_afterwards(root: Path) -> None:
    plan = confine(root)
    assert relative(root, plan.tripwires) == [".dsh", ".agents", "AGENTS.md"]
    assert (plan.read_only, plan.pinned) == ((), ())
    assert sorted(root.iterdir()) == []  # (a .git a command makes: a new git directory)


def test_what_git_s_configuration_names_is_kept_and_its_parents_pinned(root: Path) -> None:
    repository(root)
    (root / "tools").mkdir()
    (root / "tools" / "watch.sh").write_text("#!/bin/sh\n")
    (root / ".git" / "config").write_text(
        "[core]\n\thooksPath = .husky/_\n\tfsmonitor = tools/watch.sh\n"
        "[include]\n\tpath = ../conf/git.inc\n"
    )
    (root / ".husky").mkdir()
    plan = confine(root)
    assert "tools/watch.sh" in relative(root, plan.read_only)
    assert ".husky/_" in relative(root, plan.tripwires)
    assert "conf/git.inc" in relative(root, plan.tripwires)  # its directory is missing too
    assert {"tools", ".husky"} <= set(relative(root, plan.pinned))


def test_undo_says_who_would_run_a_tripwire_by_what_kept_it_not_by_its_name(root: Path) -> None:
    # Second review (D4): the wording was picked by `reason.startswith("MCP server")`, which a
    # repository's directory can begin with too.
    from dsh_core.extensions.mcp.launch import server_files
    from dsh_core.extensions.mcp.spec import ServerSpec

    (root / ".git").write_text("gitdir: MCP servers/repo.git\n")  # git's, not dsh's
    started = server_files([ServerSpec("x", command=str(root / "bin" / "x"))], {}, root)
    plan = confine(root, started=started)
    (root / "MCP servers" / "repo.git").mkdir(parents=True)  # what a command made
    (root / "bin").mkdir()
    (root / "bin" / "x").write_text("#!/bin/sh\n")
    assert undo(plan, inventory(root)).notes == [
        "[sandbox: set aside bin/x as x.disabled-by-dsh: the command created it, and dsh would "
        'run what is there (MCP server "x"), outside the sandbox]',
        "[sandbox: set aside MCP servers/repo.git as repo.git.disabled-by-dsh: the command "
        "created it, and git would run or read what is there (MCP servers/repo.git), outside "
        "the sandbox]",
    ]


def test_the_parents_of_hidden_credentials_inside_are_pinned(root: Path) -> None:
    # Review finding 7: `mv .config .cfg` in a home working directory, then the next command
    # hid a name that no longer existed.
    (root / ".config" / "gcloud").mkdir(parents=True)
    (root / "state" / "dsh").mkdir(parents=True)
    plan = confine(root, home=root, dsh_home=root / "state" / "dsh")
    assert relative(root, plan.hidden_dirs) == [".config/gcloud", "state/dsh"]
    assert {".config", "state"} <= set(relative(root, plan.pinned))


def test_after_a_command_a_git_directory_it_made_is_looked_at(root: Path) -> None:
    repository(root)
    plan = confine(root)
    scan = RepositoryScan(root)
    scan.found()
    made = repository(root / "evil")  # what a command did: a repository, a hook, an alias
    (made / "config").write_text("[alias]\n\tst = !touch pwned\n")
    (made / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (made / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    quiet = repository(root / "quiet")  # a plain `git init`: nothing to set aside
    notes = undo(plan, inventory(root, found=scan.found())).notes
    assert notes == [
        "[sandbox: set aside evil/.git/config as config.disabled-by-dsh: the command made the "
        "git directory evil/.git, and it sets alias.st, which git would run outside the sandbox]",
        "[sandbox: set aside evil/.git/hooks as hooks.disabled-by-dsh: the command made the git "
        "directory evil/.git, and it holds hooks (post-checkout), which git would run outside "
        "the sandbox]",
    ]
    assert sorted(p.name for p in made.iterdir()) == [
        "HEAD",
        "config.disabled-by-dsh",
        "hooks.disabled-by-dsh",
    ]
    assert (quiet / "config").exists()
    assert not (root / "AGENTS.md").exists()  # (no placeholder was made: bwrap makes those)


def test_a_repository_keeps_its_configuration_and_hooks(root: Path) -> None:
    repository(root)
    (root / ".agents").mkdir()
    plan = confine(root)
    assert relative(root, plan.read_only) == [".agents", ".git/config", ".git/hooks"]
    assert relative(root, plan.pinned) == [".git"]
    assert relative(root, plan.tripwires) == [
        ".git/commondir",
        ".git/config.worktree",
        ".dsh",
        "AGENTS.md",
    ]


def test_missing_hooks_keep_the_git_directory_whole(root: Path) -> None:
    # Nothing may stand in for hooks/ in the person's .git while a command runs; keeping the
    # whole of it read-only costs commits in the sandbox, in a repository that has no hooks/.
    repository(root, hooks=False)
    plan = confine(root)
    assert relative(root, plan.read_only) == [".git"]
    assert relative(root, plan.tripwires) == [".dsh", ".agents", "AGENTS.md"]


def test_a_git_directory_that_is_not_a_repository_yet_is_kept_whole(root: Path) -> None:
    (root / ".git").mkdir()  # an empty .git: a placeholder left by a killed dsh, or a start
    assert relative(root, confine(root).read_only) == [".git"]


def test_a_symlinked_entry_keeps_the_git_directory_whole(root: Path) -> None:
    gitdir = repository(root, hooks=False)
    (gitdir / "hooks").symlink_to(root / "shared-hooks")
    plan = confine(root)
    assert relative(root, plan.read_only) == [".git"]
    assert plan.pinned == ()


def test_nested_repositories_and_protected_directories(root: Path) -> None:
    repository(root)
    repository(root / "vendor" / "lib")
    (root / "docs" / "deep" / ".dsh").mkdir(parents=True)
    (root / "node_modules" / "x").mkdir(parents=True)
    scan = RepositoryScan(root)
    found = scan.found()
    assert relative(root, found.repositories) == ["vendor/lib"]
    assert relative(root, found.protected) == ["docs/deep/.dsh"]
    assert found.complete
    plan = confine(root, found=found)
    assert relative(root, plan.read_only) == [
        ".git/config",
        ".git/hooks",
        "docs/deep/.dsh",
        "vendor/lib/.git/config",
        "vendor/lib/.git/hooks",
    ]
    # Every directory above a kept path is pinned: `mv vendor v2; mkdir -p vendor/lib/.git`
    # would otherwise put a fresh repository where the old one was.
    assert relative(root, plan.pinned) == [
        ".git",
        "docs",
        "vendor",
        "docs/deep",
        "vendor/lib",
        "vendor/lib/.git",
    ]


def test_a_worktree_and_its_common_directory(root: Path) -> None:
    # A bare repository with a linked worktree, both inside: no .git leads to the bare one.
    bare = root / "project.git"
    (bare / "hooks").mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text("[core]\n")
    linked = bare / "worktrees" / "wt"
    linked.mkdir(parents=True)
    (linked / "HEAD").write_text("ref: refs/heads/wt\n")
    (linked / "commondir").write_text("../..\n")
    (root / "wt").mkdir()
    (root / "wt" / ".git").write_text(f"gitdir: {linked}\n")
    plan = confine(root, found=RepositoryScan(root).found())
    assert sorted(relative(root, plan.read_only)) == [
        "project.git/config",
        "project.git/hooks",
        "project.git/worktrees/wt/commondir",
        "wt/.git",  # the pointer itself
    ]
    # The linked worktree's own config and hooks are not read by git: nothing kept for them.
    assert "project.git/worktrees/wt/hooks" not in relative(root, plan.tripwires)
    assert "project.git/worktrees/wt/config.worktree" in relative(root, plan.tripwires)


def test_submodules_git_directories(root: Path) -> None:
    gitdir = repository(root)
    for name in ("lib", "nested/name"):
        module = gitdir / "modules" / name
        (module / "hooks").mkdir(parents=True)
        (module / "HEAD").write_text("ref: refs/heads/main\n")
        (module / "config").write_text("[core]\n")
    kept = relative(root, confine(root).read_only)
    for name in ("lib", "nested/name"):
        assert f".git/modules/{name}/config" in kept
        assert f".git/modules/{name}/hooks" in kept


def test_dsh_s_installation_inside_the_working_directory(root: Path) -> None:
    venv = root / ".venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    outside = root.parent / "elsewhere"
    outside.mkdir()
    plan = confine(root, installation=(venv, site, outside, root))
    assert relative(root, plan.read_only) == [".venv"]  # one mount covers what it holds
    assert plan.pinned == ()


def test_nothing_is_kept_under_the_private_tmp(tmp_path: Path) -> None:
    # dsh in a venv under /tmp (CI makes one there) and a working directory of /: a mount of
    # the venv, or a pin of /tmp above it, would bring the host's /tmp into the sandbox.
    venv = Path(os.path.realpath(tmp_path)) / "venv"
    venv.mkdir()
    plan = confine(Path("/"), installation=(venv, Path("/usr")))
    assert plan.read_only == (Path("/usr"),)
    assert not any(path.is_relative_to("/tmp") for path in plan.pinned)
    # A working directory in /tmp is bound over the private one: what is inside it is kept.
    work = Path(os.path.realpath(tmp_path))
    assert confine(work, installation=(venv,)).read_only == (venv,)


def test_credentials_are_hidden(root: Path, tmp_path: Path) -> None:
    home = Path(os.path.realpath(tempfile.mkdtemp(prefix="dsh-test-home-", dir="/var/tmp")))
    try:
        (home / ".ssh").mkdir()
        (home / ".netrc").write_text("machine x password y\n")
        (home / ".config" / "gh").mkdir(parents=True)
        dotfiles = home / "dotfiles" / "aws"
        dotfiles.mkdir(parents=True)
        (home / ".aws").symlink_to(dotfiles)  # hidden where it leads
        dsh_home = home / "dsh-home"
        dsh_home.mkdir()
        plan = confine(root, home=home, dsh_home=dsh_home)
        assert relative(home, plan.hidden_dirs) == [
            ".ssh",
            "dotfiles/aws",
            ".config/gh",
            "dsh-home",
        ]
        assert relative(home, plan.hidden_files) == [".netrc"]
        # A working directory in one of them keeps it visible; one under /tmp is hidden already.
        assert confine(home / ".ssh", home=home).hidden_dirs == (
            dotfiles,
            home / ".config" / "gh",
        )
        assert confine(root, home=home, dsh_home=tmp_path / "dsh").hidden_dirs[-1] != (
            tmp_path / "dsh"
        )
    finally:
        shutil.rmtree(home)


def test_the_installation_is_where_dsh_runs_from() -> None:
    found = installation_paths()
    assert Path(os.path.realpath(sys.executable)) in found
    assert Path(os.path.realpath(sys.prefix)) in found
    assert Path(os.path.dirname(os.path.realpath(dsh_core_file()))) in found


def dsh_core_file() -> str:
    import dsh_core

    assert dsh_core.__file__ is not None
    return dsh_core.__file__


# --- the seccomp filter: always run ------------------------------------------------------------


def verdict(program: bytes, *, arch: int, nr: int, arg0: int = 0) -> int:
    """What ``program`` answers for one system call: a classic-BPF interpreter for the four
    instructions the filter uses, so each answer is checked without a kernel of that kind."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, accumulator = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # ld [k]
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35):  # jeq / jge k
            taken = accumulator == k if op == 0x15 else accumulator >= k
            pc += 1 + (jt if taken else jf)
        elif op == 0x06:  # ret k
            return int(k)
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")


ALLOW, KILL = 0x7FFF0000, 0x80000000
NO_FAMILY, NO_SYSCALL = 0x00050000 | errno.EAFNOSUPPORT, 0x00050000 | errno.ENOSYS
X86_64, I386, AARCH64, ARM = 0xC000003E, 0x40000003, 0xC00000B7, 0x40000028


@pytest.mark.parametrize(
    ("machine", "arch", "nr", "arg0", "expected"),
    [
        ("x86_64", X86_64, 41, socket.AF_UNIX, NO_FAMILY),  # socket(AF_UNIX)
        ("x86_64", X86_64, 41, socket.AF_VSOCK, NO_FAMILY),  # the hypervisor's host
        ("x86_64", X86_64, 41, (1 << 32) | socket.AF_UNIX, NO_FAMILY),  # high bits: ignored
        ("x86_64", X86_64, 41, socket.AF_INET, ALLOW),
        ("x86_64", X86_64, 41, socket.AF_INET6, ALLOW),
        ("x86_64", X86_64, 41, socket.AF_NETLINK, ALLOW),
        ("x86_64", X86_64, 53, socket.AF_UNIX, ALLOW),  # socketpair: asyncio needs it
        ("x86_64", X86_64, 42, 0, ALLOW),  # connect: nothing to connect without a socket
        ("x86_64", X86_64, 425, 0, NO_SYSCALL),  # io_uring_setup
        ("x86_64", X86_64, 0x40000000 | 41, socket.AF_UNIX, KILL),  # x32
        ("x86_64", I386, 359, socket.AF_UNIX, NO_FAMILY),  # i386 socket()
        ("x86_64", I386, 359, socket.AF_INET, ALLOW),
        ("x86_64", I386, 102, 1, NO_FAMILY),  # socketcall(SYS_SOCKET, ...)
        ("x86_64", I386, 102, 8, ALLOW),  # socketcall(SYS_SOCKETPAIR, ...)
        ("x86_64", I386, 41, socket.AF_UNIX, ALLOW),  # 41 is dup on i386
        ("x86_64", AARCH64, 198, socket.AF_UNIX, KILL),  # an ABI this machine has not
        ("aarch64", AARCH64, 198, socket.AF_UNIX, NO_FAMILY),
        ("aarch64", AARCH64, 199, socket.AF_UNIX, ALLOW),  # socketpair
        ("aarch64", AARCH64, 426, 0, NO_SYSCALL),
        ("aarch64", ARM, 281, socket.AF_UNIX, NO_FAMILY),
        ("aarch64", X86_64, 41, socket.AF_UNIX, KILL),
    ],
)
def test_the_filter_answers(machine: str, arch: int, nr: int, arg0: int, expected: int) -> None:
    assert verdict(socket_filter(machine), arch=arch, nr=nr, arg0=arg0) == expected


def test_no_filter_for_an_unknown_machine() -> None:
    with pytest.raises(ValueError, match="no seccomp filter for this machine"):
        socket_filter("riscv64")


_UNDER_FILTER = """
import asyncio, ctypes, socket, sys
program = bytes.fromhex(sys.argv[1])
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
buffer = ctypes.create_string_buffer(program, len(program))
fprog = Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
for family in (socket.AF_UNIX, socket.AF_INET):
    try:
        socket.socket(family).close()
        print(family.name, "ok")
    except OSError as exc:
        print(family.name, exc.strerror)
left, right = socket.socketpair()
left.send(b"x")
print("socketpair", right.recv(1).decode())
asyncio.run(asyncio.sleep(0))
print("asyncio ok")
"""


@pytest.mark.skipif(
    os.uname().machine not in ("x86_64", "aarch64"), reason="no filter for this machine"
)
def test_the_filter_in_the_kernel() -> None:
    program = socket_filter()
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_FILTER, program.hex()],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout == (
        "AF_UNIX Address family not supported by protocol\nAF_INET ok\nsocketpair x\nasyncio ok\n"
    ), done.stderr


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
            assert output.content.endswith(f"[exit code: 1]\n{explained(workspace.root)}"), what
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
        from dsh_core.trust.sandbox import choose_launcher
        from dsh_core.tools.shell import BashTool
        from dsh_core.trust.workspace import Workspace

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
        wait_processes_gone(str(workspace.root))  # bwrap too
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(fifo.fd)


@needs_bwrap
def test_ctrl_c_reaches_the_command_inside(workspace: Workspace, token: str) -> None:
    # dsh sends SIGINT to the sandbox's first process group, so the command can end its own
    # way (pytest's summary). The real escalation: SIGTERM would come only 2 s later.
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
            "(sandboxed: writes anywhere under / — the working directory is the root; "
            f"{READS}; no network)"
        )
        output = bash_run(tool, f"cat /proc/1/comm; test -e /tmp/{token} || echo private-tmp")
        assert output.content == "bwrap\nprivate-tmp\n"
    finally:
        host_file.unlink()


@needs_bwrap
def test_no_unix_socket_but_socketpair_and_asyncio(workspace: Workspace) -> None:
    # SPEC 10.6: a listening socket in the working directory itself is refused too (the filter
    # cannot tell where a socket leads); socketpair() and so asyncio keep working.
    path = workspace.root / "server.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        attempt = textwrap.dedent(
            """
            import asyncio, socket, sys
            try:
                socket.socket(socket.AF_UNIX).connect(sys.argv[1])
                print("connected")
            except OSError as exc:
                print(exc.strerror)
            left, right = socket.socketpair()
            left.send(b"x")
            print("socketpair", right.recv(1).decode())
            asyncio.run(asyncio.sleep(0))
            print("asyncio ok")
            """
        )
        command = f"{sandbox_python()} -c {shlex.quote(attempt)} {path}"
        for network in (False, True):
            output = bash_run(sandboxed(workspace, network=network), command)
            assert output.content == (
                "Address family not supported by protocol\nsocketpair x\nasyncio ok\n"
            ), network


@needs_bwrap
def test_git_works_inside_a_repository(workspace: Workspace) -> None:
    # Only its configuration and hooks are kept: committing (objects, refs, index) works.
    subprocess.run(["git", "init", "-q", str(workspace.root)], check=True)
    command = (
        "echo hi > f && git add f && git -c user.email=a@b -c user.name=n commit -qm one && "
        "git log --format=%s && git config core.fsmonitor 'touch ran'"
    )
    output = bash_run(sandboxed(workspace), command)
    # git writes a lock file beside it and renames it over: a mount point cannot be replaced.
    assert output.content.startswith(
        "one\nerror: could not write config file .git/config: Device or resource busy\n"
    )
    assert (workspace.root / ".git" / "config").read_text().count("fsmonitor") == 0


@needs_bwrap
def test_nothing_stands_in_for_what_is_missing_and_a_tripwire_is_set_aside(
    workspace: Workspace,
) -> None:
    subprocess.run(["git", "init", "-q", str(workspace.root)], check=True)
    command = "ls -a; mkdir -p .agents/x; echo /elsewhere > .git/commondir; true"
    output = bash_run(sandboxed(workspace), command)
    lines = output.content.splitlines()
    assert lines[:3] == [".", "..", ".git"]  # no placeholders, in the sandbox or the tree
    assert lines[3:] == [
        "[sandbox: set aside .git/commondir as commondir.disabled-by-dsh: the command created "
        "it, and git would take its configuration and hooks from it, outside the sandbox]",
        "[sandbox: set aside .agents as .agents.disabled-by-dsh: the command made it, and a "
        "session started there would take its instructions or skills from it]",
    ]
    assert sorted(p.name for p in workspace.root.iterdir()) == [".agents.disabled-by-dsh", ".git"]
    assert not (workspace.root / ".git" / "commondir").exists()


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
    assert launcher.note == f"(sandboxed: writes only {workspace.root}, {READS}, network allowed)"
    assert len(heard) == 1 and isinstance(heard[0], Bwrap)
