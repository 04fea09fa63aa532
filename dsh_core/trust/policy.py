"""What the model may not touch, whatever it was granted (SPEC section 10): the policy.

Two mechanisms enforce it, and both read it from here, so they cannot drift apart:

- the sandbox (:mod:`.confinement`, :mod:`.sandbox`) keeps what :func:`inventory` lists
  read-only for commands, and hides credentials and the files that hold the key;
- the file tools (:mod:`.paths`) and the approval policy (:mod:`dsh_core.agent.approval`) ask every
  time on a terminal and refuse on a pipe, whatever ``--allow`` says, for a ``write`` or
  ``edit`` of a path :meth:`Protection.reason` names: the same list, and a few rules by name.

What is kept inside the working directory, and why (:func:`inventory`):

- dsh's own installation (SPEC 10.1): its interpreter, prefixes, ``sys.path``, scripts and
  packages, where they lie inside (a project's ``.venv``): a ``.pth`` planted there runs at
  dsh's next start, outside the sandbox, with the key;
- what git runs code from at the user's next ``git`` (SPEC 10.2): every repository's
  ``config``, ``hooks/``, ``commondir`` and ``config.worktree`` (the working directory's, nested
  ones, submodules', worktrees', bare ones), a ``.git`` *file* (the ``gitdir:`` pointer), and
  the paths a configuration names (:mod:`.gitconfig`: ``core.hooksPath``, included files, a
  program of the tree that ``core.fsmonitor`` or an alias runs), git's global configuration
  when it lies inside;
- what steers later sessions: ``.dsh/``, ``.agents/`` and ``AGENTS.md`` (SPEC 9: the system
  prompt quotes them);
- what the configured MCP servers run from (SPEC 13): dsh starts them outside the sandbox.

The file tools also refuse, by name and without looking at the disk, anything under a ``.git``
(a file or a directory, at any depth: a model that writes ``src/.git`` makes a repository), and
anything in or making a directory that git would take for a git directory (``HEAD``,
``objects/`` and ``refs/``: git uses one where it finds one, no ``.git`` needed).

    inventory(root, installation=installation, found=scan.found(), home=home).kept
    Protection(root, installation=installation, scan=scan).reason("/w/.venv/lib/x.pth")
    protected_reason(PurePath(".git/hooks/pre-commit"))   # ".git/hooks/"

What may not be read (credentials, the files that hold the key, dsh's own ``/proc``) is
:mod:`.credentials`.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Literal, Protocol

from . import AGENTS_FILE

__all__ = [
    "GIT_PROTECTED_NAMES",
    "INSTALLATION",
    "PROTECTED_DIR_NAMES",
    "Found",
    "Inventory",
    "Kept",
    "Protection",
    "Scan",
    "inside",
    "installation_paths",
    "inventory",
    "looks_like_git_directory",
    "protected_reason",
]

GIT_PROTECTED_NAMES = ("config", "hooks", "commondir", "config.worktree")
"""Inside a git directory: what git runs code from at the user's next ``git`` command
(``core.fsmonitor``, ``core.hooksPath``, aliases, filters; hook scripts), and what moves where
it reads those from (``commondir`` names another directory for ``config`` and ``hooks``;
``config.worktree`` is read too once ``extensions.worktreeConfig`` is set)."""

PROTECTED_DIR_NAMES = (".dsh", ".agents")
"""dsh's own project directories: what they hold steers later sessions."""

GIT_DIRECTORY_NAMES = ("HEAD", "objects", "refs")
"""What makes a directory a git directory to git's discovery (``is_git_directory``)."""

INSTALLATION = "dsh's own installation"


def protected_reason(relative: PurePath) -> str | None:
    """Which protected name ``relative`` (to the working directory, symlinks resolved) is in.

    Anything named ``.git`` or under one, at any depth (``.git/config`` and ``.git/hooks/``
    by name, the rest as ``.git/``; a ``.git`` file as ``.git``), the ``.dsh/`` and
    ``.agents/`` directories at any depth, and any ``AGENTS.md``; None for anything else.
    """
    parts = relative.parts
    for index, part in enumerate(parts):
        if part in PROTECTED_DIR_NAMES:
            return f"{part}/"
        if part == ".git":
            below = parts[index + 1 :]
            if not below:
                return ".git"
            for name in below:  # .git/modules/<name>/config: a submodule's config
                if name in GIT_PROTECTED_NAMES:
                    return f".git/{name}/" if name == "hooks" else f".git/{name}"
            return ".git/"
    if parts and parts[-1] == AGENTS_FILE:
        return AGENTS_FILE
    return None


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is strictly inside ``root`` (both resolved)."""
    return path != root and under(path, root)


def under(path: Path | str, other: Path | str) -> bool:
    """Whether ``path`` is ``other`` or below it: on the strings (both absolute, normalised)."""
    text, prefix = str(path), str(other)
    return text == prefix or text.startswith(prefix if prefix.endswith("/") else prefix + "/")


@functools.cache
def installation_paths() -> tuple[Path, ...]:
    """Where this dsh runs from, resolved: interpreter, prefixes, ``sys.path``, scripts, packages,
    and the user's site-packages directory when Python would import from it (even before it
    exists).

    Computed once, from this process as it is at the first ask (the first command): nothing
    here changes while dsh runs. ``python -m dsh_stdio`` has dropped the working directory from
    ``sys.path`` before this is asked.
    """
    candidates = [
        sys.executable,
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        *(entry for entry in sys.path if entry),
        str(Path(__file__).resolve().parent.parent),  # dsh_core itself
    ]
    front_door = sys.modules.get("dsh_stdio")
    if front_door is not None:
        candidates += list(getattr(front_door, "__path__", []))
    script = sys.argv[0] if sys.argv else ""
    if os.path.isabs(script) and os.path.isfile(script):
        candidates.append(os.path.dirname(script))  # the ``dsh`` script's directory
    found: list[Path] = []
    for candidate in candidates:
        if not candidate or not os.path.isabs(candidate):
            continue
        for path in {Path(os.path.abspath(candidate)), Path(os.path.realpath(candidate))}:
            if path not in found and os.path.lexists(path):
                found.append(path)
    import site

    if site.ENABLE_USER_SITE:  # imported from at the next start once it exists: a .pth there
        found.append(Path(os.path.realpath(site.getusersitepackages())))  # runs (SPEC 10.1)
    return tuple(found)


def looks_like_git_directory(directory: str, adding: str = "") -> bool:
    """Whether git would take ``directory`` for a git directory (``HEAD``, ``objects``,
    ``refs``), counting ``adding`` (a path about to be written) as there."""
    for name in GIT_DIRECTORY_NAMES:
        path = os.path.join(directory, name)
        if not (under(adding, path) if adding else False) and not os.path.lexists(path):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Found:
    """What a scan of the working directory found below its top (see :mod:`.repositories`)."""

    repositories: tuple[Path, ...] = ()
    """Directories holding a ``.git`` (a directory or a file), the working directory excluded."""
    git_directories: tuple[Path, ...] = ()
    """Directories that are git directories themselves (a bare repository, or one being made)."""
    protected: tuple[Path, ...] = ()
    """``.dsh``, ``.agents`` and ``AGENTS.md`` below the top of the working directory."""
    complete: bool = True
    """False when the scan stopped at its budget: what lies past it is not known."""


class Scan(Protocol):
    """Finds what :class:`Found` holds, up to date at each ask."""

    def found(self) -> Found: ...


Missing = Literal["directory", "file", "tripwire"]
"""What a kept path that does not exist would be once made: a directory, a file, or either (a
*tripwire*). The sandbox stands nothing there while a command runs (a mount point would be
made in the person's tree, SPEC 10.12): it looks afterwards, and sets aside what a command
made there (:func:`.confinement.undo`)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A path kept from the model inside the working directory, and why."""

    path: Path
    """Absolute, resolved."""
    reason: str
    """As the question shows it: ``.git/config``, ``dsh's own installation``."""
    missing: Missing | None = None
    """What to do while it does not exist; None: nothing (nothing there runs)."""
    runner: Literal["git", "dsh"] = "git"
    """Who would run or read what is there: git, or dsh (its installation, its MCP servers)."""


@dataclass(frozen=True, slots=True)
class Inventory:
    """Everything kept inside one working directory, now."""

    kept: tuple[Kept, ...]
    git_directories: tuple[Path, ...]
    """Every git directory inside, each once: the sandbox looks at new ones after a command."""


def inventory(
    root: Path,
    *,
    installation: Iterable[Path] = (),
    found: Found | None = None,
    home: Path | None = None,
    started: Iterable[Kept] = (),
) -> Inventory:
    """What is kept inside ``root`` now (see the module docstring); ``lstat`` and reading git's
    configuration files only. ``installation`` and ``root`` are resolved; ``started``: what
    dsh's MCP servers run from (:func:`dsh_core.extensions.mcp.launch.server_files`)."""
    taking = _Taking(root, home)
    for path in installation:
        if inside(path, root):  # the user's site-packages may not exist yet
            missing: Missing | None = None if os.path.lexists(path) else "tripwire"
            taking.kept.append(Kept(path, INSTALLATION, missing, "dsh"))
    taking.kept += [item for item in started if inside(item.path, root)]
    taking.repository(root, top=True)
    for repository in found.repositories if found else ():
        taking.repository(repository, top=False)
    for gitdir in found.git_directories if found else ():
        taking.gitdir(gitdir, top=gitdir)
    if home is not None:
        for config in _global_git_configs(home):  # inside when dsh runs in the home directory
            taking.take(config, "git's global configuration", "tripwire")
            taking.named_by(config, top=root)
    for name in PROTECTED_DIR_NAMES:
        taking.take(root / name, f"{name}/", "directory")
    taking.take(root / AGENTS_FILE, AGENTS_FILE, "file")
    for path in found.protected if found else ():
        taking.take(path, f"{path.name}/" if path.name in PROTECTED_DIR_NAMES else path.name)
    taking.follow_links()
    return Inventory(tuple(taking.kept), tuple(taking.gitdirs))


LINK_BUDGET = 2_000
"""Directory entries looked at, per inventory, for links out of kept directories (hooks, skill
folders): past it, links deeper in are not followed (a tree of 10,000 skills costs no more)."""
LINK_DEPTH = 3
"""Levels below a kept directory looked at for links: ``.agents/skills/x/tool -> ...``."""


class _Taking:
    """Collects what :func:`inventory` keeps, looking at each path once."""

    def __init__(self, root: Path, home: Path | None) -> None:
        self.root = root
        self.home = home
        self.kept: list[Kept] = []
        self.gitdirs: list[Path] = []

    def take(self, path: Path, reason: str, missing: Missing | None = None) -> None:
        """Keep ``path`` (resolved here) when it is inside."""
        resolved = Path(os.path.realpath(path))
        if inside(resolved, self.root):
            self.kept.append(Kept(resolved, reason, missing))

    def repository(self, directory: Path, *, top: bool) -> None:
        """A repository's ``.git``: a directory or a ``gitdir:`` file. One that is missing
        keeps nothing: a ``.git`` a command makes is a new git directory, looked at after it
        (:func:`.confinement.undo`)."""
        dot_git = directory / ".git"
        mode = _mode(dot_git)
        shown = self._shown(dot_git)
        if mode is None:
            return
        if stat.S_ISREG(mode):
            self.take(dot_git, shown)  # the pointer: rewritten, it would lead git elsewhere
            gitdir = _read_path(dot_git, directory, prefix="gitdir:")
            if gitdir is not None:
                self.gitdir(gitdir, top=directory)
            return
        self.gitdir(Path(os.path.realpath(dot_git)), top=directory)  # a directory, or a link

    def gitdir(self, gitdir: Path, *, top: Path) -> None:
        """A git directory: its protected entries, what its configuration names, then its
        common directory's, its submodules' and its worktrees'. ``top``: its working tree."""
        if not inside(gitdir, self.root) or gitdir in self.gitdirs:
            return
        shown = self._shown(gitdir)
        if not os.path.lexists(gitdir):  # a pointer to nowhere yet: what a command makes there
            # is removed after it (git would take it for the repository)
            self.take(gitdir, shown, "tripwire")
            return
        self.gitdirs.append(gitdir)
        entries = {name: _mode(gitdir / name) for name in GIT_PROTECTED_NAMES}
        linked = entries["commondir"] is not None  # a linked worktree's, or a redirected one
        if (
            _mode(gitdir / "HEAD") is None
            or any(mode is not None and stat.S_ISLNK(mode) for mode in entries.values())
            or (entries["hooks"] is None and not linked)
        ):
            # Not a repository (yet), an entry that leads elsewhere, or no hooks directory
            # (nothing may stand in for it in the person's tree): the whole of it is kept.
            self.kept.append(Kept(gitdir, shown))
            return
        for name, mode in entries.items():
            path = gitdir / name
            reason = f"{shown}/{name}" + ("/" if name == "hooks" else "")
            if mode is not None:
                self.kept.append(Kept(path, reason))
            elif linked and name in ("config", "hooks"):
                continue  # git takes these from the common directory, kept on its own
            else:
                self.kept.append(Kept(path, reason, "tripwire"))
        for name in ("config", "config.worktree"):
            if entries[name] is not None:
                self.named_by(gitdir / name, top=top)
        if linked:
            common = _read_path(gitdir / "commondir", gitdir)
            if common is not None:
                self.gitdir(common, top=top)  # a bare repository's, say, which no .git leads to
        for nested in _nested_gitdirs(gitdir):
            self.gitdir(nested, top=top)

    def named_by(self, path: Path, *, top: Path) -> None:
        """What the configuration file ``path`` names (:mod:`.gitconfig`): the files it
        includes, its hooks directory, the programs of the tree it runs."""
        from .gitconfig import read_config  # only a command or a write needs it

        config = read_config(path, home=self.home)
        for named in config.named_paths(top, self.home):
            missing: Missing = "directory" if named.directory else "tripwire"
            self.take(named.path, _shown_key(named.reason, self.root), missing)

    def follow_links(self) -> None:
        """Keep where the links in kept places lead, when inside (SPEC 10.13): a hook linked
        to the tree's ``hooks/pre-commit``, ``.agents/skills -> ../.claude/skills``, a
        ``.git/config`` that is a link. Each target is kept like the link's place, and the links
        in a directory it leads to are followed too (each place once). What dsh runs (its
        installation, its MCP servers' files) is followed only where it is itself a link: a
        venv's links lead to its own parts, and a venv is large."""
        budget = [LINK_BUDGET]
        pending = list(self.kept)
        looked: set[Path] = set()
        while pending:
            item = pending.pop()
            if item.path in looked:
                continue
            looked.add(item.path)
            for link in _links(item.path, budget, below=item.runner == "git"):
                target = Path(os.path.realpath(link))
                if not inside(target, self.root) or any(
                    under(target, kept.path) for kept in self.kept
                ):
                    continue
                reason = f"{self._shown(link)} -> {self._shown(target)}"
                kept = Kept(target, reason, None, item.runner)
                self.kept.append(kept)
                pending.append(kept)

    def _shown(self, path: Path) -> str:
        return os.path.relpath(path, self.root) if under(path, self.root) else str(path)


def _links(place: Path, budget: list[int], *, below: bool) -> list[Path]:
    """``place`` itself if it is a link, and (``below``) the links under it (:data:`LINK_DEPTH`
    levels, not into the bulk of a git directory), while ``budget[0]`` entries last."""
    mode = _mode(place)
    if mode is None:
        return []
    if stat.S_ISLNK(mode):
        return [place]
    found: list[Path] = []
    pending = [(str(place), 0)] if below and stat.S_ISDIR(mode) else []
    while pending and budget[0] > 0:
        directory, level = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue
        budget[0] -= len(entries)
        for entry in entries:
            if entry.is_symlink():
                found.append(Path(entry.path))
            elif (
                level + 1 < LINK_DEPTH
                and entry.name not in _NOT_LOOKED_INTO
                and entry.is_dir(follow_symlinks=False)
            ):
                pending.append((entry.path, level + 1))
    return found


_NOT_LOOKED_INTO = frozenset(("objects", "refs", "logs", "lfs"))
"""A git directory's bulk: links there lead nowhere git runs code from."""


def _shown_key(reason: str, root: Path) -> str:
    """``core.hooksPath in /w/.git/config`` -> ``core.hooksPath in .git/config``."""
    key, _, file = reason.partition(" in ")
    if file and under(file, root):
        file = os.path.relpath(file, root)
    return f"{key} in {file}" if file else key


def _global_git_configs(home: Path) -> list[Path]:
    """Git's configuration files for this user (``git config --global`` writes the first)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return [home / ".gitconfig", Path(xdg) / "git" / "config"]


def _nested_gitdirs(gitdir: Path) -> list[Path]:
    """Linked worktrees' git directories (``worktrees/*``) and submodules' (``modules/**``)."""
    found: list[Path] = []
    pending = [gitdir / "worktrees", gitdir / "modules"]
    while pending:
        try:
            entries = [e for e in os.scandir(pending.pop()) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if os.path.lexists(path / "HEAD"):
                found.append(path)  # its own modules/ are its business: gitdir() recurses
            else:
                pending.append(path)  # a submodule named with a slash: modules/a/b
    return found


def _read_path(file: Path, base: Path, *, prefix: str = "") -> Path | None:
    """The path ``file`` holds on its first line (after ``prefix``), resolved against ``base``;
    None when it cannot be read or holds none."""
    try:
        with open(file, "rb") as opened:
            line = opened.read(4096).decode("utf-8", "replace").split("\n", 1)[0].strip()
    except OSError:
        return None
    if not line.startswith(prefix):
        return None
    target = line.removeprefix(prefix).strip()
    return Path(os.path.realpath(base / target)) if target else None


def _mode(path: Path) -> int | None:
    try:
        return path.lstat().st_mode
    except OSError:
        return None


@dataclass
class Protection:
    """What ``write`` and ``edit`` may change inside one working directory only with a person's
    yes each time (SPEC 10.1, 10.2): the :func:`inventory` the sandbox keeps, and the names."""

    root: Path
    """The working directory, resolved."""
    installation: tuple[Path, ...] = ()
    """dsh's installation, resolved (:func:`installation_paths`)."""
    scan: Scan | None = field(default=None, repr=False)
    """Finds nested repositories and protected names; None: only the top is looked at."""
    home: Path | None = None
    """The user's home directory: where ``~/`` in git's configuration leads."""
    started: tuple[Kept, ...] = ()
    """What dsh's MCP servers run from (:func:`dsh_core.extensions.mcp.launch.server_files`)."""

    def inventory(self) -> Inventory:
        """What is kept now (the scan brought up to date first)."""
        return inventory(
            self.root,
            installation=self.installation,
            found=self.scan.found() if self.scan is not None else None,
            home=self.home,
            started=self.started,
        )

    def reason(self, real: str) -> str | None:
        """Why a ``write``/``edit`` of ``real`` (absolute, resolved) needs a person each time;
        None when it does not (outside the working directory is judged elsewhere)."""
        root = str(self.root)
        if real == root or not under(real, root):
            return None
        named = protected_reason(PurePath(os.path.relpath(real, root)))
        if named is not None:
            return named
        kept = self.inventory()
        for item in kept.kept:
            if under(real, item.path):
                return item.reason
        for gitdir in kept.git_directories:
            if under(real, gitdir):
                return f"the git directory {os.path.relpath(gitdir, root)}"
        directory = os.path.dirname(real)
        while under(directory, root):
            if looks_like_git_directory(directory, adding=real):
                return f"the git directory {os.path.relpath(directory, root)}"
            directory = os.path.dirname(directory)
        return None
