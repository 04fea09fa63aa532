"""The parent of a stdio MCP server: it dies with dsh, and so does everything the server started.

Run as ``python -I -S reaper.py <dsh's pid> <program> <args...>`` (dsh's own interpreter, fixed
at startup, SPEC 10.1), with the standard library only. It

- asks the kernel for ``SIGTERM`` when dsh dies (``PR_SET_PDEATHSIG``: a SIGKILL of dsh too);
- becomes a *subreaper* (``PR_SET_CHILD_SUBREAPER``): whatever the server starts and leaves
  behind, in its process group or in a session of its own (``setsid``, a daemon's double
  fork), is re-parented to this process instead of to init, so it can be found and ended.
  Unprivileged, no cgroup needed;
- forks the server, and gives its own copies of the server's stdin and stdout away, so that
  the pipes end when the server's tree does;
- when the server exits, or dsh stops it (``SIGTERM``, ``SIGINT``, ``SIGHUP``), or dsh dies:
  ``SIGTERM`` to every descendant left, ``SIGKILL`` to those still there after
  :data:`GRACE_S`, until none is left;
- then exits as the server did: its exit status, or killed by the same signal. dsh reads that
  status as the reason a server was lost.

A process that is killed outright (SIGKILL of this process itself) cannot clean up: the
server's stdin then closes, which MCP servers take as the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

__all__ = ["GRACE_S", "main"]

GRACE_S = 1.0
"""Seconds the descendants have between SIGTERM and SIGKILL."""
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_POLL_S = 0.02


class _Stop(Exception):
    """A stop signal arrived: raised out of the wait it interrupted."""


def _stopping(signum: int, frame: object) -> None:
    raise _Stop(signum)


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (from ``/proc``): orphans come back to it, a subreaper."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def _reap() -> tuple[int, int] | None:
    """One finished child and its status, without waiting; None when none is finished."""
    try:
        pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return (-1, 0)
    return (pid, status) if pid else None


def _end_everything(server: int, status: int | None) -> int | None:
    """SIGTERM to every descendant, SIGKILL after the grace, until none is left; the server's
    status when it is reaped here."""
    for pid in _descendants(os.getpid()):
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while True:
        reaped = _reap()
        if reaped is not None:
            pid, code = reaped
            if pid == -1:  # no child left
                return status
            if pid == server:
                status = code
            continue
        if time.monotonic() >= deadline:
            for pid in _descendants(os.getpid()):
                _signal(pid, signal.SIGKILL)
        time.sleep(_POLL_S)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):  # gone already
        os.kill(pid, signum)


def _exit_as(status: int) -> None:
    """Exit as the server did: its code, or the signal that killed it."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of ours
            if signum not in (signal.SIGKILL, signal.SIGSTOP):  # these have no handler
                signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        except (OSError, ValueError):
            pass
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    parent = int(argv[1])
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        pass  # not Linux: the process group is all there is
    if os.getppid() != parent:  # dsh died before the request took effect
        os._exit(1)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stopping)
    server = -1
    status: int | None = None
    try:
        server = os.fork()
        if server == 0:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            try:
                os.execvp(argv[2], argv[2:])
            except OSError as exc:  # said on stderr, which dsh quotes in its warning
                sys.stderr.write(f"dsh: cannot run {argv[2]}: {exc.strerror}\n")
                sys.stderr.flush()
            os._exit(127)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # the pipes are the server's: they end with its tree
        os.dup2(null, 1)
        while status is None:
            pid, code = os.waitpid(-1, 0)
            if pid == server:
                status = code
    except _Stop:
        _signal(server, signal.SIGTERM)
    except ChildProcessError:
        pass
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # ending everything is not interrupted
    status = _end_everything(server, status)
    _exit_as(status if status is not None else 0)


if __name__ == "__main__":
    main(sys.argv)
