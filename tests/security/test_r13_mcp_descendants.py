"""SPEC 13 (issue 26 item 6, issue 31 class 7): when dsh ends, a server's whole tree ends too.

The attack: a server's wrapper starts children that outlive it, one in its process group
(``sleep &``), one in a session of its own (``setsid sleep &``), out of reach of a kill of the
group. Both survived a normal exit of dsh and a SIGKILL of it. The server's reaper (a
subreaper) now gets them back and ends them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_pipe import HANG, run_dsh, start_dsh
from tests.dsh_stdio.test_agent_terminal import unique_sleep
from tests.dsh_stdio.test_mcp import SERVER
from tests.support import wait_until

from ..dsh_stdio.test_mcp import dsh_env, home, stub, user_home, work

__all__ = ["dsh_env", "home", "stub", "user_home", "work"]

pytestmark = pytest.mark.slow


def family(home: Path) -> tuple[str, str]:
    """A server whose wrapper leaves two children behind; their ``sleep`` arguments."""
    grouped, detached = unique_sleep(), unique_sleep()
    script = f"sleep {grouped} & setsid sleep {detached} & exec {sys.executable} {SERVER} well"
    (home / "config.toml").write_text(
        f'[mcp.servers.family]\ncommand = "/bin/sh"\nargs = ["-c", {json.dumps(script)}]\n'
    )
    return grouped, detached


def sleeping(*arguments: str) -> list[int]:
    """The live ``sleep ARGUMENT`` processes, from /proc."""
    wanted = {f"sleep\0{argument}\0".encode() for argument in arguments}
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{entry}/cmdline").read_bytes() in wanted:
                stat = Path(f"/proc/{entry}/stat").read_text()
                if stat.rpartition(")")[2].split()[0] != "Z":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_children_of_a_server_end_when_dsh_exits(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    grouped, detached = family(home)
    stub.enqueue(Answer("hi"))
    run = run_dsh(dsh_env, work, stdin="hi\n")  # the turn waits for the server: it started
    assert run.returncode == 0, run.stderr
    assert 'MCP server "family"' not in run.stderr  # no warning: it did start
    wait_until(lambda: not sleeping(grouped, detached), "the children to end", timeout=HANG)


def test_children_of_a_server_end_after_a_sigkill_of_dsh(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    grouped, detached = family(home)
    proc = start_dsh(dsh_env, work)
    try:
        wait_until(lambda: len(sleeping(grouped, detached)) == 2, "both children", timeout=HANG)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=HANG)
        wait_until(lambda: not sleeping(grouped, detached), "the children to end", timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
