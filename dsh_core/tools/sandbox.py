"""``bash`` under bubblewrap: writes only the working directory, no network (SPEC section 8).

    # at startup; raises SandboxUnavailable for "on" when bwrap cannot run here
    launcher = choose_launcher(config.sandbox, workspace=workspace, network="network" in allow)
    tool = BashTool(workspace, launcher=launcher)

``off`` runs commands as they are; ``on`` probes ``bwrap`` at once and raises
:class:`SandboxUnavailable` (naming the ``bubblewrap`` package) when it cannot run; ``auto``
returns an :class:`AutoSandbox` that probes at the first ``bash`` call, never at startup, and
runs unsandboxed, saying why in its note, when ``bwrap`` is missing or fails. The probe
(:func:`probe_bwrap`) runs once per process.

What :class:`Bwrap` gives a command:

- ``/`` read-only, the working directory writable (symlinks in it still lead to read-only
  places), a private ``/tmp``, a minimal ``/dev``, the sandbox's own ``/proc`` with
  ``/proc/sys`` read-only (uid 0 could otherwise write the host's sysctls);
- no network (``--unshare-net``: only a loopback of its own) unless network is allowed;
- its own PID, IPC and UTS namespaces: it sees none of dsh's processes (nor their
  environment), and ``/proc/1`` is bwrap's small init, which reaps orphans (``--as-pid-1``
  is not used: a command as PID 1 could not even ``kill -9 $$`` itself);
- its own session (``--new-session``): no controlling terminal, so no ``TIOCSTI``
  injection into the user's terminal;
- no capabilities (``--cap-drop ALL``): when dsh runs as root, bwrap otherwise keeps them,
  and a command could simply ``mount -o remount,rw /``;
- the Unix sockets that would let it act outside hidden (a read-only mount does not stop a
  ``connect``): the user's runtime directory (D-Bus session bus: ``systemd-run --user``),
  the system bus, systemd's private socket, container engines' sockets, the SSH agent.
  Others, in unusual places, stay reachable;
- death with dsh (``--die-with-parent``): even a SIGKILL of dsh leaves no command behind.

Signals: bubblewrap 0.8 forwards none, and a ``--new-session`` command is out of reach of
the process group that dsh signals, so a Ctrl-C would kill bwrap and, with it, the command
at once, without the SIGINT that lets ``pytest`` print its summary. A small relay in Python
(:data:`_RELAY`, ``python -I -S``) therefore stands between: it is the process dsh starts and
signals; it runs bwrap in a process group of its own, learns the sandbox's first process
from ``--info-fd`` (holding signals until then), passes SIGINT, SIGTERM, SIGHUP and SIGQUIT
on to the sandbox's process group, exits as bwrap exits, and dies with dsh
(``PR_SET_PDEATHSIG``), as bwrap dies with it. A SIGKILL of the relay (the end of dsh's
escalation) takes bwrap and the whole sandbox with it.
bwrap reports a command killed by signal N as exit status 128 + N.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..chain import error_chain
from ..errors import SANDBOX_UNAVAILABLE, HarnessError
from .launchers import Launcher, Unsandboxed
from .workspace import Workspace

__all__ = [
    "INSTALL_HINT",
    "SANDBOX_UNAVAILABLE",
    "AutoSandbox",
    "Bwrap",
    "SandboxMode",
    "SandboxUnavailable",
    "choose_launcher",
    "probe_bwrap",
    "require_bwrap",
]

SandboxMode = Literal["auto", "on", "off"]
"""``--sandbox``: bwrap when it works, bwrap or nothing, never bwrap."""

INSTALL_HINT = "Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap"

_PROBE_TIMEOUT_S = 30.0
"""A bound for a bwrap that hangs, not a measurement: the probe takes milliseconds."""

_HIDDEN_PATHS = (
    "/run/user",  # the users' runtime directories: D-Bus session bus, systemd --user, agents
    "/run/dbus",  # the system bus
    "/run/systemd/private",  # systemd itself, for root
    "/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/libvirt",
)
"""Paths whose sockets would let a command act outside the sandbox, hidden when they exist."""

_READ_ONLY_WORDS = ("read-only file system",)
_NO_NETWORK_WORDS = (
    "network is unreachable",
    "temporary failure in name resolution",
    "could not resolve host",
    "couldn't resolve host",
    "name or service not known",
    "no address associated with hostname",
    "failed to resolve",
    "getaddrinfo",
    "eai_again",
    "connection refused",
    "failed to connect",
    "couldn't connect to server",
)
"""How failures caused by a missing network read, lower-cased (curl, git, pip, Python, npm,
Go): with the network unshared, a name never resolves and a connection to the host's
loopback is refused."""


class SandboxUnavailable(HarnessError):
    """``--sandbox on``, and bwrap is missing or cannot run here."""

    def __init__(self, message: str) -> None:
        super().__init__(message, SANDBOX_UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class Bwrap:
    """Runs the shell under bubblewrap, writing only ``root``; implements ``Sandbox``."""

    root: Path
    """The working directory, resolved: the one writable place besides a private ``/tmp``."""
    network: bool = False
    """``--allow network``: keep the host's network."""
    program: str = "bwrap"
    """The bwrap to run: a path found on ``PATH``."""
    home: Path | None = None
    """The user's home directory, resolved, for the note when ``root`` is it or holds it."""
    hide: tuple[str, ...] = ()
    """Paths to hide from the command when they exist (sockets, directories of sockets)."""
    python: str = field(default_factory=lambda: sys.executable)
    """The interpreter that runs the signal relay."""

    @classmethod
    def for_workspace(
        cls, workspace: Workspace, *, network: bool = False, program: str = "bwrap"
    ) -> Bwrap:
        """A Bwrap for ``workspace``: its root, its user's home, the sockets to hide."""
        environment = workspace.environment
        home = environment.get("HOME") or os.path.expanduser("~")
        return cls(
            workspace.root,
            network=network,
            program=program,
            home=Path(os.path.realpath(home)) if home.startswith("/") else None,
            hide=_HIDDEN_PATHS + _agent_sockets(environment),
        )

    @property
    def note(self) -> str:
        """``(sandboxed: writes only <dir>, no network)``, saying so when that is a lot."""
        network = "network allowed" if self.network else "no network"
        root, home = self.root, self.home
        if root == Path("/"):
            warning = "writes anywhere under / — the working directory is the root"
        elif home is not None and root == home:
            warning = f"writes only {root} — your home directory, dotfiles and all"
        elif home is not None and home.is_relative_to(root):
            warning = f"writes only {root} — it holds your home directory {home}"
        else:
            return f"(sandboxed: writes only {root}, {network})"
        return f"(sandboxed: {warning}; {network})"

    def arguments(self) -> list[str]:
        """bwrap's options, in the order they must be applied (later mounts cover earlier)."""
        root = str(self.root)
        whole = self.root == Path("/")
        options = ["--ro-bind", "/", "/"]
        if whole:  # before /dev, /proc and /tmp: binding / again would bring the host's back
            options += ["--bind", "/", "/"]
        options += ["--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        options += ["--tmpfs", "/tmp"]
        if not whole:  # after /tmp: a working directory under /tmp goes on top of the tmpfs
            options += ["--bind", root, root]
        # Looked at for each command: a socket that came or went since must not break it.
        for path, is_dir in _existing(self.root, self.hide):
            if is_dir:
                options += ["--tmpfs", str(path)]
            else:  # a socket: connect() to /dev/null is refused
                options += ["--ro-bind", "/dev/null", str(path)]
        if not self.network:
            options.append("--unshare-net")
        options += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
        options += ["--die-with-parent", "--cap-drop", "ALL", "--chdir", root]
        return options

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``[python, relay, <dsh pid>, bwrap, ..., "--", *argv]``."""
        relay = [self.python, "-I", "-S", "-c", _RELAY, str(os.getpid())]
        return [*relay, self.program, *self.arguments(), "--", *argv]

    def explain(self, output: str) -> str:
        """The line that ends a failed command's result: what the sandbox forbids.

        When ``output`` shows that the sandbox stopped the command (a read-only file system,
        no network), the line says so and how to ask for more.
        """
        limits = []
        if self.root != Path("/"):
            limits.append(f"the file system is read-only outside {self.root} and /tmp")
        if not self.network:
            limits.append("there is no network")
        said = "; ".join(limits) or "other processes and some system paths are out of reach"
        text = output.lower()
        hit = any(words in text for words in _READ_ONLY_WORDS) or (
            not self.network and any(words in text for words in _NO_NETWORK_WORDS)
        )
        if not hit:
            return f"[sandbox: {said}]"
        return (
            f"[sandbox: the command may have failed because of the sandbox: {said}. If it "
            "needs more, ask to run it with sandbox: false and a justification]"
        )


def _agent_sockets(environment: Mapping[str, str]) -> tuple[str, ...]:
    """The user's runtime directory and agent sockets that the environment names."""
    found = []
    runtime = environment.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        found.append(runtime)
    for name in ("SSH_AUTH_SOCK", "GPG_AGENT_INFO"):
        socket = environment.get(name, "").split(":")[0]
        if socket.startswith("/"):
            found.append(socket)
    return tuple(found)


def _existing(root: Path, paths: Sequence[str]) -> list[tuple[Path, bool]]:
    """Those of ``paths`` that exist as a directory or a socket, resolved: (path, is a dir).

    A path that is ``root`` or holds it stays visible: hiding it would hide the working
    directory. One under ``/tmp`` is hidden by the private ``/tmp`` already.
    """
    found: list[tuple[Path, bool]] = []
    for candidate in paths:
        try:
            path = Path(os.path.realpath(candidate))
            mode = path.lstat().st_mode
        except OSError:
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISSOCK(mode)):
            continue
        if root.is_relative_to(path) or any(path == seen for seen, _ in found):
            continue
        if path.is_relative_to("/tmp") and not path.is_relative_to(root):
            continue
        found.append((path, stat.S_ISDIR(mode)))
    return found


class AutoSandbox:
    """``--sandbox auto``: bwrap when it works, else unsandboxed, chosen at the first call.

    Reading :attr:`note` or calling :meth:`wrap` or :meth:`resolve` makes the choice (the
    probe runs then, once per process), so a run that never calls ``bash`` never probes.
    ``on_chosen`` hears the choice once, e.g. to print a notice when it is unsandboxed.
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        network: bool = False,
        on_chosen: Callable[[Launcher], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.network = network
        self.on_chosen = on_chosen
        self._chosen: Launcher | None = None

    @property
    def chosen(self) -> Launcher | None:
        """The launcher once chosen; None before the first call."""
        return self._chosen

    def resolve(self) -> Launcher:
        """The launcher to use: a :class:`Bwrap`, or ``Unsandboxed`` with the reason."""
        if self._chosen is None:
            path = self.workspace.environment.get("PATH", os.defpath)
            problem = probe_bwrap(path, network=self.network)
            if problem is None:
                import shutil

                program = shutil.which("bwrap", path=path) or "bwrap"
                chosen: Launcher = Bwrap.for_workspace(
                    self.workspace, network=self.network, program=program
                )
            else:
                chosen = Unsandboxed(note=f"(not sandboxed: {problem})")
            self._chosen = chosen
            if self.on_chosen is not None:
                self.on_chosen(chosen)
        return self._chosen

    @property
    def note(self) -> str:
        return self.resolve().note

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return self.resolve().wrap(argv)


def choose_launcher(
    mode: SandboxMode,
    *,
    workspace: Workspace,
    network: bool = False,
    on_chosen: Callable[[Launcher], None] | None = None,
) -> Launcher:
    """The launcher ``--sandbox mode`` asks for (see the module docstring).

    ``bwrap`` is looked for on the ``PATH`` of ``workspace.environment``. Raises
    :class:`SandboxUnavailable` for ``on`` when it cannot run: call this at startup for
    ``on``; for ``auto`` it does nothing until the first ``bash`` call. ``on_chosen`` is
    called once with the launcher chosen for ``auto`` (not for ``on`` and ``off``).
    """
    if mode == "off":
        return Unsandboxed()
    if mode == "auto":
        return AutoSandbox(workspace, network=network, on_chosen=on_chosen)
    path = workspace.environment.get("PATH", os.defpath)
    require_bwrap(path, network=network)
    import shutil  # kept out of startup: with bz2 and lzma it costs milliseconds

    program = shutil.which("bwrap", path=path) or "bwrap"
    return Bwrap.for_workspace(workspace, network=network, program=program)


def require_bwrap(path: str, *, network: bool = False) -> None:
    """For ``--sandbox on``: raise :class:`SandboxUnavailable`, naming the package, unless
    bwrap works here. Front doors call it before they create anything."""
    problem = probe_bwrap(path, network=network)
    if problem is not None:
        raise SandboxUnavailable(f"--sandbox on: {problem} ({INSTALL_HINT})")


def probe_bwrap(path: str | None = None, *, network: bool = False) -> str | None:
    """None when bwrap runs a command under the sandbox's options here; else why not.

    ``path`` is the ``PATH`` to look in (default: ours). The answer is kept for the rest of
    the process: the probe runs once.
    """
    return _probe(os.environ.get("PATH", os.defpath) if path is None else path, network)


@functools.cache
def _probe(path: str, network: bool) -> str | None:
    import shutil
    import subprocess
    import tempfile

    program = shutil.which("bwrap", path=path)
    if program is None:
        return "bubblewrap is not installed (no bwrap on PATH)"
    if not sys.executable:
        return "no Python interpreter to run the sandbox's signal relay"
    marker = "dsh-sandbox-probe"
    with tempfile.TemporaryDirectory(prefix="dsh-sandbox-probe-") as directory:
        root = Path(os.path.realpath(directory))
        sandbox = Bwrap(root, network=network, program=program)
        argv = sandbox.wrap(["/bin/sh", "-c", f"echo {marker}"])
        try:
            done = subprocess.run(
                argv,
                cwd=root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"{program} did not finish a probe command in {_PROBE_TIMEOUT_S:g} s"
        except OSError as exc:
            return f"{program} could not be started: {error_chain(exc)}"
    if done.returncode == 0 and done.stdout.decode(errors="replace").strip() == marker:
        return None
    said = " ".join(done.stderr.decode(errors="replace").split())
    if len(said) > 300:
        said = said[:297] + "..."
    status = f"exit status {done.returncode}" if done.returncode >= 0 else "killed by a signal"
    return f"{program} does not work here ({status}: {said or 'no message'})"


_RELAY = r"""
import ctypes, json, os, signal, sys

FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)
parent, argv = int(sys.argv[1]), sys.argv[2:]
# Die with dsh, as bwrap (--die-with-parent) dies with us; dsh may be gone already.
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != parent:
    os._exit(128 + signal.SIGKILL)
bwrap = init = None

def die(signum):
    # The way bwrap died, or the signal that came before it started: ours too.
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)

def forward(signum, frame):
    if bwrap is None:
        die(signum)
    if init is not None:
        try:
            os.killpg(init, signum)  # the sandbox's session and group: its first process
            return
        except ProcessLookupError:
            pass  # not in its own session yet: the sandbox is still being set up
    try:
        os.kill(bwrap, signum)  # bwrap dies of it, and the sandbox with it
    except ProcessLookupError:
        pass

for signum in FORWARDED:
    if signal.getsignal(signum) != signal.SIG_IGN:  # ignored stays ignored, as without us
        signal.signal(signum, forward)
info, info_w = os.pipe()
os.set_inheritable(info_w, True)
# Held until the sandbox's first process is known, so a signal reaches the command, not bwrap.
mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
try:
    bwrap = os.posix_spawnp(
        argv[0], [argv[0], "--info-fd", str(info_w), *argv[1:]], os.environ,
        setpgroup=0, setsigmask=mask, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
    )
except OSError as exc:
    sys.stderr.write(f"dsh: could not start {argv[0]}: {exc}\n")
    os._exit(127)
os.close(info_w)
data = b""
while init is None:
    chunk = os.read(info, 4096)
    if not chunk:
        break
    data += chunk
    try:
        init = json.loads(data).get("child-pid")
    except ValueError:
        pass
os.close(info)
signal.pthread_sigmask(signal.SIG_SETMASK, mask)
status = os.waitpid(bwrap, 0)[1]
if os.WIFSIGNALED(status):
    die(os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""
"""The signal relay between dsh and bwrap (see the module docstring); argv: dsh's pid, then
bwrap's command line."""
