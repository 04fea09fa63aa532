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

from dsh_core.testing import StubServer
from tests.security._support_sandbox import (  # noqa: F401 (fixtures are found by name)
    CANARY_KEY,
    NEXT,
    Run,
    base_fixture,
    bash_calls,
    dsh_home_fixture,
    env_fixture,
    marker_fixture,
    needs_bwrap,
    payload,
    results,
    run_dsh,
    run_program,
    stub_fixture,
    user_home_fixture,
    went_on,
    work_fixture,
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


def plant_then_start_again(
    argv: list[str], command: str, env: dict[str, str], work: Path, stub: StubServer
) -> tuple[str, Run]:
    """dsh runs the model's ``command``; then dsh starts again and answers a line.

    Returns the planting call's result for the model, and the second run.
    """
    stub.enqueue(bash_calls(command))
    went_on(run_program([*argv, "--allow", "shell"], env, work, f"plant\n{NEXT}\n"))
    (planted,) = [str(result["content"]) for result in results(Path(env["DSH_HOME"]))]
    return planted, run_program(argv, env, work, "hello\n")


def test_pth_planted_in_dsh_s_venv_does_not_run_at_next_start(
    env: dict[str, str], stub: StubServer, work: Path, marker: Path
) -> None:
    # 0.2.0: the venv was writable ("(no output)"); the next start ran the .pth: the key.
    argv = dsh_in_a_venv(work)
    pth = f".venv/{SITE}/zz-planted.pth"
    planted, again = plant_then_start_again(
        argv, f"echo {shlex.quote(payload(marker))} > {pth}", env, work, stub
    )
    assert not marker.exists()
    assert f"{pth}: Read-only file system" in planted
    assert not (work / pth).exists()
    assert again.stdout == "You said: hello\n"


def test_module_planted_in_dsh_s_venv_is_not_imported_at_next_start(
    env: dict[str, str], stub: StubServer, work: Path, marker: Path
) -> None:
    # 0.2.0: httpx.py in the venv's site-packages came before the real httpx, which dsh
    # imports for its first request: it ran, with the key (then the turn failed: "module
    # 'httpx' has no attribute 'AsyncClient'").
    argv = dsh_in_a_venv(work)
    module = f".venv/{SITE}/httpx.py"
    planted, again = plant_then_start_again(
        argv, f"echo {shlex.quote(payload(marker))} > {module}", env, work, stub
    )
    assert not marker.exists()
    assert f"{module}: Read-only file system" in planted
    assert again.stdout == "You said: hello\n"


def test_module_planted_in_the_working_directory_is_not_imported_by_python_m(
    env: dict[str, str], stub: StubServer, work: Path, marker: Path
) -> None:
    # The working directory is writable: the command succeeds. 0.2.0: `python -m dsh_stdio`
    # put it first on sys.path, and the next start imported the planted httpx, with the key.
    argv = [sys.executable, "-m", "dsh_stdio"]
    planted, again = plant_then_start_again(
        argv, f"echo {shlex.quote(payload(marker))} > httpx.py && echo planted", env, work, stub
    )
    assert not marker.exists()
    assert planted == "planted\n"
    assert (work / "httpx.py").exists()
    assert again.stdout == "You said: hello\n"


def test_bwrap_planted_on_path_in_the_working_directory_is_never_run(
    env: dict[str, str], stub: StubServer, work: Path, marker: Path
) -> None:
    # A PATH with a directory of the project first (as direnv or a Makefile sets it). 0.2.0:
    # the next start took the planted bwrap from it and ran it outside the sandbox, its probe
    # with the whole environment: the key.
    real = shutil.which("bwrap", path=env["PATH"])
    env = {**env, "PATH": f"{work}/bin:{env['PATH']}"}
    script = f'#!/bin/sh\n{sys.executable} -c {shlex.quote(payload(marker))}\nexec {real} "$@"\n'
    command = f"mkdir bin && printf %s {shlex.quote(script)} > bin/bwrap && chmod +x bin/bwrap"
    stub.enqueue(bash_calls(command))
    argv = [sys.executable, "-m", "dsh_stdio", "--allow", "shell"]
    went_on(run_program(argv, env, work, f"plant\n{NEXT}\n"))
    assert (work / "bin" / "bwrap").exists()  # the working directory is writable
    stub.enqueue(bash_calls("echo inside"))
    again = run_program(argv, env, work, "run something\n")
    assert not marker.exists()
    assert again.returncode == 0, again.stderr
    assert "(sandboxed: writes only" in again.stderr  # a real bwrap ran it


def test_bwrap_and_its_probe_never_get_the_key(
    env: dict[str, str], stub: StubServer, base: Path, work: Path
) -> None:
    # A bwrap outside the working directory that records what it was given (as a hostile or
    # compromised one could). 0.2.0 probed it with dsh's own environment: the key.
    seen = base / "bwrap-saw"
    bin_dir = base / "bin"
    bin_dir.mkdir()
    wrapper = f'#!/bin/sh\n{{ echo "--- bwrap"; env; }} >> {seen}\nexec /usr/bin/bwrap "$@"\n'
    (bin_dir / "bwrap").write_text(wrapper)
    (bin_dir / "bwrap").chmod(0o755)
    env = {**env, "PATH": f"{bin_dir}:{env['PATH']}"}
    stub.enqueue(bash_calls("echo inside"))
    went_on(run_dsh(env, work, "--allow", "shell", stdin=f"run\n{NEXT}\n"))
    recorded = seen.read_text()
    assert recorded.count("--- bwrap\n") == 2  # the probe, then the command
    assert CANARY_KEY not in recorded
    assert "DEEPSEEK_API_KEY" not in recorded
