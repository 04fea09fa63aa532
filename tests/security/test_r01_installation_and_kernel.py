"""SPEC 10.1 for the file tools, and the sandbox's kernel knobs (review findings 1 and 10).

Finding 1: the sandbox kept dsh's own installation read-only, ``write`` and ``edit`` did not.
With dsh in the project's ``.venv`` (the README's layout) and ``--allow write``, a ``.pth``
written into its ``site-packages`` ran at the next start, outside the sandbox, with the key;
so would a rewritten ``.venv/bin/dsh``, ``pyvenv.cfg`` (``home =`` a planted standard
library) or a module of an editable checkout. Now they are protected paths: a person's yes each
time, refused on a pipe whatever ``--allow`` says. The end-to-end proof runs the real ``dsh``
twice; the rest is the policy, in-process, with the installation given to the workspace.

Finding 10: the sandbox's fresh ``/proc`` left ``/proc/sysrq-trigger`` (and the other knobs
Docker keeps read-only) writable by a command of a root dsh: uid 0 needs no capability to
write ``b`` there, which reboots the host.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core.testing import ToolCalls
from tests.dsh_stdio.test_agent_pipe import assert_log_whole, data_of
from tests.security._support_fixfiles import Attacker, attacker_fixture
from tests.security._support_sandbox import (  # noqa: F401 (the fixture is found by name)
    NEXT,
    Scene,
    needs_bwrap,
    payload,
    run_program,
    scene_fixture,
    went_on,
)
from tests.security.test_r01_nothing_runs_outside_sandbox import ROOT, SITE, dsh_in_a_venv
from tests.support import sandbox_python

__all__ = ["attacker_fixture"]


def installed(attacker: Attacker) -> Path:
    """dsh "installed" in ``work/.venv`` and as an editable checkout in ``work``: what the
    workspace is told its installation is (the files are the test's, nothing is run)."""
    venv = attacker.work / ".venv"
    site = venv / SITE
    site.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "dsh").write_text("#!/usr/bin/env python3\nfrom dsh_stdio import run\n")
    (venv / "bin" / "dsh").chmod(0o755)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (attacker.work / "dsh_core").mkdir()
    (attacker.work / "dsh_core" / "loop.py").write_text("# the agent loop\n")
    attacker.installation = (venv, site, venv / "bin", attacker.work / "dsh_core")
    return venv


@pytest.mark.parametrize(
    "path",
    [f".venv/{SITE}/zz_atk.pth", ".venv/bin/dsh", ".venv/pyvenv.cfg", "dsh_core/agent/loop.py"],
    ids=["pth", "script", "pyvenv-cfg", "editable-checkout"],
)
def test_allow_write_does_not_let_the_model_rewrite_dsh_s_own_installation(
    attacker: Attacker, path: str
) -> None:
    # Review: written silently (a read first where the file existed, so write may replace it).
    installed(attacker)
    target = attacker.work / path
    before = target.read_bytes() if target.exists() else None
    result = attacker.read_then_write(path, f"import os; {payload(attacker.marker)}\n")
    assert result.startswith(f'Error: tool "write" touches {path}'), result
    assert "(protected: dsh's own installation)" in result
    assert "only a person may allow that" in result
    assert (target.read_bytes() if target.exists() else None) == before
    attacker.call("read", file_path=".venv/pyvenv.cfg")
    edit = attacker.call("edit", file_path=".venv/pyvenv.cfg", old_string="/usr", new_string="/x")
    assert "(protected: dsh's own installation)" in edit
    assert (attacker.work / ".venv" / "pyvenv.cfg").read_text() == "home = /usr/bin\n"


@pytest.mark.slow
def test_pth_written_by_the_write_tool_into_dsh_s_venv_does_not_run_at_next_start(
    scene: Scene,
) -> None:
    # The reviewer's reproduction on the real dsh: `dsh --allow write`, the model writes a .pth
    # into dsh's own venv, the next start runs it with the key (review: the marker held it).
    argv = dsh_in_a_venv(scene.work)
    path = f".venv/{SITE}/zz_atk.pth"
    write = {"file_path": path, "content": f"import os; {payload(scene.marker)}\n"}
    scene.stub.enqueue(ToolCalls((("write", json.dumps(write)),)))
    went_on(run_program([*argv, "--allow", "write"], scene.env, scene.work, f"plant\n{NEXT}\n"))
    again = run_program(argv, scene.env, scene.work, "hello\n")
    assert again.stdout == "You said: hello\n"
    assert not scene.marker.exists()
    assert not (scene.work / path).exists()


PROC_KNOBS = ("/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/sys")
"""What Docker keeps read-only in a container's /proc: writable by uid 0 without capabilities."""


@needs_bwrap
def test_a_sandboxed_command_cannot_write_the_kernel_s_proc_knobs(attacker: Attacker) -> None:
    # Review: "not verified". bubblewrap itself remounts sys, sysrq-trigger, irq and bus
    # read-only; /proc/fs (nfsd's knobs, where loaded) it left writable. No byte is written:
    # the flags of the mount each path is on say it (this kernel may lack sysrq-trigger).
    # As an ordinary user bwrap leaves the mounts as they are, and the files are root's: what
    # counts is that the command cannot write them (SPEC 10.12: the suite runs as one too).
    script = (
        "import os\n"
        f"for path in {PROC_KNOBS!r}:\n"
        "    if not os.path.exists(path):\n"
        "        print(path, 'absent'); continue\n"
        "    ro = os.statvfs(path).f_flag & os.ST_RDONLY\n"
        "    names = os.listdir(path) if os.path.isdir(path) else []\n"
        "    paths = [path, *(os.path.join(path, name) for name in names)]\n"
        "    mine = os.geteuid() != 0 and not any(os.access(p, os.W_OK) for p in paths)\n"
        "    print(path, 'read-only' if ro else 'not writable by me' if mine else 'WRITABLE')\n"
    )
    result = attacker.bash(f"{sandbox_python()} -I -c {shlex.quote(script)}")
    for path in PROC_KNOBS:
        if os.geteuid() == 0:  # root: bwrap's remounts and dsh's binds are what hold
            expected = "read-only" if os.path.exists(path) else "absent"
            assert f"{path} {expected}\n" in result, result
    assert "WRITABLE" not in result, result


@pytest.mark.slow
def test_a_pth_written_into_the_user_site_packages_before_it_exists_is_refused(
    scene: Scene,
) -> None:
    # Second review (t3): Python with the user site enabled, dsh started in the home directory;
    # ~/.local/lib/pythonX.Y/site-packages did not exist, so it was not dsh's installation:
    # `--allow write` wrote zz_atk.pth there silently and the next `dsh --help` ran it.
    interpreter = scene.base / "venv"
    subprocess.run(
        [sandbox_python(), "-m", "venv", "--without-pip", "--system-site-packages", interpreter],
        check=True,
    )
    outer = [entry for entry in sys.path if entry.endswith("site-packages")]
    (interpreter / SITE / "dsh-dev.pth").write_text("\n".join([str(ROOT), *outer]) + "\n")
    python = str(interpreter / "bin" / "python")
    env = {**scene.env, "HOME": str(scene.work)}
    user_site = f".local/{SITE}"
    write = {"file_path": f"{user_site}/zz_atk.pth", "content": f"{payload(scene.marker)}\n"}
    scene.stub.enqueue(ToolCalls((("write", json.dumps(write)),)))
    went_on(
        run_program(
            [python, "-m", "dsh_stdio", "--allow", "write"], env, scene.work, f"x\n{NEXT}\n"
        )
    )
    (result,) = data_of(assert_log_whole(scene.dsh_home), "tool/result")
    assert "(protected: dsh's own installation)" in result["content"], result["content"]
    assert not (scene.work / user_site).exists()
    run_program([python, "-m", "dsh_stdio", "--help"], env, scene.work, "")
    assert not scene.marker.exists()
