"""Putting a checkpoint's files back: only beneath the working directory, never through a link.

    plan = plan_restore(store, root, changes, towards="before")   # what can go back, what not
    done = apply_restore(store, plan)                              # restored, and what failed

A plan compares each changed path as it is now with what the turn left (``expected``) and
what it should become (``target``): already there, restorable (it is as the turn left it), or
a *conflict* (changed since, or a link now stands on its way). Only restorable paths are
touched, unless the person says to overwrite the conflicts too (:func:`overwrite`).

Writing follows SPEC 10.11's discipline, as ``write`` does: the working directory is opened
without following a link and checked to be the one the checkpoint was taken of (device and
inode), and every directory below it is opened from there with ``openat2``
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` (:mod:`dsh_core.trust.beneath`), so a directory
swapped for a link to ``~`` after the checkpoint is refused, never followed. A file comes back
through a temporary file in its directory, renamed over the name (a link planted there is
replaced, not written through), with its mode; a link comes back as a link with its target; a
directory with its mode; what the turn created goes. Removals go deepest first, creations
shallowest first, directory modes last (a read-only directory would refuse what goes in it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..fileio import fsync_descriptor, read_up_to
from ..trust.beneath import open_directory_at
from .snapshot import DIRECTORY, FILE, LINK, MAX_FILE_BYTES, Change, Entry
from .store import CheckpointError, CheckpointStore, digest_of

__all__ = [
    "Applied",
    "Conflict",
    "Plan",
    "Step",
    "apply_restore",
    "current_entry",
    "open_root",
    "overwrite",
    "plan_restore",
    "root_identity",
]

Towards = Literal["before", "after"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_UNREACHABLE = "a symlink is now on its way"


class Unreachable(Exception):
    """A path that cannot be reached without following a link (or leaving the directory)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One path to put back: as ``target`` (None: it must go)."""

    path: str
    target: Entry | None
    now: Entry | None
    """What is there now."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """A path left as it is, and why."""

    path: str
    why: str
    step: Step | None = None
    """How it would be put back anyway (None: it cannot be, e.g. a link on its way)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What a restore will do."""

    root: str
    identity: tuple[int, int] | None
    """The working directory's device and inode when the checkpoint was taken."""
    steps: tuple[Step, ...]
    conflicts: tuple[Conflict, ...]
    already: tuple[str, ...] = ()
    """Paths that are already as they should become."""


@dataclass(slots=True)
class Applied:
    """What a restore did."""

    restored: list[str] = field(default_factory=list)
    failed: list[Conflict] = field(default_factory=list)
    """Paths it could not put back, and why (left as they were)."""


def root_identity(root: str) -> tuple[int, int]:
    """The working directory's device and inode (what a restore checks it writes into)."""
    status = os.stat(root)
    return status.st_dev, status.st_ino


def open_root(root: str, identity: tuple[int, int] | None) -> int:
    """The working directory, opened without following a link at its own name, and checked
    to be the directory the checkpoint was taken of; CheckpointError otherwise."""
    try:
        fd = os.open(root, _DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise CheckpointError(
            f"cannot open the working directory {root} (it may have been replaced by a link)"
        ) from exc
    status = os.fstat(fd)
    if identity is not None and (status.st_dev, status.st_ino) != identity:
        os.close(fd)
        raise CheckpointError(
            f"{root} is not the directory the checkpoint was taken of (it was moved or "
            "replaced since): nothing was restored"
        )
    return fd


def current_entry(root_fd: int, path: str) -> Entry | None:
    """What ``path`` is now (None: nothing); Unreachable when a link is on its way."""
    parent, name = os.path.split(path)
    try:
        dir_fd, _ = open_directory_at(root_fd, parent)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            raise Unreachable(path) from exc
        raise
    try:
        return _entry_in(dir_fd, name)
    finally:
        os.close(dir_fd)


def _entry_in(dir_fd: int, name: str) -> Entry | None:
    try:
        status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        return Entry(DIRECTORY, stat.S_IMODE(mode), b"")
    if stat.S_ISLNK(mode):
        return Entry(LINK, 0o777, os.readlink(os.fsencode(name), dir_fd=dir_fd))
    if not stat.S_ISREG(mode):
        return Entry(0, stat.S_IMODE(mode), b"")  # a FIFO, a socket: never what was there
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        data = read_up_to(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    return Entry(FILE, stat.S_IMODE(mode), digest_of(data), len(data))


def same(now: Entry | None, then: Entry | None) -> bool:
    """Whether a path is as an entry says (a directory by its kind and mode alone)."""
    if now is None or then is None:
        return now is then
    if now.kind != then.kind or (now.kind != LINK and now.mode != then.mode):
        return False
    return now.kind == DIRECTORY or now.ref == then.ref


def plan_restore(
    root: str,
    identity: tuple[int, int] | None,
    changes: Iterable[Change],
    *,
    towards: Towards,
) -> Plan:
    """What putting ``changes`` back ``towards`` their before (undo) or after (redo) state
    would do, path by path; CheckpointError when the working directory is not the one."""
    steps: list[Step] = []
    conflicts: list[Conflict] = []
    already: list[str] = []
    root_fd = open_root(root, identity)
    try:
        for change in changes:
            target = change.before if towards == "before" else change.after
            expected = change.after if towards == "before" else change.before
            try:
                now = current_entry(root_fd, change.path)
            except Unreachable:
                conflicts.append(Conflict(change.path, _UNREACHABLE))
                continue
            except OSError as exc:
                conflicts.append(Conflict(change.path, f"cannot be read ({exc.strerror})"))
                continue
            if same(now, target):
                already.append(change.path)
            elif same(now, expected):
                steps.append(Step(change.path, target, now))
            else:
                step = Step(change.path, target, now)
                conflicts.append(Conflict(change.path, _how_changed(now, expected), step))
    finally:
        os.close(root_fd)
    return Plan(root, identity, tuple(steps), tuple(conflicts), tuple(already))


def overwrite(plan: Plan) -> Plan:
    """The plan with its conflicts put back too (the person said so), but for those behind a
    link, which nothing may write through."""
    forced = [conflict.step for conflict in plan.conflicts if conflict.step is not None]
    left = tuple(conflict for conflict in plan.conflicts if conflict.step is None)
    steps = tuple(sorted((*plan.steps, *forced), key=lambda step: step.path))
    return Plan(plan.root, plan.identity, steps, left, plan.already)


def _how_changed(now: Entry | None, expected: Entry | None) -> str:
    if expected is None:
        return "created since the turn ended"
    if now is None:
        return "deleted since the turn ended"
    if now.kind != expected.kind:
        return "replaced by another kind of file since the turn ended"
    return "changed since the turn ended"


def apply_restore(store: CheckpointStore, plan: Plan) -> Applied:
    """Carry out ``plan``; what it restored and what it could not. Each file written is
    fsynced, then each directory it changed."""
    applied = Applied()
    root_fd = open_root(plan.root, plan.identity)
    touched: set[str] = set()
    try:
        done: set[str] = set()
        removals = [s for s in plan.steps if s.now is not None and _must_go(s)]
        for step in sorted(removals, key=_deepest_first):
            if _parent_failed(step.path, applied):
                continue
            try:
                _remove(root_fd, step.path, touched)
            except OSError as exc:
                applied.failed.append(Conflict(step.path, _failure(exc)))
                continue
            if step.target is None:
                done.add(step.path)
        creations = [s for s in plan.steps if s.target is not None]
        for step in sorted(creations, key=_shallowest_first):
            if _parent_failed(step.path, applied) or step.path in _failed_paths(applied):
                continue
            assert step.target is not None
            try:
                _put(store, root_fd, step.path, step.target, touched)
            except (OSError, CheckpointError) as exc:
                why = _failure(exc) if isinstance(exc, OSError) else str(exc)
                applied.failed.append(Conflict(step.path, why))
                continue
            done.add(step.path)
        for step in sorted(creations, key=_deepest_first):
            if step.target is not None and step.target.kind == DIRECTORY and step.path in done:
                try:
                    _chmod_directory(root_fd, step.path, step.target.mode)
                except OSError as exc:
                    done.discard(step.path)
                    applied.failed.append(Conflict(step.path, _failure(exc)))
        for directory in sorted(touched):
            with contextlib.suppress(OSError):
                fd, _ = open_directory_at(root_fd, directory)
                try:
                    fsync_descriptor(fd)
                finally:
                    os.close(fd)
    finally:
        os.close(root_fd)
    applied.restored = sorted(done)
    return applied


def _must_go(step: Step) -> bool:
    """Whether what is there now must be removed first: nothing is wanted there, or another
    kind of thing (a directory where a file was)."""
    assert step.now is not None
    if step.target is None:
        return True
    return step.now.kind != step.target.kind or step.now.kind not in (FILE, LINK, DIRECTORY)


def _deepest_first(step: Step) -> tuple[int, str]:
    return -step.path.count("/"), step.path


def _shallowest_first(step: Step) -> tuple[int, str]:
    return step.path.count("/"), step.path


def _failed_paths(applied: Applied) -> set[str]:
    return {conflict.path for conflict in applied.failed}


def _parent_failed(path: str, applied: Applied) -> bool:
    """A directory above ``path`` could not be put back: nothing goes in it."""
    return any(path.startswith(conflict.path + "/") for conflict in applied.failed)


def _failure(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        return _UNREACHABLE
    if exc.errno == errno.ENOTEMPTY:
        return "it holds files undo does not cover (ignored, or added since): left"
    return f"cannot be written ({exc.strerror})"


def _directory_of(root_fd: int, path: str, *, create: bool, touched: set[str]) -> tuple[int, str]:
    parent, name = os.path.split(path)
    fd, created = open_directory_at(root_fd, parent, create=create)
    touched.add(parent)
    touched.update(os.path.dirname(made) for made in created)
    return fd, name


def _remove(root_fd: int, path: str, touched: set[str]) -> None:
    dir_fd, name = _directory_of(root_fd, path, create=False, touched=touched)
    try:
        status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(status.st_mode):
            os.rmdir(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)  # a link goes as a link: never what it leads to
    except FileNotFoundError:
        pass
    finally:
        os.close(dir_fd)


def _put(store: CheckpointStore, root_fd: int, path: str, target: Entry, touched: set[str]) -> None:
    dir_fd, name = _directory_of(root_fd, path, create=True, touched=touched)
    try:
        if target.kind == DIRECTORY:
            try:
                os.mkdir(name, 0o700, dir_fd=dir_fd)  # its own mode once what it holds is in
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    raise
            return
        temporary = f".{name[:40]}.{os.urandom(4).hex()}.dsh-undo"
        if target.kind == LINK:
            os.symlink(target.ref, temporary, dir_fd=dir_fd)
        else:
            data = store.get(target.ref)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, target.mode)
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=dir_fd)
                raise
            os.close(fd)
        try:
            os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def _chmod_directory(root_fd: int, path: str, mode: int) -> None:
    fd, _ = open_directory_at(root_fd, path)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
