"""What may not be read, whatever the model was granted (SPEC 10.4, 10.5): the policy.

Credentials (SPEC 10.4's list, and the files that hold them by accident) are empty to
sandboxed commands and refused or asked for by the file tools; the shell start-up and ``.env``
files that hold the API key are hidden from commands too; dsh's own ``/proc`` directories are
refused to tools always. What may not be *changed* is :mod:`.policy`.

    Credentials.of(Path.home(), dsh_home).reason("/home/me/.ssh/id_rsa")   # "~/.ssh"
    own_process_reason("/proc/self/environ")   # "/proc/self": refused to tools, always
    key_files(home, root)   # ~/.bashrc, when it holds the key: hidden from commands
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..fileio import read_regular

__all__ = [
    "CREDENTIAL_NAMES",
    "PROCESS_ENVIRONMENT",
    "STARTUP_FILES",
    "Credentials",
    "credential_paths",
    "key_files",
    "own_pids",
    "own_process_reason",
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
    ".config/environment.d",
    ".bash_history",
    ".zsh_history",
    ".config/zsh/.zsh_history",
    ".histfile",
    ".sh_history",
    ".history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".ipython",
    ".node_repl_history",
    ".irb_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".viminfo",
    ".local/share/nvim/shada",
)
"""Relative to the user's home directory: where credentials live (SPEC 10.4's list), then the
files that hold them by accident: an ``export`` typed once stays in a shell's history (zsh's
under ``$ZDOTDIR`` too, ksh's ``.sh_history``, csh's ``.history``), a REPL's or an editor's
(``:let $KEY=`` in vim's and neovim's), and ``environment.d`` sets variables for the user's
whole session."""

STARTUP_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".config/zsh/.zshrc",
    ".config/zsh/.zshenv",
    ".config/zsh/.zprofile",
    ".config/zsh/.zlogin",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".config/fish/config.fish",
    ".config/fish/fish_variables",
)
"""Shell start-up files in the home directory (zsh's under ``$ZDOTDIR`` too): where people
``export`` their API key; and ``fish_variables``, where fish keeps a ``set -Ux``."""

KEY_FILE_BYTES = 1024 * 1024
"""How much of a start-up or ``.env`` file is looked through for the key."""


def credential_paths(home: Path, dsh_home: Path | None = None) -> tuple[Path, ...]:
    """The credential locations under ``home``, then ``dsh_home``: absolute, not resolved."""
    paths = [home / name for name in CREDENTIAL_NAMES]
    if dsh_home is not None:
        paths.append(dsh_home)
    return tuple(paths)


def key_files(home: Path | None, root: Path | None) -> tuple[Path, ...]:
    """The shell start-up files (in ``home``) and ``.env*`` files (in ``home`` and at the top
    of ``root``) that hold a secret dsh masks (the API key), resolved; empty without one."""
    from ..masking import SECRETS, mask

    if not SECRETS:
        return ()
    candidates = [home / name for name in STARTUP_FILES] if home is not None else []
    for directory in {home, root} - {None}:
        assert directory is not None
        try:
            with os.scandir(directory) as entries:
                candidates += [Path(e.path) for e in entries if e.name.startswith(".env")]
        except OSError:
            continue
    found: list[Path] = []
    for candidate in candidates:
        if _holds_secret(candidate, mask):  # opened first: most do not exist
            path = Path(os.path.realpath(candidate))
            if path not in found:
                found.append(path)
    return tuple(found)


def _holds_secret(path: Path, mask: Callable[[str], str]) -> bool:
    data = read_regular(path, KEY_FILE_BYTES)
    if data is None:
        return False
    text = data.decode("utf-8", "surrogateescape")
    return mask(text) != text


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
    if name.isdigit() and any(
        int(name) == pid or os.path.exists(f"/proc/{pid}/task/{name}") for pid in own_pids()
    ):
        return f"/proc/{name}"
    return None


_DSH_PID = os.getpid()
"""dsh's process id, as this module was imported."""


def own_pids() -> tuple[int, ...]:
    """This process, and dsh's if this is a process forked from it (a ``grep`` that divided,
    :mod:`dsh_core.tools.divided`): dsh's files hold the same key."""
    pid = os.getpid()
    return (pid,) if pid == _DSH_PID else (pid, _DSH_PID)
