"""What the model may not touch, whatever it was granted (SPEC section 10): the policy.

Two mechanisms enforce it, and both read it from here, so they cannot drift apart:

- the sandbox (:mod:`.sandbox`) makes protected paths read-only and credentials empty for
  commands;
- the file tools and the approval policy (:mod:`dsh_core.approval`) ask every time on a
  terminal and refuse on a pipe, whatever ``--allow`` says.

    credential_paths(Path.home(), dsh_home)   # ~/.ssh, ~/.aws, ..., and DSH_HOME itself
    protected_reason(PurePath(".git/hooks/pre-commit"))   # ".git/hooks/"
    Credentials.of(Path.home(), dsh_home).reason("/home/me/.ssh/id_rsa")   # "~/.ssh"
    own_process_reason("/proc/self/environ")   # "/proc/self": refused to tools, always
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath

__all__ = [
    "CREDENTIAL_NAMES",
    "GIT_PROTECTED_NAMES",
    "PROCESS_ENVIRONMENT",
    "PROTECTED_DIR_NAMES",
    "Credentials",
    "credential_paths",
    "own_process_reason",
    "protected_reason",
]

CREDENTIAL_NAMES = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
)
"""Relative to the user's home directory: where credentials live (SPEC 10.4)."""

GIT_PROTECTED_NAMES = ("config", "hooks", "commondir", "config.worktree")
"""Inside a ``.git`` directory: what git runs code from at the user's next ``git`` command
(``core.fsmonitor``, ``core.hooksPath``, aliases, filters; hook scripts), and what moves where
it reads those from (``commondir`` names another directory for ``config`` and ``hooks``;
``config.worktree`` is read too once ``extensions.worktreeConfig`` is set)."""

PROTECTED_DIR_NAMES = (".dsh", ".agents")
"""dsh's own project directories: what they hold steers later sessions."""


def credential_paths(home: Path, dsh_home: Path | None = None) -> tuple[Path, ...]:
    """The credential locations under ``home``, then ``dsh_home``: absolute, not resolved."""
    paths = [home / name for name in CREDENTIAL_NAMES]
    if dsh_home is not None:
        paths.append(dsh_home)
    return tuple(paths)


def protected_reason(relative: PurePath) -> str | None:
    """Which protected path ``relative`` (to the working directory, symlinks resolved) is in.

    ``.git/config`` and ``.git/hooks/`` of any repository, nested ones included (a
    submodule's, kept in ``.git/modules/<name>/``, too), and the ``.dsh/`` and ``.agents/``
    directories at any depth; None when it is none of them.
    """
    parts = relative.parts
    in_git = False
    for part in parts:
        if part in PROTECTED_DIR_NAMES:
            return f"{part}/"
        if part == ".git":
            in_git = True
        elif in_git and part in GIT_PROTECTED_NAMES:
            return f".git/{part}/" if part == "hooks" else f".git/{part}"
    return None


@dataclass(frozen=True, slots=True)
class Credentials:
    """One user's credential locations (SPEC 10.4), as absolute paths, each as it is shown.

    A location is matched by the path as named and by where it resolves (``~/.ssh`` may be a
    symlink to a key store): a path given here must be absolute and resolved. Other processes'
    ``/proc/<pid>/environ`` count too: the shell that started dsh holds the key in its own.
    """

    locations: tuple[tuple[str, str], ...]
    """(absolute path, as shown: ``~/.ssh``), the resolved form of each location included."""
    by_parent: dict[str, dict[str, str]]
    """The locations by the directory they are in, then by name: what a walk steps around."""

    @classmethod
    def of(cls, home: Path, dsh_home: Path | None = None) -> Credentials:
        found: dict[str, str] = {}
        for path in credential_paths(home, dsh_home):
            shown = _home_relative(path, home)
            for form in (os.path.abspath(path), os.path.realpath(path)):
                found.setdefault(form, shown)
        by_parent: dict[str, dict[str, str]] = {}
        for location, shown in found.items():
            parent, name = os.path.split(location)
            by_parent.setdefault(parent, {})[name] = shown
        return cls(tuple(found.items()), by_parent)

    def reason(self, real: str) -> str | None:
        """The location ``real`` is in or at (``~/.ssh``); None when it is in none."""
        for location, shown in self.locations:
            if real == location or real.startswith(location + "/"):
                return shown
        if _OTHER_ENVIRON.fullmatch(real):
            return PROCESS_ENVIRONMENT
        return None

    def within(self, directory: str) -> dict[str, str]:
        """The locations directly in ``directory`` (absolute, resolved), by name; empty for
        most directories (one lookup: a walk asks this of every directory it lists)."""
        names = self.by_parent.get(directory, {})
        if directory.startswith("/proc/"):
            return {**names, "environ": PROCESS_ENVIRONMENT}
        return names


PROCESS_ENVIRONMENT = "a process's environment"
_OTHER_ENVIRON = re.compile(r"/proc/\d+(?:/task/\d+)?/environ")


def _home_relative(path: Path, home: Path) -> str:
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


def own_process_reason(path: str) -> str | None:
    """Which of dsh's own ``/proc`` directories the absolute, normalised ``path`` is in:
    ``/proc/self``, ``/proc/thread-self`` or ``/proc/<pid>`` (or a thread's id) of this
    process; None for any other path. Its files hold the API key (``environ``) and open
    descriptors: no tool may read them, whoever approves."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "" or parts[1] != "proc":
        return None
    name = parts[2]
    if name in ("self", "thread-self"):
        return f"/proc/{name}"
    if name.isdigit() and (int(name) == os.getpid() or os.path.exists(f"/proc/self/task/{name}")):
        return f"/proc/{name}"
    return None
