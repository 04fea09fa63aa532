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
  the virtual environment around it, its file arguments, its ``cwd``, its ``PYTHONPATH``) joins
  the protected paths (:func:`.trust.inventory`): read-only to commands, a person's yes each
  time for ``write`` and ``edit``. The next start of dsh, from another directory, would run them.

Imported without the SDK: the workspace asks :func:`server_files` at every start.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import MCP_SERVER
from ..tools.base import ToolError
from ..tools.searchpath import SearchDirectory, search_path
from ..tools.trust import Kept, Missing, under
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
    inside a working directory (it keeps only those): its program (a bare name: that name in
    every ``PATH`` directory, existing or not), the virtual environment the program is in, its
    arguments that are files (from each directory a start may run it in), its ``cwd`` and its
    ``PYTHONPATH`` directories; for every start, from any working directory, not only this
    run's (a server refused now would start from elsewhere)."""
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
        for program in programs:
            kept += _forms(program, reason, "tripwire")  # a link: itself, and where it leads
            venv = os.path.dirname(os.path.dirname(os.path.abspath(program)))
            if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):  # .venv/bin/python
                kept += _forms(venv, reason)
        for argument in spec.args:
            for cwd in cwds:
                path = os.path.join(cwd, os.path.expanduser(argument))
                if os.path.isfile(path):
                    kept += _forms(path, reason)
        paths = [spec.cwd] if spec.cwd else []
        paths += [p for p in spec.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        for path in paths:
            if os.path.isabs(path):
                kept += _forms(path, reason)
    return tuple(kept)


def _forms(path: str, reason: str, missing: Missing | None = None) -> list[Kept]:
    """``path`` as named (normalised) and as it resolves, each once."""
    forms = dict.fromkeys((os.path.abspath(path), os.path.realpath(path)))
    return [Kept(Path(form), reason, missing, "dsh") for form in forms]
