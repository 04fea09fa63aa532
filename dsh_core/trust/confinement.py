"""What a sandboxed command may not change or read inside its writable root: the policy as mounts.

    scan = RepositoryScan(root, skip=installation)      # repositories below: kept up to date
    plan = confine(root, installation=installation, found=scan.found(), home=home, dsh_home=d)
    plan.read_only, plan.pinned, plan.tripwires, plan.hidden_dirs, plan.sealed, ...
    ... the command runs ...
    done = undo(plan, inventory(root, ...), scan.found())   # after it: what it must not have made
    done.notes, done.escaped                                # lines for the result; what stayed

:mod:`.policy` says what is kept inside the working directory and why (its
:func:`.policy.inventory`: dsh's installation, git's configuration and hooks and what they name,
``.dsh/``, ``.agents/``, ``AGENTS.md``, and where links in those lead) and where credentials
live; :mod:`.sandbox` turns a :class:`Confinement` into bubblewrap's mounts. Here the inventory
becomes mounts, looked at again before every command (``lstat`` and git's small configuration
files only):

- an existing kept path is bound read-only (a link: where it leads, when inside; bwrap cannot
  mount onto a link);
- a missing one gets nothing while the command runs: a mount needs a mount point, and one made
  in the person's tree would stand there for their other tools to see, and stay after a kill
  of dsh (SPEC 10.12; issue 31, class 11). It is a *tripwire*: what a command made there is set
  aside after it (renamed, nothing deleted). What dsh itself would run at its next start (its
  user site-packages, an MCP server's program) is kept by its nearest existing parent inside
  the working directory instead, where there is one: nothing may stand there even for the
  span of the command;
- every directory between the working directory and a kept or hidden path is *pinned*: bound
  onto itself, writable, but a mount point, which cannot be renamed or removed. A read-only
  mount does not stop a ``rename()`` of a directory above it: ``mv .git x; mkdir .git`` would
  put a fresh ``.git`` where git looks, and ``mv .config .cfg`` would move ``gcloud`` out from
  under the name the next command hides.

Credentials (SPEC 10.4): the locations of :func:`.credentials.credential_paths` and ``DSH_HOME``,
where they exist (resolved now, and as they resolved when the session began: a symlink swapped
since must not uncover the place it led to), are empty: a directory as an empty tmpfs, a file as
an empty file; so are the shell start-up and ``.env`` files that hold the key
(:func:`.credentials.key_files`). A working directory that is ``DSH_HOME`` or lies inside it is
*sealed* (SPEC 10.14): ``DSH_HOME`` is an empty read-only directory to the command, the working
directory an empty one within it.

After a command (:func:`undo`): tripwires are looked at, and a git directory the command made
(``git init`` with ``core.fsmonitor``, a submodule's in ``.git/modules``, a bare one, a new
``.git`` at the top) is looked at: a configuration that makes git run something, or an active
hook, is set aside, since git would run it outside the sandbox. So is a ``.dsh``, ``.agents`` or
``AGENTS.md`` it made, since a session started there would take its instructions or skills from
it. A command can make its own files hard to move (``chmod 555`` on their directory): the
set-aside walks down from the working directory without following links, giving each directory
on the way the owner's search and write permission for the rename (and its own mode back
after). What still cannot be set aside is *escaped*: the run must stop (``SANDBOX_ESCAPE``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..chain import error_chain
from . import AGENTS_FILE
from .credentials import Credentials, credential_paths, key_files
from .policy import (
    GIT_PROTECTED_NAMES,
    PROTECTED_DIR_NAMES,
    Found,
    Inventory,
    Kept,
    inside,
    inventory,
    under,
)
from .searchpath import search_path

__all__ = ["SET_ASIDE", "Confinement", "Undone", "confine", "on_path", "set_aside", "undo"]

_TMP = Path("/tmp")
"""Private to the sandbox: an empty tmpfs, the host's own out of sight."""

SET_ASIDE = ".disabled-by-dsh"
"""What a configuration or hooks directory a command made is renamed with (see :func:`undo`)."""

ASIDE_NAMES = 100
"""Names tried for one set-aside (``x.disabled-by-dsh``, then ``.2`` ...): a command that took
them all has made its plant impossible to set aside, and the run stops."""

_STEERING = frozenset((*PROTECTED_DIR_NAMES, AGENTS_FILE))
"""What steers a session started in its directory (its instructions, its skills)."""


def on_path(
    name: str, path: str, *, root: Path | None = None, read_only: Sequence[Path] = ()
) -> tuple[str | None, list[str]]:
    """The program ``name`` from a ``PATH`` directory a sandbox cannot write (SPEC 10.1).

    Returns the program (None if none) and the ones passed over: found in a directory a
    command could have written (:func:`.searchpath.search_path`: a relative entry, or one
    under ``root``) outside ``read_only``, for dsh to run outside the sandbox next time.
    """
    passed_over: list[str] = []
    for directory in search_path(path, root):
        program = directory.program(name)
        if program is None:
            continue
        kept = os.path.isabs(directory.entry) and _under_any(Path(directory.resolved), read_only)
        if directory.writable and not kept:
            passed_over.append(program)
            continue
        return program, passed_over
    return None, passed_over


@dataclass(frozen=True, slots=True)
class Confinement:
    """Paths under a sandbox's writable root that it keeps, and what it hides; all resolved."""

    root: Path
    read_only: tuple[Path, ...] = ()
    """Existing paths bound read-only, shallowest first; none inside another."""
    pinned: tuple[Path, ...] = ()
    """Directories bound onto themselves (they cannot be renamed or removed), shallowest first."""
    tripwires: tuple[Path, ...] = ()
    """Missing kept paths: what a command makes there is set aside after it (see :func:`undo`)."""
    hidden_dirs: tuple[Path, ...] = ()
    """Credential directories: an empty tmpfs instead."""
    hidden_files: tuple[Path, ...] = ()
    """Credential files, and files that hold the key: an empty read-only file instead."""
    sealed: Path | None = None
    """``DSH_HOME`` when the working directory is it or lies inside it: an empty read-only
    directory to the command, the working directory an empty one in it (SPEC 10.14)."""
    git_directories: tuple[Path, ...] = ()
    """The git directories whose configuration and hooks were kept (see :func:`undo`)."""
    steering: tuple[Path, ...] = ()
    """The ``.dsh``, ``.agents`` and ``AGENTS.md`` below the top, as the scan names them (not
    resolved): those that were there before the command (see :func:`undo`)."""
    reasons: dict[Path, Kept] = field(default_factory=dict, compare=False, repr=False)
    """Why each tripwire is kept, for the notes of :func:`undo`."""


@dataclass
class Undone:
    """What :func:`undo` did after a command."""

    notes: list[str] = field(default_factory=list)
    """A line for the result per thing done, or not done."""
    escaped: list[str] = field(default_factory=list)
    """What the command made that could not be set aside (relative to the working directory):
    it would run or steer something outside the sandbox, so the run must stop."""


def confine(
    root: Path,
    *,
    installation: Iterable[Path] = (),
    found: Found | None = None,
    home: Path | None = None,
    dsh_home: Path | None = None,
    credentials: Credentials | None = None,
    started: Iterable[Kept] = (),
) -> Confinement:
    """What the sandbox keeps under ``root`` now (see the module docstring).

    ``installation`` is dsh's, resolved; ``found`` what a :class:`.RepositoryScan` found below
    the top; ``credentials`` the locations as they resolved when the session began.
    """
    kept = inventory(root, installation=installation, found=found, home=home, started=started)
    read_only: list[Path] = []
    tripwires: list[Path] = []
    reasons: dict[Path, Kept] = {}
    for item in kept.kept:
        path = item.path
        if os.path.islink(path):
            # bwrap follows a link it mounts onto, and fails at a dangling one: what it leads to
            # is kept instead, where inside (the file tools still refuse the link itself).
            path = Path(os.path.realpath(path))
            if not inside(path, root):
                continue
        if _out_of_sight(path, root):
            # A mount under the private /tmp would bring the host's /tmp back (a working
            # directory of /, say, whose dsh lives in /tmp/venv): it needs no keeping.
            continue
        if os.path.lexists(path):
            read_only.append(path)
            continue
        if item.missing is None:
            continue
        parent = _existing_parent(path, root) if item.runner == "dsh" else None
        if parent is not None:
            read_only.append(parent)  # dsh would run it at its next start, before any look
            continue
        reasons[path] = item
        tripwires.append(path)
    sealed = _sealed(root, dsh_home)
    hidden_dirs, hidden_files = _hidden(root, home, None if sealed else dsh_home, credentials)
    read_only_paths = _outermost(read_only)
    hidden = [*hidden_dirs, *hidden_files]
    pinned = _pins(root, [*read_only_paths, *tripwires, *hidden])
    return Confinement(
        root,
        read_only=read_only_paths,
        pinned=tuple(pinned),
        tripwires=tuple(dict.fromkeys(tripwires)),
        hidden_dirs=hidden_dirs,
        hidden_files=hidden_files,
        sealed=sealed,
        git_directories=kept.git_directories,
        steering=found.protected if found is not None else (),
        reasons=reasons,
    )


def _existing_parent(path: Path, root: Path) -> Path | None:
    """The nearest directory above ``path`` that exists and lies strictly inside ``root``."""
    directory = path.parent
    while inside(directory, root):
        if os.path.isdir(directory) and not os.path.islink(directory):
            return directory
        directory = directory.parent
    return None


def _sealed(root: Path, dsh_home: Path | None) -> Path | None:
    """``dsh_home`` (resolved) when ``root`` is it or lies inside it."""
    if dsh_home is None:
        return None
    home = Path(os.path.realpath(dsh_home))
    return home if under(root, home) else None


def _pins(root: Path, kept: Iterable[Path]) -> list[Path]:
    """The directories between ``root`` and each kept path (not in another kept path, which is
    a mount already), that exist: shallowest first."""
    top = str(root)
    mounted = [str(path) for path in kept]
    above: set[str] = set()
    for path in mounted:
        directory = os.path.dirname(path)
        while directory not in above and directory != top and under(directory, top):
            above.add(directory)
            directory = os.path.dirname(directory)
    found = [
        Path(directory)
        for directory in above
        if not any(under(directory, path) for path in mounted) and os.path.isdir(directory)
    ]
    return sorted(found, key=_depth)


def undo(plan: Confinement, after: Inventory, found: Found | None = None) -> Undone:
    """After a command: set aside what it made at a tripwire, what makes git run code in a git
    directory it made (``after`` lists them now), and a ``.dsh``, ``.agents`` or ``AGENTS.md``
    it made below the top (``found``: the scan now).

    Runs once the sandbox is gone (its PID namespace dies with its first process), so nothing
    can race it from inside. What could not be set aside is in :attr:`Undone.escaped`.
    """
    done = Undone()
    root = plan.root
    for path in plan.tripwires:
        if os.path.lexists(path):
            _note(done, root, path, _tripwire_why(plan, path))
    known = set(plan.git_directories)
    for gitdir in after.git_directories:
        if gitdir not in known and not _out_of_sight(gitdir, root) and os.path.isdir(gitdir):
            _set_aside_code(done, root, gitdir)
    before = set(plan.steering)
    for path in found.protected if found is not None else ():
        if path not in before and not _out_of_sight(path, root) and os.path.lexists(path):
            _note(done, root, path, _STEERING_WHY)
    return done


_STEERING_WHY = (
    "the command made it, and a session started there would take its instructions or skills from it"
)


def _tripwire_why(plan: Confinement, path: Path) -> str:
    """Why what a command made at the tripwire ``path`` may not stay, for the note."""
    kept = plan.reasons.get(path)
    if path.name in _STEERING and path.parent == plan.root:
        return _STEERING_WHY
    if path.name in GIT_PROTECTED_NAMES or kept is None:
        why = "git would take its configuration and hooks from it"
    elif kept.runner == "dsh":
        why = f"dsh would run what is there ({kept.reason})"
    else:
        why = f"git would run or read what is there ({kept.reason})"
    return f"the command created it, and {why}, outside the sandbox"


def _note(done: Undone, root: Path, path: Path, why: str) -> None:
    """Set ``path`` aside, and say so (or that it could not be: then it escaped)."""
    shown = path.relative_to(root)
    try:
        aside = set_aside(root, path)
    except OSError as exc:
        done.escaped.append(str(shown))
        done.notes.append(f"[sandbox: could not set aside {shown} ({error_chain(exc)}): {why}]")
        return
    done.notes.append(f"[sandbox: set aside {shown} as {aside}: {why}]")


def _set_aside_code(done: Undone, root: Path, gitdir: Path) -> None:
    """A git directory a command made: its configuration files that make git run something,
    and its hooks directory if it holds a hook, set aside."""
    from .gitconfig import read_config

    where = gitdir.relative_to(root)
    for name in ("config", "config.worktree"):
        keys = read_config(gitdir / name).runs_code()
        if keys:
            said = ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")
            _note(done, root, gitdir / name, _made_git(where, f"it sets {said}"))
    try:
        hooks = [e.name for e in os.scandir(gitdir / "hooks") if not e.name.endswith(".sample")]
    except OSError:
        hooks = []
    if hooks:
        held = f"it holds hooks ({', '.join(sorted(hooks)[:5])})"
        _note(done, root, gitdir / "hooks", _made_git(where, held))


def _made_git(where: Path, what: str) -> str:
    return (
        f"the command made the git directory {where}, and {what}, which git would run outside "
        "the sandbox"
    )


def set_aside(root: Path, path: Path) -> str:
    """Rename ``path`` (inside ``root``) with :data:`SET_ASIDE`, a number after it if that is
    taken; the new name. OSError when it cannot be done.

    Reached from ``root`` one directory at a time, never through a link (a command may have
    swapped one in), each directory on the way given the owner's search permission and the
    last one write permission too, for as long as it takes (a command can ``chmod 555`` its
    own directories; root needs none of this).
    """
    parts = path.relative_to(root).parts
    with _beneath(root, parts[:-1]) as fd:
        aside = _free_name(fd, parts[-1])
        os.rename(parts[-1], aside, src_dir_fd=fd, dst_dir_fd=fd)
    return aside


@contextlib.contextmanager
def _beneath(root: Path, parts: Sequence[str]) -> Iterator[int]:
    """A descriptor (``O_PATH``) on ``root/parts...``, reached without following a link, with
    search permission on the way and write permission on it; the modes are put back after."""
    opened: list[int] = []
    changed: list[tuple[int, int]] = []
    try:
        opened.append(os.open(root, _PATH_ONLY))
        for part in parts:
            _grant(opened[-1], stat.S_IXUSR, changed)
            try:
                opened.append(os.open(part, _PATH_ONLY | os.O_NOFOLLOW, dir_fd=opened[-1]))
            except NotADirectoryError:
                if stat.S_ISLNK(os.lstat(part, dir_fd=opened[-1]).st_mode):
                    raise OSError(
                        errno.ELOOP, f"{part} is a symbolic link now, which dsh does not follow"
                    ) from None
                raise
        _grant(opened[-1], stat.S_IWUSR | stat.S_IXUSR, changed)
        yield opened[-1]
    finally:
        for fd, mode in reversed(changed):
            with contextlib.suppress(OSError):
                os.chmod(f"/proc/self/fd/{fd}", mode)
        for fd in opened:
            os.close(fd)


_PATH_ONLY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def _grant(fd: int, bits: int, changed: list[tuple[int, int]]) -> None:
    """Give the directory ``fd`` the owner's ``bits`` if it lacks them (and we own it and are
    not root, whom permission bits do not stop); remember its mode in ``changed``."""
    if os.geteuid() == 0:
        return
    status = os.fstat(fd)
    mode = stat.S_IMODE(status.st_mode)
    if mode & bits == bits or status.st_uid != os.geteuid():
        return
    os.chmod(f"/proc/self/fd/{fd}", mode | bits)  # fchmod refuses an O_PATH descriptor
    changed.append((fd, mode))


def _free_name(fd: int, name: str) -> str:
    """``name`` + :data:`SET_ASIDE` (shortened to fit a file name), or with a number after it,
    that is not taken in the directory ``fd``; FileExistsError after :data:`ASIDE_NAMES`."""
    base = name
    while len(os.fsencode(base + SET_ASIDE + f".{ASIDE_NAMES}")) > _NAME_MAX:
        base = base[:-1]
    for number in range(1, ASIDE_NAMES + 1):
        aside = base + SET_ASIDE + (f".{number}" if number > 1 else "")
        try:
            os.lstat(aside, dir_fd=fd)
        except FileNotFoundError:
            return aside
    raise FileExistsError(
        errno.EEXIST, f"{base}{SET_ASIDE} and {ASIDE_NAMES - 1} numbered names after it are taken"
    )


_NAME_MAX = 255
"""Bytes in one file name on Linux's file systems."""


def _hidden(
    root: Path, home: Path | None, dsh_home: Path | None, credentials: Credentials | None
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The credential locations and key files that exist: (directories, files), resolved.

    One that is the working directory or holds it stays visible (hiding it would hide the work);
    one under ``/tmp`` outside the working directory is hidden already by the private ``/tmp``.
    Only those that exist are resolved (most do not).
    """
    paths: list[str] = []
    if home is not None:
        paths += map(str, credential_paths(home, dsh_home))
    elif dsh_home is not None:
        paths.append(str(dsh_home))
    if credentials is not None:  # as they resolved at the session's start
        paths += [location for location, _ in credentials.locations]
    directories: list[Path] = []
    files: list[Path] = []
    for candidate in [*dict.fromkeys(paths), *map(str, key_files(home, root))]:
        try:
            os.lstat(candidate)  # most do not exist: nothing to resolve
            candidate = os.path.realpath(candidate)
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        path = Path(candidate)
        if under(root, path) or _out_of_sight(path, root):
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
    return under(path, _TMP) and (root == Path("/") or not under(path, root))


def _under_any(path: Path, others: Sequence[Path]) -> bool:
    return any(under(path, other) for other in others)


def _depth(path: Path) -> tuple[int, str]:
    return len(path.parts), str(path)
