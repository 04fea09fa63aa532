"""The walk ``glob`` and ``grep`` share (their glob patterns: :mod:`.globs`).

The walk goes down from a directory and leaves out what a careful user expects a search to
leave out:

- ``.git``, and whatever ``.gitignore`` files ignore (matched by ``pathspec``'s gitignore
  rules): a nested file rules its subtree and wins over the files above it, as in git. The
  files from the repository's top (the nearest directory above holding ``.git``; without one,
  the working directory) down to the search directory apply too, and so does
  ``.git/info/exclude``. A search directory that is itself ignored was asked for by name: the
  rules above it are dropped. Git's global excludes file is not read.
- Symlinks to directories are not followed (no loops, no escapes). A symlink to a file is
  yielded; :meth:`Walk.barrier` says whether it may be read through (only into the working
  directory, or into the search directory when that is outside and was approved; never into a
  credential location or dsh's own process files).
- A directory swapped for a symlink while the walk goes on (``mv src x; ln -s ~/.ssh src``
  between two listings) is not followed either: the walk holds each directory open and opens
  the next one from it without following a link (the ``beneath`` discipline of
  :mod:`dsh_core.trust.beneath`, as ``write`` and ``edit`` do; SPEC 10.11), starting from the
  search directory opened with no link on its way. The entries it yields are listed from the
  directory it holds (their ``stat`` is relative to it), and :meth:`Walk.reach` gives a file's
  name and that directory's descriptor to open it by: what a caller opens is in the directory
  that was listed, whatever was renamed since.
- Credential locations (``~/.ssh``, ``DSH_HOME``, ... of :mod:`dsh_core.trust.policy`) and dsh's own
  ``/proc/<pid>`` are stepped around (SPEC 10.4): a walk over ``~`` or ``/`` never enters them.
  One asked for by name, approved by a person, is walked.
- FIFOs, sockets and devices are never yielded, so never opened.

Nothing is left out silently: :meth:`Walk.notes` counts what could not be read, the symlinks
not followed and the places stepped around, for the result. A walk stops between directories
once its ``stop`` is set.
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import stat
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ...trust.beneath import HeldDirectory
from ...trust.credentials import Credentials, own_pids, own_process_reason
from ..base import ToolError
from ..linear import LinearRegex, linear_regex
from ..paths import counted, is_within, list_name, real_path

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = [
    "IgnoreRules",
    "Pending",
    "Sharing",
    "Walk",
    "rules_above",
]


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """One ``.gitignore`` file (or ``info/exclude``): its patterns, and where it applies."""

    cut: int
    """Characters to drop from an absolute path to get the path relative to its directory."""
    spec: GitIgnoreSpec
    """Matched by pathspec's RE2 backend: which pattern wins, in linear time."""
    any_line: LinearRegex
    """All the patterns as one RE2 regex over lines (``(?m)``): one search finds the few
    names of a directory that any pattern may match; pathspec decides only for those."""

    @classmethod
    def of(cls, directory: str, spec: GitIgnoreSpec) -> IgnoreRules:
        cut = len(directory) + (0 if directory.endswith("/") else 1)
        regexes = [
            f"(?:{_NAMED_GROUP.sub('(?:', str(p.regex.pattern))})"
            for p in spec.patterns
            if p.regex is not None
        ]
        return cls(cut, spec, linear_regex("|".join(regexes), ".gitignore", multiline=True))

    def candidates(self, base: str, names: list[str]) -> Iterator[int]:
        """The indexes of ``names`` (in the directory ``base``, relative to this file's
        directory: "" or ending in ``/``) that a pattern may match: every one that does, and
        maybe a few more.

        The paths are searched as the lines of one text, one search for a directory rather
        than one per name. Each pattern starts with ``^``, so a match starts at a line's
        start; one that runs on into the next lines (``[^/]*`` crosses a line end) marks its
        first line only, and the search goes on from the next line, so it cannot hide a
        line's own match.
        """
        text = base + f"\n{base}".join(names)
        if text.count("\n") != len(names) - 1:  # a name with a line break: check them all
            yield from range(len(names))
            return
        data = text.encode("utf-8", "surrogateescape")
        index = position = 0
        while (span := self.any_line.search(data, position)) is not None:
            index += data.count(b"\n", position, span[0])
            yield index
            position = data.find(b"\n", span[0]) + 1
            if position == 0:
                return
            index += 1


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
"""pathspec names a group in each pattern: in one alternation the names would clash."""


def _ignored_in(rules: tuple[IgnoreRules, ...], directory: str, names: list[str]) -> set[int]:
    """The indexes of ``names`` in ``directory`` that the rules ignore (a directory's name
    ends with ``/``); mostly none. The deepest file with an opinion decides; ``!pattern`` is
    an opinion too."""
    decided: dict[int, bool] = {}
    for rule in reversed(rules):
        below = directory[rule.cut :]
        base = below + "/" if below else ""
        for index in rule.candidates(base, names):
            if index not in decided:
                verdict = rule.spec.check_file(base + names[index]).include
                if verdict is not None:
                    decided[index] = verdict
    return {index for index, verdict in decided.items() if verdict}


def _ignored(rules: tuple[IgnoreRules, ...], path: str, is_dir: bool) -> bool:
    directory, name = os.path.split(path)
    return bool(_ignored_in(rules, directory, [name + "/" if is_dir else name]))


def _load_rules(
    directory: str, name: str = ".gitignore", base: str | None = None
) -> IgnoreRules | None:
    """The rules in ``directory/name``, for paths below ``base`` (default: ``directory``).

    None when there are none, or the file is not a regular file (git ignores a symlinked
    .gitignore; a FIFO would block), or cannot be read: then nothing is ignored by it.
    """
    try:
        fd = os.open(
            os.path.join(directory, name),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        )
    except OSError:
        return None
    with open(fd, encoding="utf-8", errors="surrogateescape") as file:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            lines = file.read(1024 * 1024).splitlines()
        except OSError:
            return None
    from pathspec import GitIgnoreSpec  # only a search needs it: about 7 ms at startup

    try:
        with warnings.catch_warnings():  # re's "possible nested set", about a future Python
            warnings.simplefilter("ignore", FutureWarning)
            # RE2, by name: a backtracking backend takes hours over "a*a*...b" (SPEC 10.7).
            spec = GitIgnoreSpec.from_lines(lines, backend="re2")
        return IgnoreRules.of(base or directory, spec) if spec.patterns else None
    except Exception:  # a line pathspec or RE2 cannot read: the file ignores nothing
        return None


def rules_above(start: str, root: str) -> tuple[IgnoreRules, ...]:
    """The ignore rules that apply to ``start`` from the directories above it."""
    top = _git_top(start)
    base = top or (root if is_within(start, root) else start)
    chain: list[str] = []
    directory = start
    while directory != base and is_within(directory, base):
        directory = os.path.dirname(directory)
        chain.append(directory)
    rules: list[IgnoreRules] = []
    if top is not None:
        # Its paths are relative to the repository's top.
        exclude = _load_rules(os.path.join(top, ".git", "info"), "exclude", base=top)
        if exclude is not None:
            rules.append(exclude)
    rules += [rule for d in reversed(chain) if (rule := _load_rules(d)) is not None]
    if rules and _ignored(tuple(rules), start, True):
        return ()
    return tuple(rules)


def _git_top(start: str) -> str | None:
    directory = start
    while True:
        if os.path.lexists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


Pending = tuple[HeldDirectory, str, str, str, tuple["IgnoreRules", ...], int]
"""A directory still to walk: the held directory it is in, its name there, its path, its path
from the start (with a ``/``), the ignore rules above it, and its depth below the start."""


class Sharing(Protocol):
    """Other processes that may take parts of a walk (:class:`~.divided.Division`)."""

    def before(self, pending: list[Pending], yielded: int) -> None:
        """Before each directory: may take entries off ``pending`` (walked elsewhere, their
        findings in), or give some to another process (kept, and taken off later)."""


@dataclass
class Walk:
    """One walk: what it found and what it had to leave out."""

    stop: threading.Event
    allowed: tuple[str, ...]
    """Where a symlink may lead for its file to be read: the working directory, and the search
    directory when that is outside."""
    credentials: Credentials | None = None
    """Where the walk never goes (None: anywhere it may)."""
    unreadable: list[str] = field(default_factory=list)
    """Directories that could not be listed, and files that could not be read."""
    symlinks_out: int = 0
    binary: int = 0
    fenced: list[str] = field(default_factory=list)
    """Credential locations stepped around, as shown (``~/.ssh``), once per place."""
    own_process: list[str] = field(default_factory=list)
    """dsh's own ``/proc`` files stepped around."""
    swapped: list[str] = field(default_factory=list)
    """Directories that had become symlinks when the walk came to them: not followed."""
    _here: tuple[str, HeldDirectory] | None = field(default=None, repr=False)
    """The directory whose entries are being yielded: its path from the start, and its
    descriptor."""

    def files(
        self,
        start: str,
        rules: tuple[IgnoreRules, ...],
        depth: int | None = None,
        *,
        ordered: bool = True,
        want: Callable[[str], object] | None = None,
        sharing: Sharing | None = None,
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """(path relative to ``start``, entry) of each file not ignored; in name order (files
        of a directory before its subdirectories) when ``ordered``.

        ``want(relative)`` picks files before the ignore rules are asked (it is cheaper);
        ``depth`` is how many levels below ``start`` to go (None: all). ``start`` is absolute
        and resolved; one that leads through a symlink now was swapped since it was resolved,
        and is a ToolError. An entry is valid until the next one is asked for; its ``path`` is
        its name only: open it by :meth:`reach`, judge it by :meth:`logical`.

        ``sharing``: told before each directory what is still to walk (:class:`Sharing`).
        """
        held: list[HeldDirectory] = []
        first = _held_start(start, held)
        pending: list[Pending] = [(first, "", start, "", rules, 0)]
        yielded = 0
        try:
            while pending:
                if self.stop.is_set():
                    return
                if sharing is not None:
                    sharing.before(pending, yielded)
                    if not pending:  # the rest was walked by others, their findings are in
                        return
                parent, name, directory, relative, rules, level = pending.pop()
                here = parent if not name else parent.child(name, held)
                if name:
                    parent.release()
                if here is None:  # a symlink now, or gone: what was listed is not there
                    self._came_apart(directory, relative)
                    continue
                try:
                    with os.scandir(here.fd) as scan:
                        entries = sorted(scan, key=_NAME) if ordered else list(scan)
                except OSError:
                    self.unreadable.append(relative or ".")
                    here.release()
                    continue
                fences = self._fences(directory)
                files: list[tuple[str, os.DirEntry[str]]] = []
                below: list[os.DirEntry[str]] = []
                has_rules = False
                for entry in entries:
                    name = entry.name
                    if name == ".git":
                        continue
                    if fences and name in fences:
                        self._step_around(fences[name], os.path.join(directory, name))
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if depth is None or level < depth:
                            below.append(entry)
                    elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                        has_rules = has_rules or name == ".gitignore"
                        path = relative + name
                        if want is None or want(path):
                            files.append((path, entry))
                held_path = here.listed(directory)
                if has_rules and (rule := _load_rules(held_path, base=directory)) is not None:
                    rules = (*rules, rule)
                if rules:  # one search over the directory's names, not one per name
                    names = [entry.name for _, entry in files] + [e.name + "/" for e in below]
                    if ignored := _ignored_in(rules, directory, names):
                        count = len(files)
                        files = [f for n, f in enumerate(files) if n not in ignored]
                        below = [e for n, e in enumerate(below, count) if n not in ignored]
                self._here = directory, here
                yielded += len(files)
                yield from files
                self._here = None
                here.hold(len(below))
                here.release()
                pending.extend(
                    (
                        here,
                        entry.name,
                        os.path.join(directory, entry.name),
                        f"{relative}{entry.name}/",
                        rules,
                        level + 1,
                    )
                    for entry in reversed(below)
                )
        finally:
            for handle in held:
                handle.close()

    @contextlib.contextmanager
    def one_file(self, path: str) -> Iterator[str]:
        """A path that reaches the file ``path`` (absolute, resolved) as it is now, opened from
        ``/`` without following a symlink (``/proc/self/fd/N``): for a search of that one file,
        which a swap cannot lead elsewhere; ToolError if a symlink is on its way now."""
        held: list[HeldDirectory] = []
        directory = _held_start(os.path.dirname(path), held)
        try:
            try:
                fd = os.open(os.path.basename(path), _FILE, dir_fd=directory.fd)
            except OSError as exc:
                raise ToolError(f"cannot search {path}") from exc
            try:
                yield f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else path
            finally:
                os.close(fd)
        finally:
            directory.close()

    def _came_apart(self, directory: str, relative: str) -> None:
        """Note a directory that could not be opened from its parent when the walk came to it."""
        try:
            is_link = stat.S_ISLNK(os.lstat(directory).st_mode)
        except OSError:
            return  # gone meanwhile: nothing in it to find
        if is_link:
            self.swapped.append(relative.rstrip("/"))
        else:
            self.unreadable.append(relative or ".")

    def _fences(self, directory: str) -> dict[str, str]:
        """What not to enter in ``directory``, by name: credentials, dsh's own process."""
        fences = self.credentials.within(directory) if self.credentials is not None else {}
        if directory == "/proc":
            return {**fences, **{str(pid): _OWN_PROCESS for pid in own_pids()}}
        return fences

    def _step_around(self, why: str, path: str) -> None:
        if why == _OWN_PROCESS:
            self.own_process.append(path)
        else:
            self.fenced.append(why)

    def logical(self, entry: os.DirEntry[str]) -> str:
        """Where ``entry`` (the one :meth:`files` yielded last) is, as a path from its start."""
        assert self._here is not None, "only while the walk yields the entry"
        return os.path.join(self._here[0], entry.name)

    def reach(self, entry: os.DirEntry[str]) -> tuple[str, int]:
        """How to open ``entry`` (the one :meth:`files` yielded last): its name, and the
        descriptor of the directory the walk holds it in (``os.open(name, flags, dir_fd=fd)``),
        so a rename since cannot lead it elsewhere."""
        assert self._here is not None, "only while the walk yields the entry"
        return entry.name, self._here[1].fd

    def barrier(self, entry: os.DirEntry[str]) -> str | None:
        """Why the file a symlink leads to may not be read (None: it may): it leads outside
        (``"outside"``), or into a credential location or dsh's own process (counted, as
        :meth:`skip` does)."""
        real, passed = real_path(self.logical(entry))
        if any(own_process_reason(step) is not None for step in passed):
            return _OWN_PROCESS
        credentials = self.credentials.reason(real) if self.credentials is not None else None
        if credentials is not None:
            return credentials
        return None if any(is_within(real, allowed) for allowed in self.allowed) else "outside"

    def skip(self, why: str, path: str) -> None:
        """Count a symlink that :meth:`barrier` stopped, for :meth:`notes`."""
        if why == "outside":
            self.symlinks_out += 1
        else:
            self._step_around(why, path)

    def notes(self) -> list[str]:
        notes = []
        if self.binary:
            notes.append(counted(self.binary, "binary file"))
        if self.symlinks_out:
            notes.append(counted(self.symlinks_out, "symlink") + " leading outside")
        if self.swapped:
            shown = ", ".join(list_name(d) for d in self.swapped[:5])
            notes.append(
                f"{counted(len(self.swapped), 'directory')} replaced by a symlink while "
                f"searched, not followed: {shown}"
            )
        if self.fenced:
            places = Counter(self.fenced)
            shown = ", ".join(p if n == 1 else f"{p} ({n:,})" for p, n in places.items())
            notes.append(f"credentials, never searched: {shown}")
        if self.own_process:
            notes.append(f"dsh's own process files: {', '.join(self.own_process)}")
        if self.unreadable:
            shown = ", ".join(list_name(d) for d in self.unreadable[:5])
            more = ", ..." if len(self.unreadable) > 5 else ""
            notes.append(f"{len(self.unreadable):,} unreadable: {shown}{more}")
        return [f"[skipped: {'; '.join(notes)}]"] if notes else []


_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _held_start(start: str, held: list[HeldDirectory]) -> HeldDirectory:
    """``start``, opened from ``/`` without following any symlink on the way (it was resolved:
    a link there now was swapped in since); ToolError if it cannot be."""
    try:
        return HeldDirectory.beneath("/", start.lstrip("/"), held)
    except OSError as exc:
        raise ToolError(
            f"cannot walk {start}: it changed since it was resolved (a symlink on its way now, "
            "or gone); ask again"
        ) from exc


_OWN_PROCESS = "dsh's own process"


_NAME = operator.attrgetter("name")
