"""How a stdio MCP server is started, and what it runs from: outside the sandbox (SPEC 10.1, 13).

A server runs with the user's rights, outside the sandbox, at every start of dsh. So nothing the
model can write may decide what it runs:

- its program: a bare name is looked up in ``PATH`` without the directories under the working
  directory (:func:`resolve_command`), and the server gets that ``PATH`` too, so a
  ``#!/usr/bin/env x`` line or a program the server starts cannot be one the model planted;
- ``PYTHONSAFEPATH=1``: ``python -m x`` and ``python script.py`` do not import from the
  current directory or the script's;
- its directory (:func:`server_cwd`): never the working directory or one inside it;
- what it runs from that lies inside the working directory (:func:`server_files`: its program,
  its file arguments and the directories holding them, the virtual environment of its program or of
  the interpreter its ``#!`` line names and what that environment's ``.pth`` files name, a Python's
  user site-packages, its ``cwd``, its ``PYTHONPATH``) joins the protected paths
  (:func:`dsh_core.trust.policy.inventory`): read-only to commands, a person's yes each time for
  ``write`` and ``edit``. The next start of dsh, from another directory, would run them. What a
  server loads by other means (a path in its own configuration, an editable install's import hook)
  is not known here.

Imported without the SDK: the workspace asks :func:`server_files` at every start.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from ...errors import MCP_SERVER
from ...tools.base import ToolError
from ...trust.policy import Kept, Missing, under
from ...trust.searchpath import SearchDirectory, search_path
from .spec import ServerSpec

__all__ = ["resolve_command", "server_cwd", "server_environment", "server_files"]


def _safe_path(path: str, workdir: Path) -> list[SearchDirectory]:
    """``PATH``'s directories but those a command could have written (relative ones, and those
    under ``workdir``)."""
    return [d for d in search_path(path, Path(os.path.realpath(workdir))) if not d.writable]


def resolve_command(command: str, path: str, workdir: Path) -> str:
    """The absolute program ``command`` names; a bare name is looked up in ``path`` without the
    directories under ``workdir``, where the model may write (SPEC 10.1)."""
    if os.path.isabs(command):
        if not os.access(command, os.X_OK) or os.path.isdir(command):
            problem = "does not exist" if not os.path.lexists(command) else "is not executable"
            raise ToolError(f"command {command} {problem}", MCP_SERVER)
        return command
    for directory in _safe_path(path, workdir):
        program = directory.program(command)
        if program is not None:
            return program
    raise ToolError(
        f"command {command!r} is not in PATH (directories under the working directory "
        "are not searched)",
        MCP_SERVER,
    )


def server_environment(
    environment: Mapping[str, str], spec: ServerSpec, workdir: Path
) -> dict[str, str]:
    """dsh's environment (without the key) and the file's ``env``; ``PATH`` without the
    directories under ``workdir``; ``PYTHONSAFEPATH=1`` unless the file says otherwise."""
    merged = {**environment, "PYTHONSAFEPATH": "1", **spec.env}
    if "PATH" in merged:
        kept = _safe_path(merged["PATH"], workdir)
        merged["PATH"] = os.pathsep.join(directory.entry for directory in kept)
    return merged


def server_cwd(spec: ServerSpec, workdir: Path, home: Path) -> str:
    """Where the server runs: its ``cwd``, else ``home``, else ``/`` when ``home`` is the working
    directory or inside it. A ``cwd`` there is refused: the model may write in it."""
    root = os.path.realpath(workdir)
    if spec.cwd is not None:
        if under(os.path.realpath(spec.cwd), root):
            raise ToolError(
                f"its cwd {spec.cwd} is in the working directory {root}, where the model may "
                "write: give it a cwd elsewhere, or start dsh in another directory",
                MCP_SERVER,
            )
        return spec.cwd
    return "/" if under(os.path.realpath(home), root) else str(home)


def server_files(
    specs: Iterable[ServerSpec], environment: Mapping[str, str], home: Path
) -> tuple[Kept, ...]:
    """What each stdio server runs from, resolved, for the inventory to keep where it lies
    inside a working directory (it keeps only those, and a directory only when it is not the
    working directory itself): its program (a bare name: that name in every ``PATH``
    directory, existing or not) and the directory holding it, the interpreter its ``#!`` line
    names, the virtual environment of either and the directories that environment's ``.pth``
    files name (editable installs), the user site-packages of a Python interpreter, its
    arguments that are files (from each directory a start may run it in) and the directories
    holding them, its ``cwd`` and its ``PYTHONPATH`` directories; for every start, from any
    working directory, not only this run's (a server refused now would start from elsewhere)."""
    kept: list[Kept] = []
    for spec in specs:
        if spec.command is None:
            continue
        reason = f'MCP server "{spec.name}"'
        env = {**environment, **spec.env}
        # Where a start may run it (:func:`server_cwd`): its cwd; else the home directory, or
        # `/` from a working directory that holds the home directory. Any start, not this one's.
        cwds = [spec.cwd] if spec.cwd else [str(home), "/"]
        if os.path.isabs(spec.command):
            programs = [spec.command]
        else:
            directories = env.get("PATH", os.defpath).split(os.pathsep)
            programs = [os.path.join(d, spec.command) for d in directories if os.path.isabs(d)]
        files = [p for a in spec.args for c in cwds if os.path.isfile(p := _joined(c, a))]
        for file in files:
            kept += _forms(file, reason)
        for program in programs:
            kept += _forms(program, reason, "tripwire")  # a link: itself, and where it leads
            if os.path.isfile(program):
                files.append(program)
                kept += _interpreter(program, reason, env, home)
                interpreter = _shebang(program)
                if interpreter is not None:
                    kept += _interpreter(interpreter, reason, env, home)
        for file in files:  # what it loads from beside itself: `require('./lib.js')`
            kept += _forms(os.path.dirname(os.path.abspath(file)), reason)
            kept += _forms(os.path.dirname(os.path.realpath(file)), reason)
        paths = [spec.cwd] if spec.cwd else []
        paths += [p for p in spec.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        for path in paths:
            if os.path.isabs(path):
                kept += _forms(path, reason)
    return tuple(kept)


def _joined(cwd: str, argument: str) -> str:
    return os.path.join(cwd, os.path.expanduser(argument))


def _shebang(program: str) -> str | None:
    """The absolute interpreter the ``#!`` line of ``program`` names (``#!/usr/bin/env x``:
    none, the server's ``PATH`` finds ``x``); None without one."""
    try:
        with open(program, "rb") as opened:
            line = opened.read(256).split(b"\n", 1)[0]
    except OSError:
        return None
    words = line.removeprefix(b"#!").split() if line.startswith(b"#!") else []
    interpreter = os.fsdecode(words[0]) if words else ""
    return interpreter if os.path.isabs(interpreter) else None


def _interpreter(program: str, reason: str, env: Mapping[str, str], home: Path) -> list[Kept]:
    """What ``program`` runs from as an interpreter: the virtual environment it is in, and the
    directories that environment's ``.pth`` files name; for a Python, its user site-packages."""
    kept: list[Kept] = []
    venv = os.path.dirname(os.path.dirname(os.path.abspath(program)))
    config = os.path.join(venv, "pyvenv.cfg")
    if os.path.isfile(config):  # .venv/bin/python
        kept += _forms(venv, reason)
        for pth in glob.glob(
            os.path.join(glob.escape(venv), "lib*", "*", "site-packages", "*.pth")
        ):
            for named in _pth_paths(pth):
                kept += _forms(named, reason)
    names = (os.path.basename(program), os.path.basename(os.path.realpath(program)))
    if any(name.startswith("python") for name in names):
        base = env.get("PYTHONUSERBASE") or os.path.join(env.get("HOME") or str(home), ".local")
        version = _python_version(names, config)
        if version is None:  # only those that exist: a version cannot be guessed
            sites = glob.glob(os.path.join(glob.escape(base), "lib", "python3.*", "site-packages"))
        else:
            sites = [os.path.join(base, "lib", f"python{version}", "site-packages")]
        for site in sites:  # a .pth planted there runs at its next start, existing or not
            kept += _forms(site, reason, "tripwire")
    return kept


def _python_version(names: Iterable[str], config: str) -> str | None:
    """``3.11`` from ``python3.11``, else from ``pyvenv.cfg``'s ``version``; None if neither."""
    for name in names:
        found = re.fullmatch(r"python(\d+\.\d+)", name)
        if found:
            return found.group(1)
    try:
        with open(config, encoding="utf-8", errors="replace") as opened:
            text = opened.read(4096)
    except OSError:
        return None
    found = re.search(r"^version(?:_info)?\s*=\s*(\d+\.\d+)", text, re.MULTILINE)
    return found.group(1) if found else None


def _pth_paths(pth: str) -> list[str]:
    """The directories a ``.pth`` file adds to ``sys.path`` (``site.addpackage``): its lines
    that are not comments or ``import`` lines, relative to its own directory."""
    try:
        with open(pth, encoding="utf-8", errors="replace") as opened:
            lines = opened.read(65536).splitlines()
    except OSError:
        return []
    site = os.path.dirname(pth)
    named = [line.rstrip() for line in lines if line.strip()]
    return [
        os.path.join(site, line)
        for line in named
        if not line.startswith("#") and not line.startswith(("import ", "import\t"))
    ]


def _forms(path: str, reason: str, missing: Missing | None = None) -> list[Kept]:
    """``path`` as named (normalised) and as it resolves, each once."""
    forms = dict.fromkeys((os.path.abspath(path), os.path.realpath(path)))
    return [Kept(Path(form), reason, missing, "dsh") for form in forms]
