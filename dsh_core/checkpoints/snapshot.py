"""A checkpoint of the working directory: a walk into the store, and what changed between two.

    snapshotter = Snapshotter(store, "/src/app", fences=credentials.within)
    before = snapshotter.take()                     # every file, link and directory, with modes
    ...                                             # the turn changes things
    after = snapshotter.take(rules_from=before)     # .gitignore as it was before the turn
    for change in diff(store, before.root, after.root):
        print(change.path, change.before, change.after)

What is covered (SPEC 14): every regular file, symlink and directory below the working
directory, with its permission bits, except ``.git`` (at any depth: a repository's own history
is not the undo's to rewrite), what ``.gitignore`` files and ``.git/info/exclude`` ignore
(:mod:`dsh_core.tools.tree.walk`'s rules, the ones ``glob`` and ``grep`` follow), files over
:data:`MAX_FILE_BYTES` (listed in :attr:`Snapshot.skipped`), credential locations and
``DSH_HOME`` when they lie inside, what is not a file (FIFOs, sockets, devices), and a file
that holds the API key (the key is written nowhere: listed as skipped too).

The walk never follows a symlink: each directory is opened from its parent with
``O_NOFOLLOW`` and each file read through that descriptor, so a directory swapped for a link
while the walk runs is skipped, never read through. A file whose size, mtime, ctime and inode
are what the stat cache remembers is not read again; one changed less than two seconds before
the walk began is not remembered (a write in the same clock tick would look unchanged).

A directory's listing is a *tree* object (its entries, sorted by name, each with its kind,
mode, size and the digest of its content or tree, or a link's target), content-addressed like
the files: an unchanged directory costs nothing to store again, and two checkpoints differ by
the trees on the way to what changed.
"""

from __future__ import annotations

import os
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from ..fileio import read_up_to
from ..masking import SECRETS

# walk.py's ignore rules, the ones glob and grep follow: one gitignore matcher, not two.
from ..tools.tree.walk import IgnoreRules, _ignored_in, _load_rules, rules_above
from .store import CheckpointError, CheckpointStore, StatEntry, digest_of

__all__ = [
    "DIRECTORY",
    "FILE",
    "LINK",
    "MAX_FILE_BYTES",
    "Change",
    "Entry",
    "Snapshot",
    "Snapshotter",
    "decode_tree",
    "diff",
    "encode_tree",
    "tree_children",
    "walk_tree",
]

MAX_FILE_BYTES = 16 << 20
"""Files larger than this are not kept (and are listed in the checkpoint event)."""

FILE, LINK, DIRECTORY = 1, 2, 3
"""An entry's kind."""

RACY_NS = 2_000_000_000
"""A file changed this close to the walk's start is read again next time (see the docstring)."""

_HEADER = struct.Struct("<BIHHQ")
"""A tree entry: kind, mode, length of the name, length of the reference, size."""
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


@dataclass(frozen=True, slots=True)
class Entry:
    """One name in a tree, as it was."""

    kind: int
    """:data:`FILE`, :data:`LINK` or :data:`DIRECTORY`."""
    mode: int
    """Permission bits (``0o644``); a link's are always ``0o777``."""
    ref: bytes
    """A file's content digest, a directory's tree digest, or a link's target."""
    size: int = 0
    """A file's size in bytes."""


def encode_tree(entries: Mapping[bytes, Entry]) -> bytes:
    """A directory's listing as bytes, names sorted (the same listing, the same digest)."""
    parts = []
    for name in sorted(entries):
        entry = entries[name]
        parts += [
            _HEADER.pack(entry.kind, entry.mode, len(name), len(entry.ref), entry.size),
            name,
            entry.ref,
        ]
    return b"".join(parts)


def decode_tree(data: bytes) -> dict[bytes, Entry]:
    """The listing :func:`encode_tree` wrote; ValueError for bytes that are not one."""
    entries: dict[bytes, Entry] = {}
    offset = 0
    try:
        while offset < len(data):
            kind, mode, name_length, ref_length, size = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            name = data[offset : offset + name_length]
            offset += name_length
            ref = data[offset : offset + ref_length]
            offset += ref_length
            if kind not in (FILE, LINK, DIRECTORY) or len(ref) != ref_length or not name:
                raise ValueError("not a tree entry")
            entries[name] = Entry(kind, mode, ref, size)
    except struct.error as exc:
        raise ValueError("a tree cut short") from exc
    return entries


def tree_children(store: CheckpointStore, digest: bytes) -> list[bytes]:
    """The objects a stored tree refers to (its files' contents and its subtrees): what pruning
    keeps. Not a tree (a file's content): none."""
    try:
        entries = decode_tree(store.get(digest))
    except ValueError:
        return []
    return [entry.ref for entry in entries.values() if entry.kind != LINK]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A checkpoint's tree, and what taking it found."""

    root: bytes
    """The digest of the working directory's tree."""
    files: int
    """Regular files and links kept."""
    bytes: int
    """Their bytes."""
    skipped: tuple[str, ...]
    """Files over the size cap, and what could not be read (``dir/ (unreadable)``)."""
    rules: dict[str, tuple[tuple[IgnoreRules, ...], tuple[object, ...]]] = field(
        default_factory=dict, repr=False
    )
    """The ignore rules in force in each directory (by relative path, ``""`` or ``a/b/``): a
    later walk that follows them covers exactly what this one did."""


Signature = tuple[tuple[str, int, int, int, int, int], ...]
"""What a directory's listing looked like: (name, mode, size, mtime_ns, ctime_ns, inode) each."""


@dataclass(slots=True)
class _Memo:
    """What the last walk found in one directory: if its listing and its ignore rules are as
    they were, its files are taken from here without a look at them (the fast path)."""

    signature: Signature
    version: tuple[object, ...]
    """The ignore rules in force there (which files decide them, as they were)."""
    rules: tuple[IgnoreRules, ...]
    own_rule: tuple[tuple[int, int, int, int], IgnoreRules | None] | None
    """The directory's own ``.gitignore``: its size, mtime, ctime and inode, and its rules."""
    files: dict[bytes, Entry]
    subdirectories: list[tuple[str, int]]
    skipped: list[str]
    counts: tuple[int, int]
    """Files and bytes of its own files."""
    cached: dict[str, StatEntry]
    """Its files' stat cache entries, by path."""
    reusable: bool
    """Nothing in it was read too recently to be trusted, or could not be read."""
    children: tuple[bytes, ...] = ()
    """The digests of its subdirectories' trees, and its own tree's, as last stored."""
    digest: bytes = b""


@dataclass(slots=True)
class _Frame:
    """A directory being walked: its listing so far and the subdirectories still to walk."""

    fd: int
    relative: str
    """``""`` for the root, else ``a/b/``."""
    name: bytes
    mode: int
    memo: _Memo
    reused: bool
    """Its files came from the memo: its tree may be too, if its subdirectories' are."""
    entries: dict[bytes, Entry]
    children: list[bytes] = field(default_factory=list)
    next: int = 0


class WalkStopped(Exception):
    """The walk was asked to stop (the turn was cancelled)."""


class Snapshotter:
    """Takes checkpoints of one working directory into a store; keeps its stat cache."""

    def __init__(
        self,
        store: CheckpointStore,
        root: str,
        *,
        fences: Callable[[str], Mapping[str, str]] | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        """``root``: the working directory, resolved. ``fences(directory)``: the names in a
        directory that are never walked (credentials, ``DSH_HOME``)."""
        self.store = store
        self.root = root
        self.fences = fences
        self.max_file_bytes = max_file_bytes
        self._cache: dict[str, StatEntry] | None = None
        """The stat cache as stored (by path), loaded at the first walk."""
        self._memos: dict[str, _Memo] = {}
        """What the last walk found, by directory (relative path)."""

    def take(
        self, *, rules_from: Snapshot | None = None, stop: threading.Event | None = None
    ) -> Snapshot:
        """Walk the working directory into the store; one transaction, durable on return.

        ``rules_from``: follow the ignore rules that snapshot found in the directories it
        walked, so that a turn that edits ``.gitignore`` cannot hide what it changed (or make
        a file it did not create look new). Raises CheckpointError, OSError (the working
        directory cannot be listed) or WalkStopped.
        """
        if self._cache is None:
            self._cache = self.store.stat_cache(self.root)
        walk = _Walk(self, rules_from.rules if rules_from is not None else None, stop)
        root_fd = os.open(self.root, _DIRECTORY & ~os.O_NOFOLLOW)
        with self.store.writing():
            try:
                root = walk.run(root_fd)
            finally:
                walk.close()
            if walk.changed:
                cache = {
                    path: entry
                    for memo in walk.memos.values()
                    for path, entry in memo.cached.items()
                }
                if cache != self._cache:
                    self.store.save_stat_cache(self.root, cache)
                    self._cache = cache
        self._memos = walk.memos
        return Snapshot(root, walk.files, walk.bytes, tuple(walk.skipped), walk.rules)


_RuleSet = tuple[tuple[IgnoreRules, ...], tuple[object, ...]]
"""The ignore rules in force in a directory, and their version (what decided them)."""


class _Walk:
    """One walk of :meth:`Snapshotter.take`."""

    def __init__(
        self,
        owner: Snapshotter,
        fixed: dict[str, _RuleSet] | None,
        stop: threading.Event | None,
    ) -> None:
        self.owner = owner
        self.store = owner.store
        self.old = owner._cache or {}
        self.old_memos = owner._memos
        self.memos: dict[str, _Memo] = {}
        self.fixed = fixed
        self.stop = stop
        self.racy_after = time.time_ns() - RACY_NS
        self.files = 0
        self.bytes = 0
        self.skipped: list[str] = []
        self.rules: dict[str, _RuleSet] = {}
        self.frames: list[_Frame] = []
        self.changed = False
        """A directory was walked the slow way: the stat cache may have changed."""

    def close(self) -> None:
        for frame in self.frames:
            os.close(frame.fd)
        self.frames.clear()

    def run(self, root_fd: int) -> bytes:
        root = self.owner.root
        try:
            above = rules_above(root, root)
        except OSError:
            above = ()
        version = tuple((r.cut, tuple(p.pattern for p in r.spec.patterns)) for r in above)
        self.frames.append(self._scan(root_fd, "", b"", 0, (above, version)))
        while True:
            if self.stop is not None and self.stop.is_set():
                raise WalkStopped("the checkpoint was stopped")
            frame = self.frames[-1]
            subdirectories = frame.memo.subdirectories
            if frame.next < len(subdirectories):
                name, mode = subdirectories[frame.next]
                frame.next += 1
                relative = f"{frame.relative}{name}/"
                try:
                    fd = os.open(name, _DIRECTORY, dir_fd=frame.fd)
                except OSError:  # unreadable, or swapped for a link since it was listed
                    self.skipped.append(f"{relative} (unreadable)")
                    continue
                try:
                    inherited = (frame.memo.rules, frame.memo.version)
                    self.frames.append(self._scan(fd, relative, os.fsencode(name), mode, inherited))
                except OSError:
                    os.close(fd)
                    self.skipped.append(f"{relative} (unreadable)")
                continue
            memo = frame.memo
            children = tuple(frame.children)
            if frame.reused and children == memo.children and memo.digest:
                digest = memo.digest
            else:
                digest = self.store.put(encode_tree(frame.entries))
                memo.children, memo.digest = children, digest
            self.frames.pop()
            os.close(frame.fd)
            if not self.frames:
                return digest
            parent = self.frames[-1]
            parent.entries[frame.name] = Entry(DIRECTORY, frame.mode, digest)
            parent.children.append(digest)

    def _scan(self, fd: int, relative: str, name: bytes, mode: int, inherited: _RuleSet) -> _Frame:
        """List one directory: its files and links stored, its subdirectories to walk."""
        directory = os.path.join(self.owner.root, relative) if relative else self.owner.root
        directory = directory.rstrip("/") or "/"
        fences = self.owner.fences(directory) if self.owner.fences is not None else {}
        listed: list[tuple[str, os.stat_result]] = []
        signature = []
        with os.scandir(fd) as listing:
            for entry in listing:
                entry_name = entry.name
                if entry_name == ".git" or entry_name in fences:
                    continue
                try:
                    status = entry.stat(follow_symlinks=False)
                except OSError:
                    status = None
                if status is None:
                    signature.append((entry_name, -1, 0, 0, 0, 0))
                    listed.append((entry_name, os.stat_result((0,) * 10)))
                    continue
                signature.append(
                    (
                        entry_name,
                        status.st_mode,
                        status.st_size,
                        status.st_mtime_ns,
                        status.st_ctime_ns,
                        status.st_ino,
                    )
                )
                listed.append((entry_name, status))
        old = self.old_memos.get(relative)
        rules, version, own_rule = self._rules_for(relative, directory, inherited, listed, old)
        self.rules[relative] = (rules, version)
        sealed = tuple(signature)
        if old is not None and old.reusable and old.signature == sealed and old.version == version:
            memo = old
            memo.rules = rules
            reused = True
        else:
            memo = self._listing(fd, relative, listed, sealed, rules, version, own_rule)
            reused = False
            self.changed = True
        self.memos[relative] = memo
        self.files += memo.counts[0]
        self.bytes += memo.counts[1]
        self.skipped += memo.skipped
        return _Frame(fd, relative, name, mode, memo, reused, dict(memo.files))

    def _listing(
        self,
        fd: int,
        relative: str,
        listed: list[tuple[str, os.stat_result]],
        signature: Signature,
        rules: tuple[IgnoreRules, ...],
        version: tuple[object, ...],
        own_rule: tuple[tuple[int, int, int, int], IgnoreRules | None] | None,
    ) -> _Memo:
        """The slow way through a directory whose listing changed: each file looked at."""
        files: list[tuple[str, os.stat_result]] = []
        below: list[tuple[str, os.stat_result]] = []
        skipped: list[str] = []
        for entry_name, status in listed:
            kind = stat.S_IFMT(status.st_mode)
            if status.st_mode == 0:
                skipped.append(f"{relative}{entry_name} (unreadable)")
            elif kind == stat.S_IFDIR:
                below.append((entry_name, status))
            elif kind in (stat.S_IFREG, stat.S_IFLNK):
                files.append((entry_name, status))
        if rules:
            directory = os.path.join(self.owner.root, relative).rstrip("/") or "/"
            names = [n for n, _ in files] + [n + "/" for n, _ in below]
            ignored = _ignored_in(rules, directory, names)
            if ignored:
                count = len(files)
                files = [item for index, item in enumerate(files) if index not in ignored]
                below = [item for index, item in enumerate(below, count) if index not in ignored]
        memo = _Memo(signature, version, rules, own_rule, {}, [], skipped, (0, 0), {}, True)
        count = size = 0
        for file_name, status in files:
            entry = self._file(fd, relative, file_name, status, memo)
            if entry is not None:
                memo.files[os.fsencode(file_name)] = entry
                count += 1
                size += entry.size
        below.sort()
        memo.subdirectories = [(n, stat.S_IMODE(status.st_mode)) for n, status in below]
        memo.counts = (count, size)
        memo.reusable = memo.reusable and not skipped
        return memo

    def _rules_for(
        self,
        relative: str,
        directory: str,
        inherited: _RuleSet,
        listed: list[tuple[str, os.stat_result]],
        old: _Memo | None,
    ) -> tuple[
        tuple[IgnoreRules, ...],
        tuple[object, ...],
        tuple[tuple[int, int, int, int], IgnoreRules | None] | None,
    ]:
        """The rules in force in a directory, their version, and its own ``.gitignore``."""
        own_rule = None
        for entry_name, status in listed:
            if entry_name == ".gitignore" and stat.S_ISREG(status.st_mode):
                key = (status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
                if old is not None and old.own_rule is not None and old.own_rule[0] == key:
                    own_rule = old.own_rule  # the same file: parsed once
                else:
                    own_rule = (key, _load_rules(directory))
                break
        if self.fixed is not None and relative in self.fixed:
            rules, version = self.fixed[relative]
            return rules, version, own_rule
        rules, version = inherited
        if own_rule is not None and own_rule[1] is not None:
            rules, version = (*rules, own_rule[1]), (*version, own_rule[0])
        return rules, version, own_rule

    def _file(
        self, fd: int, relative: str, name: str, status: os.stat_result, memo: _Memo
    ) -> Entry | None:
        path = relative + name
        if stat.S_ISLNK(status.st_mode):
            try:
                target = os.readlink(os.fsencode(name), dir_fd=fd)
            except OSError:
                memo.skipped.append(f"{path} (unreadable)")
                return None
            return Entry(LINK, 0o777, target)
        size = status.st_size
        if size > self.owner.max_file_bytes:
            memo.skipped.append(path)
            return None
        key = (size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
        known = self.old.get(path)
        if known is not None and known[:4] == key:
            digest = known[4]
        else:
            read = self._read(fd, name, path, memo)
            if read is None:
                return None
            digest, status = read
            size = status.st_size
            key = (size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
        if max(key[1], key[2]) < self.racy_after:
            memo.cached[path] = (*key, digest)
        else:
            memo.reusable = False
        return Entry(FILE, stat.S_IMODE(status.st_mode), digest, size)

    def _read(
        self, fd: int, name: str, path: str, memo: _Memo
    ) -> tuple[bytes, os.stat_result] | None:
        """Store a file's bytes; its digest and its status as read. None when it cannot be
        (unreadable, no longer a file, grown past the cap)."""
        try:
            file_fd = os.open(name, _FILE, dir_fd=fd)
        except OSError:
            memo.skipped.append(f"{path} (unreadable)")
            return None
        try:
            status = os.fstat(file_fd)
            if not stat.S_ISREG(status.st_mode):
                return None
            data = read_up_to(file_fd, self.owner.max_file_bytes + 1)
        except OSError:
            memo.skipped.append(f"{path} (unreadable)")
            return None
        finally:
            os.close(file_fd)
        if len(data) > self.owner.max_file_bytes:
            memo.skipped.append(path)
            return None
        if SECRETS and SECRETS.holds(data.decode("latin-1")):  # bytes one to one
            # The key is never written anywhere (SPEC 6): such a file is not kept, and said.
            memo.skipped.append(f"{path} (holds the API key)")
            memo.reusable = False
            return None
        if len(data) != status.st_size:  # written to while it was read: the bytes decide
            memo.reusable = False
            status = os.stat_result((*status[:6], len(data), *status[7:]))
        return self.store.put(data, digest_of(data)), status


@dataclass(frozen=True, slots=True)
class Change:
    """A path whose entry differs between two trees (None: it was not there)."""

    path: str
    before: Entry | None
    after: Entry | None


def diff(store: CheckpointStore, before: bytes, after: bytes) -> list[Change]:
    """Every path whose entry differs from ``before`` to ``after``, sorted by path.

    Unchanged subtrees are skipped by their digest; a directory that appeared or went is listed
    with everything in it; a directory that only holds changes is not listed itself.
    """
    changes: list[Change] = []
    pending: list[tuple[str, bytes | None, bytes | None]] = [("", before, after)]
    while pending:
        prefix, left_tree, right_tree = pending.pop()
        left = _listing(store, left_tree)
        right = _listing(store, right_tree)
        for name in left.keys() | right.keys():
            old, new = left.get(name), right.get(name)
            if old == new:
                continue
            path = prefix + os.fsdecode(name)
            both_directories = (
                old is not None and new is not None and old.kind == new.kind == DIRECTORY
            )
            if both_directories:
                assert old is not None and new is not None
                if old.mode != new.mode:
                    changes.append(Change(path, old, new))
                if old.ref != new.ref:
                    pending.append((path + "/", old.ref, new.ref))
                continue
            changes.append(Change(path, old, new))
            if old is not None and old.kind == DIRECTORY:
                pending.append((path + "/", old.ref, None))
            if new is not None and new.kind == DIRECTORY:
                pending.append((path + "/", None, new.ref))
    changes.sort(key=lambda change: change.path)
    return changes


def _listing(store: CheckpointStore, tree: bytes | None) -> dict[bytes, Entry]:
    if tree is None:
        return {}
    try:
        return decode_tree(store.get(tree))
    except ValueError as exc:
        raise CheckpointError(f"tree {tree.hex()[:16]} in the checkpoint store is damaged") from exc


def walk_tree(store: CheckpointStore, tree: bytes, prefix: str = "") -> Iterator[tuple[str, Entry]]:
    """Every path below a stored tree and its entry, directories before what they hold."""
    for name, entry in sorted(_listing(store, tree).items()):
        path = prefix + os.fsdecode(name)
        yield path, entry
        if entry.kind == DIRECTORY:
            yield from walk_tree(store, entry.ref, path + "/")
