"""``bash`` under bubblewrap: writes only the working directory, no network (SPEC 8 and 10).

    # at startup; raises SandboxUnavailable for "on" when bwrap cannot run here
    launcher = choose_launcher(config.sandbox, workspace=workspace, network="network" in allow)
    tool = BashTool(workspace, launcher=launcher)

``off`` runs commands as they are; ``on`` probes ``bwrap`` at once and raises
:class:`SandboxUnavailable` (naming the ``bubblewrap`` package) when it cannot run; ``auto``
returns an :class:`AutoSandbox` that probes at the first ``bash`` call, never at startup, and
runs unsandboxed, saying why in its note, when ``bwrap`` is missing or fails. The probe
(:func:`probe_bwrap`) runs once per process, with the environment commands get (no key).

Which bwrap: the first on ``PATH`` in a directory the sandbox cannot write (not relative, not
inside the working directory unless dsh's installation keeps it read-only there); when the only
ones on ``PATH`` are in such directories, ``/usr/bin/bwrap`` if it exists. A ``bwrap`` that a
sandboxed command planted on ``PATH`` is never run (SPEC 10.1).

What :class:`Bwrap` gives a command:

- ``/`` read-only, the working directory writable (symlinks in it still lead to read-only
  places), a private ``/tmp``, a minimal ``/dev``, the sandbox's own ``/proc`` with
  ``/proc/sys`` read-only (uid 0 could otherwise write the host's sysctls);
- inside the working directory, what :mod:`.confinement` keeps: dsh's own installation, git's
  configuration and hooks, ``.dsh/`` and ``.agents/`` read-only, and the directories above them
  pinned (SPEC 10.1, 10.2); the user's credentials and ``DSH_HOME`` empty (SPEC 10.4), and
  ``DSH_HOME`` empty and read-only even when the working directory is in it (SPEC 10.14).
  Nothing is made in the person's tree for a mount: what is missing is looked at afterwards,
  and an empty file is bwrap's own (``--ro-bind-data`` from an empty pipe), not one of ours;
- no network (``--unshare-net``: only a loopback of its own) unless network is allowed;
- no sockets that reach outside, network or not: a seccomp filter (:mod:`.seccomp`) refuses
  ``socket()`` for every family but IPv4, IPv6 and netlink, so no unix socket (docker's, an
  agent's, a ``screen`` session's) can be connected to; ``socketpair()`` works (SPEC 10.6);
- its own PID, IPC and UTS namespaces: it sees none of dsh's processes (nor their
  environment), and ``/proc/1`` is bwrap's small init, which reaps orphans (``--as-pid-1``
  is not used: a command as PID 1 could not even ``kill -9 $$`` itself);
- its own session (``--new-session``): no controlling terminal, so no ``TIOCSTI``
  injection into the user's terminal;
- no capabilities (``--cap-drop ALL``): when dsh runs as root, bwrap otherwise keeps them,
  and a command could simply ``mount -o remount,rw /``;
- death with dsh (``--die-with-parent``): bwrap dies with dsh, and the sandbox with bwrap, so
  even a SIGKILL of dsh leaves no command behind.

Signals: bubblewrap 0.8 forwards none, and a ``--new-session`` command is out of reach of bwrap's
process group, which dsh signals. So :meth:`Bwrap.launch` asks bwrap for the sandbox's first
process (``--info-fd``), and dsh sends its SIGINT and SIGTERM to that process's group (the
command can end its own way: ``pytest`` prints its summary); a signal that comes before bwrap has
said goes to bwrap, which dies of it, and the sandbox with it. SIGKILL goes to bwrap's group.
bwrap reports a command killed by signal N as exit status 128 + N.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..chain import error_chain
from ..errors import SANDBOX_UNAVAILABLE, HarnessError
from .launchers import Launch, Launcher, Unsandboxed
from .workspace import Workspace, child_environment

if TYPE_CHECKING:  # the policy loads with the first command, not at startup
    from .confinement import Confinement
    from .credentials import Credentials
    from .policy import Inventory, Kept, Scan

__all__ = [
    "INSTALL_HINT",
    "SANDBOX_UNAVAILABLE",
    "AutoSandbox",
    "Bwrap",
    "SandboxMode",
    "SandboxUnavailable",
    "choose_launcher",
    "find_bwrap",
    "probe_bwrap",
    "require_bwrap",
]

SandboxMode = Literal["auto", "on", "off"]
"""``--sandbox``: bwrap when it works, bwrap or nothing, never bwrap."""

INSTALL_HINT = "Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap"

SYSTEM_BWRAP = "/usr/bin/bwrap"
"""Where distributions install bwrap: used when the only ones on ``PATH`` could be planted."""

_PROBE_TIMEOUT_S = 30.0
"""A bound for a bwrap that hangs, not a measurement: the probe takes milliseconds."""

_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs")
"""Kernel knobs in the sandbox's own ``/proc`` that a command run as root could write: the
sysctls, ``sysrq-trigger`` (uid 0 needs no capability to write ``b`` there, which reboots the
host), nfsd's; read-only, as Docker keeps them. bubblewrap means to cover ``sys``,
``sysrq-trigger``, ``irq`` and ``bus`` itself, but skips any that ``access()`` calls
unwritable when it looks (here it left ``/proc/sys`` writable to a root dsh): so these are
bound whatever it does (``irq`` and ``bus`` it did cover: the attack test looks at all five).
Only those this kernel has: bwrap cannot bind a missing one."""

_READ_ONLY_WORDS = ("read-only file system", "device or resource busy")
_NO_SOCKET_WORDS = ("address family not supported",)
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


@functools.cache
def _socket_filter() -> bytes | None:
    """The seccomp program for this machine, built once; None where there is none."""
    from .seccomp import socket_filter

    try:
        return socket_filter()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Bwrap:
    """Runs the shell under bubblewrap, writing only ``root``; implements ``Sandbox``."""

    root: Path
    """The working directory, resolved: the one writable place besides a private ``/tmp``."""
    network: bool = False
    """``--allow network``: keep the host's network."""
    program: str = "bwrap"
    """The bwrap to run (:func:`find_bwrap`)."""
    home: Path | None = None
    """The user's home directory, resolved: for the note, and where credentials are hidden."""
    dsh_home: Path | None = None
    """``DSH_HOME``: hidden from commands, like the credentials."""
    installation: tuple[Path, ...] = ()
    """dsh's installation (:func:`.policy.installation_paths`) and the bwrap program: read-only
    where inside."""
    scan: Scan | None = field(default=None, compare=False, repr=False)
    """Finds nested repositories, kept up to date; None: only the working directory's own."""
    credentials: Credentials | None = field(default=None, compare=False, repr=False)
    """The credential locations as they resolved when the session began: hidden too."""
    started: tuple[Kept, ...] = ()
    """What dsh's MCP servers run from: read-only where inside, like the installation."""
    seccomp: bytes | None = field(default_factory=_socket_filter, repr=False)
    """The seccomp program handed to bwrap; None where this machine has none."""

    @classmethod
    def for_workspace(
        cls,
        workspace: Workspace,
        *,
        network: bool = False,
        program: str = "bwrap",
    ) -> Bwrap:
        """A Bwrap for ``workspace``: its root, its user's home and ``DSH_HOME``, dsh's
        installation."""
        from .policy import inside

        dsh_home = workspace.dsh_home
        home = workspace.environment.get("HOME") or os.path.expanduser("~")
        protection = workspace.protection  # the file tools' own: one scan, one list
        program_path = Path(os.path.realpath(program))
        extra = (program_path,) if inside(program_path, workspace.root) else ()
        return cls(
            workspace.root,
            network=network,
            program=program,
            home=Path(os.path.realpath(home)) if home.startswith("/") else None,
            dsh_home=Path(os.path.realpath(dsh_home)) if dsh_home is not None else None,
            installation=(*protection.installation, *extra),
            scan=protection.scan,
            credentials=workspace.credentials,
            started=protection.started,
        )

    @property
    def note(self) -> str:
        """``(sandboxed: writes only <dir>, reads all but your credentials, no network)``,
        saying so when the working directory is a lot."""
        network = "network allowed" if self.network else "no network"
        reads = "reads all but your credentials"
        root, home = self.root, self.home
        if self.sealed:
            return (
                f"(sandboxed: writes nothing — {root} is in dsh's home {self.dsh_home}, which "
                f"commands can neither see nor change; {network})"
            )
        if root == Path("/"):
            warning = "writes anywhere under / — the working directory is the root"
        elif home is not None and root == home:
            warning = f"writes only {root} — your home directory, dotfiles and all"
        elif home is not None and home.is_relative_to(root):
            warning = f"writes only {root} — it holds your home directory {home}"
        else:
            return f"(sandboxed: writes only {root}, {reads}, {network})"
        return f"(sandboxed: {warning}; {reads}; {network})"

    @property
    def sealed(self) -> bool:
        """Whether the working directory is ``DSH_HOME`` or lies inside it (SPEC 10.14)."""
        from .policy import under

        return self.dsh_home is not None and under(self.root, self.dsh_home)

    def confinement(self) -> Confinement:
        """What the sandbox keeps and hides inside ``root`` now (looked at for each command)."""
        from .confinement import confine

        return confine(
            self.root,
            installation=self.installation,
            found=self.scan.found() if self.scan is not None else None,
            home=self.home,
            dsh_home=self.dsh_home,
            credentials=self.credentials,
            started=self.started,
        )

    def inventory(self) -> Inventory:
        """What is kept inside ``root`` now: after a command, to see what it made."""
        from .policy import Protection

        protection = Protection(self.root, self.installation, self.scan, self.home, self.started)
        return protection.inventory()

    def arguments(
        self, plan: Confinement | None = None, descriptors: list[int] | None = None
    ) -> list[str]:
        """bwrap's options, in the order they must be applied (later mounts cover earlier).

        ``descriptors`` receives the read ends of the empty pipes bwrap copies a hidden file's
        contents from (``--ro-bind-data``): the caller passes them to bwrap and closes them.
        Without it they are closed at once (for a look at the options only).
        """
        plan = self.confinement() if plan is None else plan
        if descriptors is None:
            looked: list[int] = []
            try:
                return self.arguments(plan, looked)
            finally:
                for fd in looked:
                    os.close(fd)
        root = str(self.root)
        whole = self.root == Path("/")
        options = ["--ro-bind", "/", "/"]
        if whole:  # before /dev, /proc and /tmp: binding / again would bring the host's back
            options += ["--bind", "/", "/"]
        options += ["--dev", "/dev", "--proc", "/proc"]
        for knob in _PROC_READ_ONLY:
            if os.path.exists(knob):
                options += ["--ro-bind", knob, knob]
        options += ["--tmpfs", "/tmp"]
        if plan.sealed is not None:
            # DSH_HOME holds the working directory: both empty and read-only, nothing inside
            # bound back (the mount points are made in the tmpfs, not in the person's tree).
            sealed = str(plan.sealed)
            options += ["--tmpfs", sealed]
            if root != sealed:
                options += ["--dir", root]
            options += ["--remount-ro", sealed]
        else:
            if not whole:  # after /tmp: a working directory under /tmp goes on its tmpfs
                options += ["--bind", root, root]
            for path in plan.pinned:  # a mount point: cannot be renamed away and replaced
                options += ["--bind", str(path), str(path)]
            for path in plan.read_only:
                options += ["--ro-bind", str(path), str(path)]
        for path in plan.hidden_dirs:
            options += ["--tmpfs", str(path)]
        for path in plan.hidden_files:  # reads as empty, stays put, and no file of ours
            options += ["--ro-bind-data", str(_empty_reader(descriptors)), str(path)]
        if not self.network:
            options.append("--unshare-net")
        options += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
        options += ["--die-with-parent", "--cap-drop", "ALL", "--chdir", root]
        return options

    @contextlib.contextmanager
    def launch(self, argv: Sequence[str]) -> Iterator[Launch]:
        """``[bwrap, ..., "--", *argv]`` with its seccomp filter and the pipe that says where
        the sandbox's first process is; on exit, undo what the confinement asks to undo."""
        plan = self.confinement()
        with self._launch(argv, plan) as launch:
            try:
                yield launch
            finally:
                from .confinement import undo

                found = self.scan.found() if self.scan is not None else None
                done = undo(plan, self.inventory(), found)
                launch.notes += done.notes
                launch.escaped += done.escaped

    @contextlib.contextmanager
    def _launch(self, argv: Sequence[str], plan: Confinement) -> Iterator[Launch]:
        """The launch of ``argv`` under ``plan``, its descriptors closed on the way out."""
        own: list[int] = []  # descriptors to close on the way out, whatever happens
        try:
            passed: list[int] = []
            options = self.arguments(plan, passed)
            own += passed
            if self.seccomp is not None:
                read_end, write_end = os.pipe()
                own.append(read_end)
                try:  # a few hundred bytes: one write, into an empty pipe, never blocks
                    os.write(write_end, self.seccomp)
                finally:
                    os.close(write_end)
                options += ["--seccomp", str(read_end)]
                passed.append(read_end)
            info_read, info_write = os.pipe()
            own += [info_read, info_write]
            options += ["--info-fd", str(info_write)]
            passed.append(info_write)
            yield Launch(
                [self.program, *options, "--", *argv],
                pass_fds=tuple(passed),
                signal_group=_FirstProcess(info_read),
            )
        finally:
            for fd in own:
                os.close(fd)

    def explain(self, output: str) -> str:
        """The line that ends a failed command's result: what the sandbox forbids.

        When ``output`` shows that the sandbox stopped the command (a read-only file system,
        a pinned directory, no network, a refused socket), the line says so and how to ask
        for more.
        """
        limits = []
        if self.root != Path("/"):
            limits.append(
                f"the file system is read-only outside {self.root} and /tmp, and inside it "
                "for .git/config, .git/hooks, .dsh, .agents and dsh's own installation"
            )
        if not self.network:
            limits.append("there is no network")
        if self.seccomp is not None:
            limits.append("unix sockets are refused")
        said = "; ".join(limits) or "other processes and some system paths are out of reach"
        text = output.lower()
        hit = any(words in text for words in _READ_ONLY_WORDS + _NO_SOCKET_WORDS) or (
            not self.network and any(words in text for words in _NO_NETWORK_WORDS)
        )
        if not hit:
            return f"[sandbox: {said}]"
        return (
            f"[sandbox: the command may have failed because of the sandbox: {said}. If it "
            "needs more, ask to run it with sandbox: false and a justification]"
        )


def _empty_reader(descriptors: list[int]) -> int:
    """The read end of a pipe whose write end is closed (it reads as empty), added to
    ``descriptors``."""
    read_end, write_end = os.pipe()
    os.close(write_end)
    descriptors.append(read_end)
    return read_end


class _FirstProcess:
    """The sandbox's first process, as bwrap writes it to ``--info-fd`` (``child-pid``).

    Read without blocking when a signal is to be sent: bwrap writes it once, early; until then
    (or if it never does) the answer is None and the signal goes to bwrap.
    """

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._data = b""
        self._pid: int | None = None

    def __call__(self) -> int | None:
        if self._pid is None:
            with contextlib.suppress(OSError):  # nothing yet, or closed: try again next time
                self._data += os.read(self._fd, 4096)
            with contextlib.suppress(ValueError, AttributeError):
                pid = json.loads(self._data).get("child-pid")
                self._pid = pid if isinstance(pid, int) and pid > 0 else None
        return self._pid


class AutoSandbox:
    """``--sandbox auto``: bwrap when it works, else unsandboxed, chosen at the first call.

    Reading :attr:`note` or calling :meth:`launch` or :meth:`resolve` makes the choice (the
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
            program, problem = find_bwrap(path, root=self.workspace.root)
            if program is not None:
                problem = _probe(program, self.network)
            if program is not None and problem is None:
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

    def launch(self, argv: Sequence[str]) -> contextlib.AbstractContextManager[Launch]:
        return self.resolve().launch(argv)


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
    The workspace's ``dsh_home`` is hidden from sandboxed commands, as credentials are.
    """
    if mode == "off":
        return Unsandboxed()
    if mode == "auto":
        return AutoSandbox(workspace, network=network, on_chosen=on_chosen)
    path = workspace.environment.get("PATH", os.defpath)
    program = require_bwrap(path, network=network, root=workspace.root)
    return Bwrap.for_workspace(workspace, network=network, program=program)


def require_bwrap(path: str, *, network: bool = False, root: Path | None = None) -> str:
    """For ``--sandbox on``: the bwrap to run; raises :class:`SandboxUnavailable`, naming the
    package, unless it works here. Front doors call it before they create anything.

    ``root`` is the working directory (default: the current one): a bwrap under it is not used.
    """
    root = Path(os.path.realpath(Path.cwd() if root is None else root))
    program, problem = find_bwrap(path, root=root)
    if program is not None:
        problem = _probe(program, network)
    if program is None or problem is not None:
        raise SandboxUnavailable(f"--sandbox on: {problem} ({INSTALL_HINT})")
    return program


def find_bwrap(path: str, *, root: Path | None = None) -> tuple[str | None, str | None]:
    """The bwrap to run, from ``PATH`` (see the module docstring): (program, None), or
    (None, why there is none)."""
    # What the sandbox keeps read-only inside root (only those: one holding root keeps nothing).
    from .confinement import on_path
    from .policy import inside, installation_paths

    read_only = [p for p in installation_paths() if root is not None and inside(p, root)]
    program, passed_over = on_path("bwrap", path, root=root, read_only=read_only)
    if program is not None:
        return program, None
    if not passed_over:
        return None, "bubblewrap is not installed (no bwrap on PATH)"
    if os.access(SYSTEM_BWRAP, os.X_OK):  # inside the working directory only if it is / or /usr
        return SYSTEM_BWRAP, None  # (and then the sandbox keeps the program itself read-only)
    where = ", ".join(passed_over)
    return None, f"the only bwrap on PATH ({where}) is where commands can write: not used"


def probe_bwrap(
    path: str | None = None, *, network: bool = False, root: Path | None = None
) -> str | None:
    """None when bwrap runs a command under the sandbox's options here; else why not.

    ``path`` is the ``PATH`` to look in (default: ours); ``root`` the working directory, if a
    bwrap under it is to be passed over. The answer is kept for the rest of the process.
    """
    path = os.environ.get("PATH", os.defpath) if path is None else path
    program, problem = find_bwrap(path, root=root)
    if program is None:
        return problem
    return _probe(program, network)


@functools.cache
def _probe(program: str, network: bool) -> str | None:
    """Whether ``program`` runs a command under the sandbox's options (in ``/``, nothing kept:
    the command is ours); the answer, cached for the process. It makes nothing on the disk
    (a temporary directory would stay after a kill of dsh during the probe)."""
    import subprocess

    from .confinement import Confinement

    marker = "dsh-sandbox-probe"
    sandbox = Bwrap(Path("/"), network=network, program=program)
    plan = Confinement(Path("/"))
    try:
        with sandbox._launch(["/bin/sh", "-c", f"echo {marker}"], plan) as launch:
            done = subprocess.run(
                launch.argv,
                cwd="/",
                env=child_environment(),  # as every command's: never the key
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                pass_fds=launch.pass_fds,
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
