"""SPEC 10.1 for extensions (SPEC 13): nothing the model can write starts a process.

MCP servers come from ``$DSH_HOME/config.toml`` alone; each attack below plants, where a
prompt-injected model with ``--allow write`` could, something that would run with the user's
rights (and, unscrubbed, the key) if dsh took it. Each checks for a marker the planted code
would write. The real ``dsh`` runs on a pipe against the stub.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.dsh_stdio.test_agent_pipe import assert_log_whole, data_of, run_dsh, stub, work
from tests.harness import run_in_process
from tests.security._support_sandbox import (  # noqa: F401 (the fixture is found by name)
    NEXT,
    Scene,
    needs_bwrap,
    payload,
    scene_fixture,
    went_on,
)
from tests.support import child_env

__all__ = ["stub", "work"]

pytestmark = pytest.mark.slow


def planted_program(path: Path, marker: Path) -> None:
    """An executable that leaves ``marker`` (and the environment it got) if it ever runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nenv > {marker}\n")
    path.chmod(0o755)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "dsh-home"
    path.mkdir()
    return path


def test_a_config_file_planted_in_the_project_starts_no_server(
    stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    planted_program(work / "tools" / "server", marker)
    table = f'[mcp.servers.x]\ncommand = "{work / "tools" / "server"}"\n'
    for place in (
        work / ".dsh" / "config.toml",
        work / "config.toml",
        work / ".agents" / "config.toml",
    ):
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(table)
    stub.enqueue(Answer("hello"))
    run = run_dsh(child_env(stub.url, home), work, "--allow", "mcp", stdin="hi\n")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert "MCP" not in run.stderr
    assert not any(t["function"]["name"].startswith("mcp__") for t in stub.requests[0]["tools"])


def test_a_server_command_planted_in_a_path_directory_under_the_project_is_not_run(
    stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    planted_program(work / "node_modules" / ".bin" / "mcp-notes", marker)
    (home / "config.toml").write_text('[mcp.servers.notes]\ncommand = "mcp-notes"\n')
    path = f"{work / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    stub.enqueue(Answer("hello"))
    run = run_dsh(child_env(stub.url, home, PATH=path), work, stdin="hi\n")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert (
        "dsh: MCP server \"notes\" did not start: command 'mcp-notes' is not in PATH "
        "(directories under the working directory are not searched)"
    ) in run.stderr


def test_a_module_planted_in_the_project_is_not_imported_by_a_python_server(
    stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    (work / "notes_server.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    # A user's server run as `python -m notes_server`: with the working directory as its own,
    # Python would import the planted module from it.
    (home / "config.toml").write_text(
        "[mcp.servers.notes]\n"
        f"command = {json.dumps(sys.executable)}\n"
        'args = ["-m", "notes_server"]\n'
        "startup_timeout_s = 5\n"
    )
    stub.enqueue(Answer("hello"))
    run = run_dsh(child_env(stub.url, home), work, stdin="hi\n")
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert 'dsh: MCP server "notes" did not start: ' in run.stderr


# Second review: what a configured server runs from was the model's to change, and the server
# got dsh's PATH and working directory unfiltered. Each attack below plants as the model would
# (with the tool it had), then dsh starts the server: the planted code must not run, and what
# the server runs from is a protected path.


def server_config(
    scene: Scene, command: str, *args: str, cwd: str = "", pythonpath: str = ""
) -> None:
    lines = ["[mcp.servers.mine]", f"command = {json.dumps(command)}"]
    lines.append(f"args = {json.dumps(list(args))}")
    lines += [f"cwd = {json.dumps(cwd)}"] if cwd else []
    lines += [f"env = {{ PYTHONPATH = {json.dumps(pythonpath)} }}"] if pythonpath else []
    scene.dsh_home.mkdir(exist_ok=True)
    (scene.dsh_home / "config.toml").write_text("\n".join(lines) + "\nstartup_timeout_s = 5\n")


def run_calls(scene: Scene, allow: str, *items: tuple[str, dict[str, str]]) -> list[str]:
    """dsh, granted ``allow``, runs the model's calls (one step each): what it read back."""
    for name, arguments in items:
        scene.stub.enqueue(ToolCalls(((name, json.dumps(arguments)),)))
    run = run_in_process(scene.env, "--allow", allow, stdin=f"attack\n{NEXT}\n", cwd=scene.work)
    went_on(run)
    return [str(r["content"]) for r in data_of(assert_log_whole(scene.dsh_home), "tool/result")]


def model_edits_the_script(scene: Scene, script: Path) -> None:
    """With ``--allow write`` the model reads ``server.py`` and edits a payload in: refused."""
    new = f"import os, sys; {payload(scene.marker)}"
    _, edit = run_calls(
        scene,
        "write",
        ("read", {"file_path": "server.py"}),
        ("edit", {"file_path": "server.py", "old_string": "import os, sys", "new_string": new}),
    )
    assert 'Error: tool "edit" touches server.py (protected: MCP server "mine")' in edit, edit
    assert script.read_text() == "import os, sys\nsys.exit(3)\n"


def test_allow_write_does_not_let_the_model_edit_the_servers_own_script(scene: Scene) -> None:
    # Review (t25): read server.py, edit it: no question; the next start ran it unsandboxed.
    script = scene.work / "server.py"
    script.write_text("import os, sys\nsys.exit(3)\n")
    server_config(scene, sys.executable, str(script))
    model_edits_the_script(scene, script)
    run_in_process(scene.env, stdin="hello\n", cwd=scene.work)  # the next start
    assert not scene.marker.exists()


def test_allow_write_does_not_let_the_model_edit_a_script_a_server_runs_from_the_root(
    scene: Scene,
) -> None:
    # Second review (D3): without a cwd a server runs in `/` when dsh starts in a directory
    # holding the home directory, but its relative file arguments were protected as ~/<arg>.
    script = scene.work / "server.py"
    script.write_text("import os, sys\nsys.exit(3)\n")
    server_config(scene, sys.executable, os.path.relpath(script, "/"))
    model_edits_the_script(scene, script)
    run_in_process(scene.env, stdin="hello\n", cwd=scene.base)  # holds the home: the server in /
    assert not scene.marker.exists()


@needs_bwrap
def test_a_sandboxed_command_cannot_rewrite_the_servers_command_file(scene: Scene) -> None:
    # Review (t24): `sed -i '2i touch /tmp/m' mcp/server.sh` changed it; the next start, even
    # from another directory, ran it.
    command = scene.work / "mcp" / "server.sh"
    planted_program(command, scene.base / "unused")
    before = command.read_text()
    server_config(scene, str(command))
    (outcome,), _ = scene.attack(f"sed -i '2i touch {scene.marker}' mcp/server.sh; echo rc=$?")
    assert "rc=0" not in outcome["content"], outcome["content"]  # a read-only mount: EBUSY
    assert command.read_text() == before
    run_in_process(scene.env, stdin="hello\n", cwd=scene.base)  # the next start, elsewhere
    assert not scene.marker.exists()


def test_an_interpreter_planted_on_path_under_the_project_is_not_the_servers(scene: Scene) -> None:
    # Review (t20): PATH=<proj>/.venv/bin:..., the server's `#!/usr/bin/env atk2py`; a command
    # planted .venv/bin/atk2py, the next start ran it outside the sandbox.
    real = scene.base / "realbin" / "atk2py"
    real.parent.mkdir()
    real.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    real.chmod(0o755)
    server = scene.base / "server"
    server.write_text("#!/usr/bin/env atk2py\nimport sys\nsys.exit(3)\n")
    server.chmod(0o755)
    planted_program(scene.work / ".venv" / "bin" / "atk2py", scene.marker)
    server_config(scene, str(server))
    path = os.pathsep.join([str(scene.work / ".venv" / "bin"), str(real.parent), os.defpath])
    scene.env["PATH"] = path
    run = run_in_process(scene.env, stdin="hello\n", cwd=scene.work)
    assert not scene.marker.exists()
    assert 'dsh: MCP server "mine" did not start' in run.stderr  # it exits 3, by the real one


def test_a_module_planted_in_a_home_working_directory_is_not_imported_by_python_m(
    scene: Scene,
) -> None:
    # Review (t9): `args = ["-m", "legitsrv"]`, no cwd (the home directory), dsh started in
    # the home directory; the model wrote legitsrv.py there, the next start imported it.
    legit = scene.base / "legit"
    legit.mkdir()
    (legit / "legitsrv.py").write_text("import sys\nsys.exit(3)\n")
    (scene.work / "legitsrv.py").write_text(payload(scene.marker) + "\n")
    server_config(scene, sys.executable, "-m", "legitsrv", pythonpath=str(legit))
    scene.env["HOME"] = str(scene.work)
    run = run_in_process(scene.env, stdin="hello\n", cwd=scene.work)
    assert not scene.marker.exists()
    assert 'dsh: MCP server "mine" did not start' in run.stderr


def test_a_server_whose_cwd_is_in_the_working_directory_is_not_started(scene: Scene) -> None:
    # Review (A2): a server's cwd inside the project: `npx x` or `python -m x` would run what
    # the model wrote there.
    (scene.work / "srv").mkdir()
    planted_program(scene.work / "srv" / "tool", scene.marker)
    server_config(scene, "/bin/sh", "-c", "./tool", cwd=str(scene.work / "srv"))
    run = run_in_process(scene.env, stdin="hello\n", cwd=scene.work)
    assert not scene.marker.exists()
    assert (
        f'dsh: MCP server "mine" did not start: its cwd {scene.work / "srv"} is in the working '
        f"directory {scene.work}, where the model may write"
    ) in run.stderr


# Third review (G1-G3): a server runs code from beside its kept files (a module its script
# loads, an editable install's source, the venv its `#!` line names, a Python's user site),
# and a server program that is a link inside the working directory broke every command.


def python_venv(path: Path) -> Path:
    """A virtual environment at ``path`` (no pip): its site-packages directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    (site,) = path.glob("lib/python*/site-packages")
    return site


def fails_in_the_sandbox_and_nothing_runs_next(scene: Scene, command: str) -> None:
    """A sandboxed ``command`` fails (a read-only mount), and the next start, from another
    directory, runs nothing the model wrote."""
    content = scene.content(f"{command}; echo rc=$?")
    assert "rc=0" not in content, content
    run_in_process(scene.env, stdin="hello\n", cwd=scene.base)
    assert not scene.marker.exists()


@needs_bwrap
def test_a_sandboxed_command_cannot_change_a_module_beside_the_servers_script(
    scene: Scene,
) -> None:
    # Third review (t2, node): index.js does require('./lib.js'); a sandboxed `>> srv/lib.js`
    # worked, and the next start, from the home directory, ran it outside the sandbox.
    srv = scene.work / "srv"
    srv.mkdir()
    (srv / "index.js").write_text("require('./lib.js');\nprocess.exit(3);\n")
    (srv / "lib.js").write_text("// helper\n")
    server_config(scene, "node", str(srv / "index.js"))
    js = f"require('fs').writeFileSync({json.dumps(str(scene.marker))}, process.env.HOME)"
    fails_in_the_sandbox_and_nothing_runs_next(scene, f"echo {shlex.quote(js)} >> srv/lib.js")
    assert (srv / "lib.js").read_text() == "// helper\n"


@needs_bwrap
def test_a_sandboxed_command_cannot_change_the_source_of_an_editable_install(
    scene: Scene,
) -> None:
    # Third review (t2, python): `.venv/bin/python -m mysrv`, the venv's .pth names src/; a
    # sandboxed `>> src/mysrv/__init__.py` ran at the next start.
    site = python_venv(scene.work / ".venv")
    (site / "__editable__.mysrv.pth").write_text(f"{scene.work / 'src'}\n")
    package = scene.work / "src" / "mysrv"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import sys\nsys.exit(3)\n")
    server_config(scene, str(scene.work / ".venv" / "bin" / "python"), "-m", "mysrv")
    planted = shlex.quote(payload(scene.marker))
    fails_in_the_sandbox_and_nothing_runs_next(scene, f"echo {planted} >> src/mysrv/__init__.py")
    assert (package / "__init__.py").read_text() == ""


@needs_bwrap
def test_a_sandboxed_command_cannot_change_the_venv_a_console_scripts_shebang_names(
    scene: Scene,
) -> None:
    # Third review (t10): dsh in the home directory, `~/.local/bin/mysrv` a pipx console
    # script whose `#!` names ~/.local/share/pipx/venvs/mysrv/bin/python: that venv was not
    # kept (looked for two levels above the script), and a sandboxed append to its
    # site-packages ran at the next start, from /tmp.
    scene.env["HOME"] = str(scene.work)
    venv = scene.work / ".local" / "share" / "pipx" / "venvs" / "mysrv"
    site = python_venv(venv)
    (site / "mysrv").mkdir()
    (site / "mysrv" / "__init__.py").write_text("import sys\n\ndef main():\n    sys.exit(3)\n")
    script = scene.work / ".local" / "bin" / "mysrv"
    script.parent.mkdir()
    script.write_text(f"#!{venv / 'bin' / 'python'}\nfrom mysrv import main\nmain()\n")
    script.chmod(0o755)
    server_config(scene, str(script))
    where = shlex.quote(str(site.relative_to(scene.work) / "mysrv" / "__init__.py"))
    planted = shlex.quote(payload(scene.marker))
    fails_in_the_sandbox_and_nothing_runs_next(scene, f"echo {planted} >> {where}")


SYSTEM_PYTHON = Path("/usr/bin/python3")


@needs_bwrap
@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no /usr/bin/python3")
def test_a_sandboxed_command_cannot_plant_a_pth_in_a_python_servers_user_site(
    scene: Scene,
) -> None:
    # Third review (t8): dsh in the home directory, a server run by /usr/bin/python3: a
    # sandboxed `mkdir -p ~/.local/lib/python3.11/site-packages && echo ... > zz.pth` ran at
    # the next start, from /tmp (dsh's own user site is kept; not the server's Python's).
    scene.env["HOME"] = str(scene.work)
    server_config(scene, str(SYSTEM_PYTHON), "-c", "import sys; sys.exit(3)")
    pth = shlex.quote(payload(scene.marker))
    content = scene.content(
        f'd=$({SYSTEM_PYTHON} -m site --user-site) && mkdir -p "$d" && echo {pth} > "$d/zz.pth"'
    )
    assert "[sandbox: set aside .local/lib/python3." in content, content
    assert not list(scene.work.glob(".local/lib/python3*/site-packages"))
    run_in_process(scene.env, stdin="hello\n", cwd=scene.base)
    assert not scene.marker.exists()


@needs_bwrap
def test_a_server_program_that_is_a_link_in_the_project_does_not_break_commands(
    scene: Scene,
) -> None:
    # Third review (t11): `command = "<proj>/bin/srv"`, a link to /usr/bin/sleep: bwrap could
    # not mount onto it, and every sandboxed command failed ("Can't create file at ...").
    link = scene.work / "bin" / "srv"
    link.parent.mkdir()
    link.symlink_to("/usr/bin/sleep")
    server_config(scene, str(link), "0")
    assert scene.content("echo hi; echo rc=$?") == "hi\nrc=0\n"


def test_allow_write_does_not_let_the_model_replace_a_server_program_that_is_a_link(
    scene: Scene,
) -> None:
    # Third review (G3): the sandbox keeps where the link leads, not the link; the file tools
    # still see the link's path, and refuse it.
    link = scene.work / "bin" / "srv"
    link.parent.mkdir()
    link.symlink_to("/usr/bin/sleep")
    server_config(scene, str(link), "0")
    (write,) = run_calls(scene, "write", ("write", {"file_path": "bin/srv", "content": "x"}))
    assert "writes outside the working directory (/usr/bin/sleep)" in write, write
    assert link.readlink() == Path("/usr/bin/sleep")
