"""What a sandboxed command may not change or read inside its writable root: the policy as mounts.

    scan = RepositoryScan(root, skip=installation)      # repositories below: kept up to date
    plan = confine(root, installation=installation, found=scan.found(), home=home, dsh_home=d)
    plan.read_only, plan.pinned, plan.placeholders, plan.tripwires, plan.hidden_dirs, ...
    ... the command runs ...
    notes = undo(plan, inventory(root, ...))            # after it: what it must not have made

:mod:`.policy` says what is kept inside the working directory and why (its
:func:`.policy.inventory`: dsh's installation, git's configuration and hooks and what they name,
``.dsh/``, ``.agents/``, ``AGENTS.md``) and where credentials live; :mod:`.sandbox` turns a
:class:`Confinement` into bubblewrap's mounts. Here the inventory becomes mounts, looked at again
before every command (``lstat`` and git's small configuration files only):

- an existing kept path is bound read-only (a link: where it leads, when inside; bwrap cannot
  mount onto a link);
- a missing one is, as the inventory asks, a *placeholder* (an empty read-only directory, or an
  empty file, while the command runs: created on the disk as the mount point, removed
  afterwards if still empty), so ``git init`` or ``mkdir .agents`` fails; or a *tripwire*
  (``config``, ``commondir``: git reads whatever is there, and fails on an empty one or a
  directory), removed after the command if the command made it;
- every directory between the working directory and a kept or hidden path is *pinned*: bound
  onto itself, writable, but a mount point, which cannot be renamed or removed. A read-only
  mount does not stop a ``rename()`` of a directory above it: ``mv .git x; mkdir .git`` would
  put a fresh ``.git`` where git looks, and ``mv .config .cfg`` would move ``gcloud`` out from
  under the name the next command hides.

Credentials (SPEC 10.4): the locations of :func:`.credentials.credential_paths` and ``DSH_HOME``,
where they exist (resolved now, and as they resolved when the session began: a symlink swapped
since must not uncover the place it led to), are empty: a directory as an empty tmpfs, a file as
an empty file; so are the shell start-up and ``.env`` files that hold the key
(:func:`.credentials.key_files`).

After a command (:func:`undo`): placeholders go, tripwires are undone, and a git directory the
command made (``git init x`` with ``core.fsmonitor``, a submodule's in ``.git/modules``, a bare
one) is looked at: a configuration that makes git run something, or an active hook, is set
aside (renamed, nothing deleted), since git would run it outside the sandbox. So is a
``.dsh``, ``.agents`` or ``AGENTS.md`` it made below the top (the top's own cannot be made: they
are placeholders), since a session started there would take its instructions or skills from it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..chain import error_chain
from .credentials import Credentials, credential_paths, key_files
from .policy import GIT_PROTECTED_NAMES, Found, Inventory, Kept, inside, inventory, under
from .searchpath import search_path

__all__ = ["Confinement", "confine", "on_path", "undo"]

_TMP = Path("/tmp")
"""Private to the sandbox: an empty tmpfs, the host's own out of sight."""

SET_ASIDE = ".disabled-by-dsh"
"""What a configuration or hooks directory a command made is renamed with (see :func:`undo`)."""


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
    placeholders: tuple[Path, ...] = ()
    """Missing directories that get an empty read-only one while a command runs."""
    placeholder_files: tuple[Path, ...] = ()
    """Missing files that get an empty read-only one while a command runs."""
    tripwires: tuple[Path, ...] = ()
    """Missing files git would read: removed after a command that created them."""
    hidden_dirs: tuple[Path, ...] = ()
    """Credential directories: an empty tmpfs instead."""
    hidden_files: tuple[Path, ...] = ()
    """Credential files, and files that hold the key: an empty read-only file instead."""
    git_directories: tuple[Path, ...] = ()
    """The git directories whose configuration and hooks were kept (see :func:`undo`)."""
    steering: tuple[Path, ...] = ()
    """The ``.dsh``, ``.agents`` and ``AGENTS.md`` below the top, as the scan names them (not
    resolved): those that were there before the command (see :func:`undo`)."""
    reasons: dict[Path, Kept] = field(default_factory=dict, compare=False, repr=False)
    """Why each placeholder and tripwire is kept, for the notes of :func:`undo`."""


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
    placeholders: list[Path] = []
    placeholder_files: list[Path] = []
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
        reasons[path] = item
        if item.missing != "tripwire" and root != Path("/") and _writable_parent(path):
            (placeholders if item.missing == "directory" else placeholder_files).append(path)
        else:  # where bwrap could not make a mount point, a look afterwards
            tripwires.append(path)
    hidden_dirs, hidden_files = _hidden(root, home, dsh_home, credentials)
    read_only_paths = _outermost(read_only)
    hidden = [*hidden_dirs, *hidden_files]
    pinned = _pins(root, [*read_only_paths, *placeholders, *placeholder_files, *tripwires, *hidden])
    return Confinement(
        root,
        read_only=read_only_paths,
        pinned=tuple(pinned),
        placeholders=tuple(dict.fromkeys(placeholders)),
        placeholder_files=tuple(dict.fromkeys(placeholder_files)),
        tripwires=tuple(dict.fromkeys(tripwires)),
        hidden_dirs=hidden_dirs,
        hidden_files=hidden_files,
        git_directories=kept.git_directories,
        steering=found.protected if found is not None else (),
        reasons=reasons,
    )


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


def _writable_parent(path: Path) -> bool:
    """Whether a placeholder can be made for ``path``: where we cannot write, neither can a
    command, and bwrap could not make the mount point."""
    return os.access(path.parent, os.W_OK)


def undo(plan: Confinement, after: Inventory, found: Found | None = None) -> list[str]:
    """After a command: remove the placeholders still empty, and what it made at a tripwire;
    set aside what makes git run code in a git directory it made (``after`` lists them now),
    and a ``.dsh``, ``.agents`` or ``AGENTS.md`` it made (``found``: the scan now).

    Returns a line for the result per thing done. Runs once the sandbox is gone (its PID
    namespace dies with its first process), so nothing can race it from inside.
    """
    for path in plan.placeholders:
        with contextlib.suppress(OSError):  # not empty (someone outside wrote there): kept
            path.rmdir()
    for path in plan.placeholder_files:
        with contextlib.suppress(OSError):
            if path.lstat().st_size == 0 and stat.S_ISREG(path.lstat().st_mode):
                path.unlink()
    notes = [_undo_tripwire(plan, path) for path in plan.tripwires if os.path.lexists(path)]
    known = set(plan.git_directories)
    for gitdir in after.git_directories:
        if gitdir not in known and not _out_of_sight(gitdir, plan.root):
            notes += _set_aside_code(plan.root, gitdir)
    before = set(plan.steering)
    for path in found.protected if found is not None else ():
        if path not in before and not _out_of_sight(path, plan.root):
            done = _set_aside(path, path.relative_to(plan.root))
            notes.append(
                f"[sandbox: {done}: the command made it, and a session started there would "
                "take its instructions or skills from it]"
            )
    return notes


def _undo_tripwire(plan: Confinement, path: Path) -> str:
    import shutil  # rarely needed; with bz2 and lzma it costs startup time

    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        done = "removed"
    except OSError as exc:
        done = f"could not remove ({error_chain(exc)})"
    where = path.relative_to(plan.root)
    kept = plan.reasons.get(path)
    if path.name in GIT_PROTECTED_NAMES or kept is None:
        why = "git would take its configuration and hooks from it"
    elif kept.runner == "dsh":
        why = f"dsh would run what is there ({kept.reason})"
    else:
        why = f"git would run or read what is there ({kept.reason})"
    return f"[sandbox: {done} {where}, which the command created: {why}, outside the sandbox]"


def _set_aside_code(root: Path, gitdir: Path) -> list[str]:
    """A git directory a command made: its configuration files that make git run something,
    and its hooks directory if it holds a hook, renamed with :data:`SET_ASIDE`."""
    from .gitconfig import read_config

    notes = []
    where = gitdir.relative_to(root)
    for name in ("config", "config.worktree"):
        keys = read_config(gitdir / name).runs_code()
        if keys:
            said = ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")
            notes.append(_set_aside_git(gitdir / name, where, f"it sets {said}"))
    try:
        hooks = [e.name for e in os.scandir(gitdir / "hooks") if not e.name.endswith(".sample")]
    except OSError:
        hooks = []
    if hooks:
        notes.append(
            _set_aside_git(gitdir / "hooks", where, f"it holds hooks ({', '.join(hooks)})")
        )
    return notes


def _set_aside_git(path: Path, where: Path, what: str) -> str:
    done = _set_aside(path, where / path.name)
    return (
        f"[sandbox: {done}: the command made the git directory {where}, and {what}, which "
        "git would run outside the sandbox]"
    )


def _set_aside(path: Path, shown: Path) -> str:
    """Rename ``path`` with :data:`SET_ASIDE` (a number after it if that is taken): what was
    done, naming it as ``shown``."""
    aside = path.with_name(path.name + SET_ASIDE)
    number = 1
    while os.path.lexists(aside):
        number += 1
        aside = path.with_name(f"{path.name}{SET_ASIDE}.{number}")
    try:
        path.rename(aside)
        return f"set aside {shown} as {aside.name}"
    except OSError as exc:
        return f"could not set aside {shown} ({error_chain(exc)})"


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


def _mode(path: Path) -> int | None:
    try:
        return path.lstat().st_mode
    except OSError:
        return None
