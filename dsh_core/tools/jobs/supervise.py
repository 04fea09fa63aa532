"""An unsandboxed background command that dies with dsh, a SIGKILL of dsh included (SPEC 16).

    argv = supervised(["/bin/bash", "-c", "npm run dev"])    # [python, -I, -S, -c, ..., argv]

A sandboxed command needs none of this: bubblewrap's ``--die-with-parent`` and its PID namespace
end all of it when dsh dies. Without the sandbox nothing would: ``PR_SET_PDEATHSIG`` only reaches
the one process that asked for it, and the command's children would be adopted by init. So the
command runs under a small supervisor, dsh's own interpreter (``-I -S``, the path fixed at
startup, SPEC 10.1) running :data:`SUPERVISOR`:

- it is the leader of the job's process group (dsh starts it in a session of its own) and the
  command runs in that group; SIGINT, SIGTERM and SIGHUP, which dsh sends the group to stop
  the job, reach the command, and the supervisor ignores them (the command gets them back as
  they were);
- it is a *subreaper* (``PR_SET_CHILD_SUBREAPER``): a descendant whose parent dies, one that
  called ``setsid`` or double-forked, is adopted by it, not by init;
- it asks the kernel for SIGUSR1 when dsh dies (``PR_SET_PDEATHSIG``), and dsh sends the same
  SIGUSR1 to end a job at once when the session ends;
- when the command exits, or on SIGUSR1, it *sweeps*: SIGKILL to every other member of the
  group and to every process it adopted, until none is left, then exits with the command's
  status (a signal's death as that signal). A sweep takes what it can see in ``/proc``.

What it cannot reach: a process that left the group *and* whose parent outlives the sweep in
another session (there is none: the sweep kills parents first, and their orphans come to it).
A SIGKILL sent to the supervisor itself (dsh's last resort when a job ignores SIGINT and SIGTERM)
ends it without a sweep; dsh's own SIGKILL reaches the whole group, so only a process that left
the group is beyond it then, as for a foreground command.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["END_NOW", "SUPERVISOR", "supervised"]

END_NOW = "SIGUSR1"
"""What dsh sends the supervisor to end the job at once (the kernel sends it when dsh dies)."""

SUPERVISOR = """\
import ctypes, os, signal, sys, time
parent, argv = int(sys.argv[1]), sys.argv[2:]
me = os.getpid()
try:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    libc.prctl(1, signal.SIGUSR1, 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass  # not Linux: the process group is all there is
class Stop(Exception):
    pass
def stop(signum, frame):
    raise Stop
signal.signal(signal.SIGUSR1, stop)
def others():
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if fields[0] != b"Z" and (int(fields[1]) == me or int(fields[2]) == me):
            found.append(int(entry))
    return found
def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
def sweep():
    for _ in range(1000):
        victims = others()
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)
        reap()
status = None
try:
    if os.getppid() != parent:  # dsh died before the request took effect
        raise Stop
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        command = os.fork()
    except OSError as exc:
        sys.stderr.write(f"dsh: cannot start the job: {exc.strerror}\\n")
        os._exit(127)
    if command == 0:
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        try:
            libc.prctl(36, 0, 0, 0, 0)
        except (NameError, OSError, AttributeError):
            pass
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"dsh: cannot run {argv[0]}: {exc.strerror}\\n")
            os._exit(127)
    while status is None:
        try:
            pid, waited = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == command:
            status = waited
except Stop:
    pass
signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # the sweep is not interrupted
sweep()
if status is None:
    os._exit(128 + signal.SIGKILL)
code = os.waitstatus_to_exitcode(status)
if code < 0:
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # SIGKILL and SIGSTOP cannot be caught anyway
    os.kill(me, -code)
os._exit(code if code >= 0 else 128 - code)
"""
"""Run as ``python -I -S -c SUPERVISOR <dsh's pid> <argv...>`` (see the module docstring)."""

_PYTHON = sys.executable
"""dsh's own interpreter, fixed at startup (SPEC 10.1)."""


def supervised(argv: Sequence[str], parent: int | None = None) -> list[str]:
    """``argv`` run under the supervisor, told to end with process ``parent`` (default: dsh)."""
    import os

    return [_PYTHON, "-I", "-S", "-c", SUPERVISOR, str(parent or os.getpid()), *argv]
