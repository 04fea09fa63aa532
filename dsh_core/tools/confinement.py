"""What a sandboxed command may not change or read inside its writable root: the policy as paths.

    installation = installation_paths()            # once: where dsh runs from
    scan = RepositoryScan(root)                    # nested repositories: looked for once
    plan = confine(root, installation=installation, found=scan.found(), home=home, dsh_home=d)
    plan.read_only, plan.pinned, plan.placeholders, plan.tripwires, plan.hidden_dirs, ...

:mod:`.sandbox` turns a :class:`Confinement` into bubblewrap's mounts; :mod:`.trust` says which
names are protected and where credentials live. Here those become paths on this disk, looked at
again before every command (``lstat`` only: the costly walk is :class:`RepositoryScan`'s, once).

Inside the working directory, read-only (SPEC 10.1, 10.2):

- dsh's installation: its interpreter, ``sys.prefix`` and the other prefixes, every directory on
  ``sys.path``, its scripts directory, its own packages' directories (an editable install), when
  they lie inside the working directory (the README's ``.venv`` layout): a ``.pth`` or module
  planted there would run at dsh's next start, outside the sandbox, with the key;
- in every repository's git directory (the working directory's, nested ones found by the scan,
  submodules' under ``.git/modules``, linked worktrees' under ``.git/worktrees``): ``config``,
  ``hooks/``, ``commondir`` (it moves where git reads ``config`` and ``hooks`` from) and
  ``config.worktree``; a ``.git`` *file* (the ``gitdir:`` pointer of a worktree or submodule)
  itself, and the git directory it points to when that is inside; a git directory with no
  ``HEAD`` (not a repository yet) or with one of those entries a symlink, whole;
- ``.dsh/`` and ``.agents/`` where they exist, nested ones included.

A read-only bind mount does not stop a ``rename()`` of a directory above it: ``mv .git x;
mkdir .git`` would put a fresh ``.git`` where git looks. So every directory between the working
directory and a read-only path is *pinned*: bound onto itself, writable, but a mount point, which
cannot be renamed or removed.

Missing protected paths: ``.git``, ``.dsh`` and ``.agents`` at the working directory's top, and
``hooks/`` in a git directory, are *placeholders*: an empty read-only directory while the
command runs (created on the disk as the mount point, removed afterwards if still empty), so
``git init`` or ``mkdir .agents`` fails. A missing ``config``, ``commondir`` or
``config.worktree`` cannot be a placeholder (git reads any file there, and fails on an empty
one or a directory): it is a *tripwire*, removed after the command if the command created it.

Credentials (SPEC 10.4): the locations of :func:`.trust.credential_paths` and ``DSH_HOME``,
where they exist, are empty: a directory as an empty tmpfs, a file as ``/dev/null``.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .trust import GIT_PROTECTED_NAMES, PROTECTED_DIR_NAMES, credential_paths

__all__ = [
    "SCAN_BUDGET",
    "Confinement",
    "Found",
    "RepositoryScan",
    "confine",
    "inside",
    "installation_paths",
    "on_path",
]

SCAN_BUDGET = 50_000
"""Directory entries the scan for nested repositories looks at, at most (a home directory can
hold millions): past it, the scan stops and says so (:attr:`Found.complete`)."""

_TMP = Path("/tmp")
"""Private to the sandbox: an empty tmpfs, the host's own out of sight."""

_TRIPWIRE_NAMES = ("config", "commondir", "config.worktree")
"""Protected git entries that cannot be placeholders: git reads whatever is there."""


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is strictly inside ``root`` (both resolved)."""
    return path != root and _under(path, root)


def _under(path: Path, other: Path) -> bool:
    """``path.is_relative_to(other)``, on the strings: it runs for every command, many times."""
    text, prefix = str(path), str(other)
    return text == prefix or text.startswith(prefix if prefix.endswith("/") else prefix + "/")


@functools.cache
def installation_paths() -> tuple[Path, ...]:
    """Where this dsh runs from, resolved: interpreter, prefixes, ``sys.path``, scripts, packages.

    Computed once, from this process as it is at the first ask (the first command): nothing
    here changes while dsh runs. ``python -m dsh_stdio`` has dropped the working directory from
    ``sys.path`` before this is asked.
    """
    import dsh_core

    candidates = [
        sys.executable,
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        *(entry for entry in sys.path if entry),
        *dsh_core.__path__,
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
    return tuple(found)


def on_path(
    name: str, path: str, *, root: Path | None = None, read_only: Sequence[Path] = ()
) -> tuple[str | None, list[str]]:
    """The program ``name`` from a ``PATH`` directory a sandbox cannot write (SPEC 10.1).

    Returns the program (None if none) and the ones passed over: found in a relative entry
    (the working directory, whatever it is) or under ``root`` outside ``read_only``, where a
    sandboxed command could have put it for dsh to run outside the sandbox next time.
    """
    passed_over: list[str] = []
    for entry in path.split(os.pathsep):
        candidate = os.path.join(entry or ".", name)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        directory = Path(os.path.realpath(entry or "."))
        writable = root is not None and _under(directory, root)
        if not os.path.isabs(entry) or (writable and not _under_any(directory, read_only)):
            passed_over.append(candidate)
            continue
        return candidate, passed_over
    return None, passed_over


@dataclass(frozen=True, slots=True)
class Found:
    """What :class:`RepositoryScan` found below the working directory."""

    repositories: tuple[Path, ...] = ()
    """Directories holding a ``.git`` (a directory or a file), the working directory excluded."""
    protected: tuple[Path, ...] = ()
    """``.dsh`` and ``.agents`` below the top of the working directory."""
    complete: bool = True
    """False when the scan stopped at :data:`SCAN_BUDGET` entries."""


class RepositoryScan:
    """Nested repositories and protected directories under ``root``, found at the first ask.

    One walk per session (a sandbox): it does not follow symlinks and does not descend into
    git directories, protected directories or ``skip`` (dsh's installation, read-only anyway).
    A repository made after the walk is the model's own (see the note on what remains).
    """

    def __init__(self, root: Path, *, skip: Sequence[Path] = (), budget: int = SCAN_BUDGET):
        self.root = root
        self._skip = frozenset(skip)
        self._budget = budget
        self._found: Found | None = None

    def found(self) -> Found:
        if self._found is None:
            self._found = self._walk()
        return self._found

    def _walk(self) -> Found:
        if self.root == Path("/"):
            # The whole file system, /proc and all: the note already says it is all writable.
            return Found(complete=False)
        repositories: list[Path] = []
        protected: list[Path] = []
        pending = [self.root]
        left = self._budget
        while pending:
            directory = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue  # unreadable, or gone meanwhile: nothing in it to protect
            left -= len(entries)
            if left < 0:
                return Found(tuple(repositories), tuple(protected), complete=False)
            for entry in entries:
                path = Path(entry.path)
                if entry.name == ".git":
                    if directory != self.root:
                        repositories.append(Path(directory))
                    continue
                if entry.name in PROTECTED_DIR_NAMES:
                    if directory != self.root:
                        protected.append(path)
                    continue
                if entry.is_dir(follow_symlinks=False) and path not in self._skip:
                    pending.append(path)
        return Found(tuple(sorted(repositories)), tuple(sorted(protected)))


@dataclass(frozen=True, slots=True)
class Confinement:
    """Paths under a sandbox's writable root that it keeps, and what it hides; all resolved."""

    root: Path
    read_only: tuple[Path, ...] = ()
    """Existing paths bound read-only, shallowest first; none inside another."""
    pinned: tuple[Path, ...] = ()
    """Directories bound onto themselves (they cannot be renamed or removed), shallowest first."""
    placeholders: tuple[Path, ...] = ()
    """Missing directories that get an empty read-only one while a command runs."""
    tripwires: tuple[Path, ...] = ()
    """Missing files git would read: removed after a command that created them."""
    hidden_dirs: tuple[Path, ...] = ()
    """Credential directories: an empty tmpfs instead."""
    hidden_files: tuple[Path, ...] = ()
    """Credential files: ``/dev/null`` instead."""


def confine(
    root: Path,
    *,
    installation: Iterable[Path] = (),
    found: Found | None = None,
    home: Path | None = None,
    dsh_home: Path | None = None,
) -> Confinement:
    """What the sandbox keeps under ``root`` now (see the module docstring); ``lstat`` only."""
    keep = _Keep(root)
    for path in installation:  # resolved already (installation_paths): only looked at
        if inside(path, root) and os.path.lexists(path):
            keep.kept.append(path)
    repositories = [root, *(found.repositories if found else ())]
    for repository in repositories:
        keep.repository(repository, top=repository == root)
    for name in PROTECTED_DIR_NAMES:
        keep.read_only(root / name, placeholder=True)
    for path in found.protected if found else ():
        keep.read_only(path)
    hidden_dirs, hidden_files = _hidden(root, home, dsh_home)
    # A mount under the private /tmp would bring the host's /tmp back (a working directory of
    # /, say, whose dsh lives in /tmp/venv): what is out of sight there needs no keeping.
    read_only = _outermost(p for p in keep.kept if not _out_of_sight(p, root))
    placeholders = [p for p in keep.placeholders if not _out_of_sight(p, root)]
    tripwires = [p for p in keep.tripwires if not _out_of_sight(p, root)]
    pinned = sorted(
        {
            ancestor
            for path in [*read_only, *placeholders, *tripwires]
            for ancestor in path.parents
            if inside(ancestor, root) and not _under_any(ancestor, read_only)
        },
        key=_depth,
    )
    return Confinement(
        root,
        read_only=read_only,
        pinned=tuple(pinned),
        placeholders=tuple(placeholders),
        tripwires=tuple(tripwires),
        hidden_dirs=hidden_dirs,
        hidden_files=hidden_files,
    )


class _Keep:
    """Collects what :func:`confine` keeps, looking at each path once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kept: list[Path] = []
        self.placeholders: list[Path] = []
        self.tripwires: list[Path] = []
        self._gitdirs: set[Path] = set()

    def read_only(self, path: Path, *, placeholder: bool = False) -> None:
        """Keep ``path`` read-only when it is inside; a missing one gets a placeholder if asked."""
        resolved = Path(os.path.realpath(path))
        if not inside(resolved, self.root):
            return  # outside: read-only already (or the root itself: never made read-only)
        if os.path.lexists(resolved):
            self.kept.append(resolved)
        elif placeholder and self.root != Path("/"):
            # (A dangling symlink gets its target made: that is where a write would go.)
            self.placeholder(resolved)

    def placeholder(self, path: Path) -> None:
        """A placeholder for ``path`` where one can be made: where we cannot write, neither can
        a command, and bwrap could not make the mount point."""
        if os.access(path.parent, os.W_OK):
            self.placeholders.append(path)

    def repository(self, directory: Path, *, top: bool) -> None:
        """A repository's ``.git``: a directory, a ``gitdir:`` file, or (at the top) missing."""
        dot_git = directory / ".git"
        mode = _mode(dot_git)
        if mode is None:
            if top:
                self.read_only(dot_git, placeholder=True)
            return
        if stat.S_ISREG(mode):
            self.read_only(dot_git)  # the pointer: rewritten, it would lead git elsewhere
            gitdir = _read_path(dot_git, directory, prefix="gitdir:")
            if gitdir is not None:
                self.gitdir(gitdir)
            return
        self.gitdir(Path(os.path.realpath(dot_git)))  # a directory, or a symlink to one

    def gitdir(self, gitdir: Path) -> None:
        """A git directory: its protected entries, then its submodules' and worktrees'."""
        if not inside(gitdir, self.root) or gitdir in self._gitdirs:
            return
        self._gitdirs.add(gitdir)
        entries = {name: _mode(gitdir / name) for name in GIT_PROTECTED_NAMES}
        if _mode(gitdir / "HEAD") is None or any(
            mode is not None and stat.S_ISLNK(mode) for mode in entries.values()
        ):
            self.read_only(gitdir)  # not a repository (yet), or an entry that leads elsewhere
            return
        linked = entries["commondir"] is not None  # a linked worktree's, or a redirected one
        for name, mode in entries.items():
            path = gitdir / name
            if mode is not None:
                self.kept.append(path)
            elif linked and name in ("config", "hooks"):
                continue  # git takes these from the common directory, protected on its own
            elif name in _TRIPWIRE_NAMES:
                self.tripwires.append(path)
            else:
                self.placeholder(path)
        if linked:
            common = _read_path(gitdir / "commondir", gitdir)
            if common is not None:
                self.gitdir(common)  # a bare repository's, say, which no .git leads to
        for nested in _nested_gitdirs(gitdir):
            self.gitdir(nested)


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


def _hidden(
    root: Path, home: Path | None, dsh_home: Path | None
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The credential locations that exist: (directories, files), resolved.

    One that is the working directory or holds it stays visible (hiding it would hide the work);
    one under ``/tmp`` outside the working directory is hidden already by the private ``/tmp``.
    """
    directories: list[Path] = []
    files: list[Path] = []
    paths = credential_paths(home, dsh_home) if home is not None else ()
    if home is None and dsh_home is not None:
        paths = (dsh_home,)
    for candidate in paths:
        path = Path(os.path.realpath(candidate))
        mode = _mode(path)
        if mode is None or _under(root, path):
            continue
        if _out_of_sight(path, root):
            continue
        target = directories if stat.S_ISDIR(mode) else files
        if path not in target:
            target.append(path)
    return tuple(directories), tuple(files)


def _outermost(paths: Iterable[Path]) -> tuple[Path, ...]:
    """``paths`` without duplicates and without any inside another, shallowest first."""
    kept: list[Path] = []
    for path in sorted(set(paths), key=_depth):
        if not _under_any(path, kept):
            kept.append(path)
    return tuple(kept)


def _out_of_sight(path: Path, root: Path) -> bool:
    """Whether ``path`` is under the sandbox's private ``/tmp``, which shows none of the host's:
    under ``/tmp`` and not inside a working directory that is bound over it."""
    return _under(path, _TMP) and (root == Path("/") or not _under(path, root))


def _under_any(path: Path, others: Sequence[Path]) -> bool:
    return any(_under(path, other) for other in others)


def _depth(path: Path) -> tuple[int, str]:
    return len(path.parts), str(path)


def _mode(path: Path) -> int | None:
    try:
        return path.lstat().st_mode
    except OSError:
        return None
