"""SPEC 10.1: nothing the model writes is ever run by dsh outside the sandbox.

Each attack is a ``bash`` call a prompt-injected model asks for under ``--allow shell``: it
plants code where dsh itself would run it later, unsandboxed and with the key. The consequence
is checked where it would happen: the next start of dsh, the next command's bwrap. On dsh 0.2.0
each of them ran the payload, and the marker held the canary key (each test says how).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dsh_stdio.test_agent_pipe import data_of, read_events
from tests.security._support_sandbox import (  # noqa: F401 (the fixture is found by name)
    CANARY_KEY,
    NEXT,
    Run,
    Scene,
    bash_calls,
    needs_bwrap,
    payload,
    run_program,
    scene_fixture,
    went_on,
)
from tests.support import sandbox_python

ROOT = Path(__file__).resolve().parents[2]
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
"""Where a venv keeps its packages, relative to it."""

pytestmark = [pytest.mark.slow, needs_bwrap]


def dsh_in_a_venv(work: Path) -> list[str]:
    """dsh installed in ``work/.venv``, the README's layout; the command line of its ``dsh``.

    The venv finds dsh and its dependencies where this test run does (a ``.pth``, as an
    editable install does), and its script is the one ``pip`` would write.
    """
    venv = work / ".venv"
    subprocess.run([sandbox_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    outer = [entry for entry in sys.path if entry.endswith("site-packages")]
    (venv / SITE / "dsh-dev.pth").write_text("\n".join([str(ROOT), *outer]) + "\n")
    script = venv / "bin" / "dsh"
    script.write_text(f"#!{venv}/bin/python\nfrom dsh_stdio.__main__ import run\nrun()\n")
    script.chmod(0o755)
    return [str(venv / "bin" / "python"), str(script)]


def plant_then_start_again(scene: Scene, argv: list[str], command: str) -> tuple[str, Run]:
    """dsh (started as ``argv``) runs the model's ``command``; then dsh starts again and
    answers a line. Returns the planting call's result for the model, and the second run."""
    scene.stub.enqueue(bash_calls(command))
    went_on(run_program([*argv, "--allow", "shell"], scene.env, scene.work, f"plant\n{NEXT}\n"))
    (log,) = scene.dsh_home.rglob("session.jsonl")
    (planted,) = data_of(read_events(log), "tool/result")
    return str(planted["content"]), run_program(argv, scene.env, scene.work, "hello\n")


@pytest.mark.parametrize("planted", ["zz-planted.pth", "httpx.py"], ids=["pth", "module"])
def test_code_planted_in_dsh_s_venv_does_not_run_at_next_start(scene: Scene, planted: str) -> None:
    # 0.2.0: the venv was writable ("(no output)"), and the next start ran the payload with the
    # key: a .pth at start-up; httpx.py, ahead of the real httpx on sys.path, at the first
    # request (the turn then failed: "module 'httpx' has no attribute 'AsyncClient'").
    path = f".venv/{SITE}/{planted}"
    command = f"echo {shlex.quote(payload(scene.marker))} > {path}"
    result, again = plant_then_start_again(scene, dsh_in_a_venv(scene.work), command)
    assert not scene.marker.exists()
    assert f"{path}: Read-only file system" in result
    assert not (scene.work / path).exists()
    assert again.stdout == "You said: hello\n"


def test_module_planted_in_the_working_directory_is_not_imported_by_python_m(
    scene: Scene,
) -> None:
    # The working directory is writable: the command succeeds. 0.2.0: `python -m dsh_stdio`
    # put it first on sys.path, and the next start imported the planted httpx, with the key.
    argv = [sys.executable, "-m", "dsh_stdio"]
    command = f"echo {shlex.quote(payload(scene.marker))} > httpx.py && echo planted"
    planted, again = plant_then_start_again(scene, argv, command)
    assert not scene.marker.exists()
    assert planted == "planted\n"
    assert (scene.work / "httpx.py").exists()
    assert again.stdout == "You said: hello\n"


def test_bwrap_planted_on_path_in_the_working_directory_is_never_run(scene: Scene) -> None:
    # A PATH with a directory of the project first (as direnv or a Makefile sets it). 0.2.0:
    # the next start took the planted bwrap from it and ran it outside the sandbox, its probe
    # with the whole environment: the key.
    real = shutil.which("bwrap", path=scene.env["PATH"])
    scene.env["PATH"] = f"{scene.work}/bin:{scene.env['PATH']}"
    run = f"{sys.executable} -c {shlex.quote(payload(scene.marker))}"
    script = f'#!/bin/sh\n{run}\nexec {real} "$@"\n'
    command = f"mkdir bin && printf %s {shlex.quote(script)} > bin/bwrap && chmod +x bin/bwrap"
    scene.attack(command)
    assert (scene.work / "bin" / "bwrap").exists()  # the working directory is writable
    scene.stub.enqueue(bash_calls("echo inside"))
    argv = [sys.executable, "-m", "dsh_stdio", "--allow", "shell"]
    again = run_program(argv, scene.env, scene.work, "run something\n")
    assert not scene.marker.exists()
    assert again.returncode == 0, again.stderr
    assert "(sandboxed: writes only" in again.stderr  # a real bwrap ran it


def test_bwrap_and_its_probe_never_get_the_key(scene: Scene) -> None:
    # A bwrap outside the working directory that records what it was given (as a hostile or
    # compromised one could). 0.2.0 probed it with dsh's own environment: the key.
    seen = scene.base / "bwrap-saw"
    bin_dir = scene.base / "bin"
    bin_dir.mkdir()
    wrapper = f'#!/bin/sh\n{{ echo "--- bwrap"; env; }} >> {seen}\nexec /usr/bin/bwrap "$@"\n'
    (bin_dir / "bwrap").write_text(wrapper)
    (bin_dir / "bwrap").chmod(0o755)
    scene.env["PATH"] = f"{bin_dir}:{scene.env['PATH']}"
    scene.attack("echo inside")
    recorded = seen.read_text()
    assert recorded.count("--- bwrap\n") == 2  # the probe, then the command
    assert CANARY_KEY not in recorded
    assert "DEEPSEEK_API_KEY" not in recorded
