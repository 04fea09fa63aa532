"""What the file tools share: paths resolved against the working directory, argument checks.

A path resolves against :attr:`Workspace.root` (absolute paths and ``~`` allowed), symlinks
followed; whatever lands outside the root is *outside*, which the approval policy asks about::

    target = resolve_path(workspace, arguments, "file_path")
    target.real      # absolute, symlinks followed: what is opened
    target.shown     # the path as given, relative when it is inside: for results
    target.summary   # where it leads, resolved, on one line: for the question (SPEC 10.10)
    target.outside   # () inside, else (target.real,): what Access lists
    target.guarded(writing=True)   # ("notes.md -> .git/config (protected: .git/config)",)

The policy of :mod:`dsh_core.trust.policy` is applied here for every file tool: a path is judged by
where it resolves. One in a credential location (``~/.ssh``, ``DSH_HOME``, ...) or, for ``write``
and ``edit``, in a protected one (anything under a ``.git``, ``AGENTS.md``, dsh's own installation,
what git's configuration names: :meth:`dsh_core.trust.policy.Protection.reason`) needs a person's
yes each time (:meth:`Target.guarded`, which :attr:`Access.protected` lists). One that leads into
dsh's own ``/proc`` files, by any spelling (``/proc/self``, ``/dev/fd/...``, a symlink, ``..`` after
``/proc/self/cwd``), is refused outright: every step of the resolution is checked, not only its end
(:func:`real_path`).

Names are never cleaned up here: the front door neutralises what it shows on a terminal. What
must stay on one line (a summary, the lists of ``glob`` and ``grep``) quotes a name with a line
break in it (:func:`list_name`), so nobody can be shown where a name ends but the next line.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..trust.credentials import own_process_reason
from .base import ToolError

if TYPE_CHECKING:
    from ..trust.workspace import Workspace

__all__ = [
    "Target",
    "bool_argument",
    "check_arguments",
    "counted",
    "display_path",
    "int_argument",
    "is_within",
    "list_name",
    "real_path",
    "resolve",
    "resolve_path",
    "string_argument",
]


@dataclass(frozen=True)
class Target:
    """A path argument, resolved."""

    given: str
    """The argument as the model wrote it."""
    real: str
    """Absolute, symlinks followed (:func:`real_path`): what the tool opens."""
    inside: bool
    """Whether ``real`` is the working directory or below it."""
    shown: str
    """For results: as given, or relative to the working directory when inside."""
    named: str
    """The path as named, ``..`` and ``.`` resolved but no link followed, as :attr:`summary`
    shows it: relative when inside, on one line."""
    leads: str
    """:attr:`real` as :attr:`summary` shows it: relative when inside, on one line."""
    credentials: str | None = None
    """The credential location ``real`` is in (SPEC 10.4: ``~/.ssh``, ``DSH_HOME``, ...)."""
    judge: Callable[[str], str | None] | None = field(default=None, repr=False, compare=False)
    """Names the protected location of a real path
    (:meth:`dsh_core.trust.policy.Protection.reason`)."""

    @functools.cached_property
    def protected(self) -> str | None:
        """The protected location ``real`` is in (SPEC 10.1, 10.2: ``.git/config``,
        ``.git/hooks/``, ``.dsh/``, ``AGENTS.md``, dsh's own installation, ...): what ``write``
        and ``edit`` may change only with a yes each time. Looked up at the first ask (a
        ``write``), not for every ``read``: it looks at the repositories of the tree."""
        return self.judge(self.real) if self.judge is not None and self.inside else None

    @property
    def outside(self) -> tuple[str, ...]:
        """What :class:`~dsh_core.tools.Access` lists: the real path when it is outside."""
        return () if self.inside else (self.real,)

    @property
    def summary(self) -> str:
        """Where the call acts, resolved (SPEC 10.10): ``.git/config`` for a path padded to
        look like another; ``notes.md -> .git/config`` when a link leads elsewhere; marked
        when it is outside the working directory."""
        where = self.leads if self.named == self.leads else f"{self.named} -> {self.leads}"
        return where if self.inside else f"{where} (outside the working directory)"

    def guarded(self, *, writing: bool) -> tuple[str, ...]:
        """What :attr:`Access.protected` lists for a call on this path: the summary and why a
        person must say yes to it each time; empty when nothing here needs that."""
        why = [f"credentials: {self.credentials}"] if self.credentials else []
        if writing and self.protected:
            why.append(f"protected: {self.protected}")
        return (f"{self.summary} ({'; '.join(why)})",) if why else ()

    def described(self, *, writing: bool) -> str:
        """The summary for the transcript and the question: with the reason when guarded."""
        guarded = self.guarded(writing=writing)
        return guarded[0] if guarded else self.summary


def is_within(path: str, root: str) -> bool:
    """Whether the absolute, normalised ``path`` is ``root`` or below it (no I/O)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


def display_path(root: Path, given: str) -> str:
    """``given`` as a summary shows it, from the argument alone (no I/O): relative if inside."""
    expanded = _expand_home(given)
    if os.path.isabs(expanded):
        normal = os.path.normpath(expanded)
        if is_within(normal, str(root)):
            return os.path.relpath(normal, root)
    return given


def resolve_path(
    workspace: Workspace, arguments: Mapping[str, Any], name: str, *, default: str | None = None
) -> Target:
    """The path argument ``name`` resolved; ToolError ``invalid arguments: ...`` if it is none.

    ``default`` is used when the argument is absent or null (``glob``'s and ``grep``'s ``path``).
    """
    given = string_argument(arguments, name, required=default is None)
    if given is None:
        assert default is not None
        given = default
    return resolve(workspace, given, name)


def resolve(workspace: Workspace, given: str, name: str = "path") -> Target:
    """``given`` resolved in ``workspace``; ToolError when no file can have that name, or when
    it leads into dsh's own process files."""
    if "\0" in given:
        raise ToolError(f"invalid arguments: {name} contains a NUL character")
    try:
        size = len(os.fsencode(given))
    except UnicodeError as exc:  # a lone surrogate from JSON: no file can be named that
        raise ToolError(f"invalid arguments: {name} is not a valid file name") from exc
    if size > PATH_MAX:  # the kernel's limit; resolving a longer one step by step is slow
        raise ToolError(
            f"invalid arguments: {name} is {size:,} bytes long; no path is longer than {PATH_MAX:,}"
        )
    root = workspace.root
    joined = os.path.join(root, _expand_home(given))  # ".." after a symlink: resolved, not cut
    try:
        real, passed = real_path(joined)
    except (OSError, ValueError) as exc:
        raise ToolError(f"invalid arguments: cannot resolve {name} {given!r}") from exc
    for step in passed:
        if (where := own_process_reason(step)) is not None:
            raise ToolError(
                f"{name} {given} is in dsh's own process files ({where}), which hold its API key: "
                "no tool may open them, whoever approves"
            )
    credentials = None
    if not is_within(real, workspace.own_output):  # the command output it was told to read
        credentials = workspace.credentials.reason(real)
    named, leads = (_summary_path(root, path) for path in (os.path.normpath(joined), real))
    inside = is_within(real, str(root))
    shown = display_path(root, given)
    judge = workspace.protection.reason
    return Target(given, real, inside, shown, named, leads, credentials, judge)


def _summary_path(root: Path, path: str) -> str:
    """An absolute, normalised path for a summary: relative when inside ``root``, one line."""
    return list_name(os.path.relpath(path, root) if is_within(path, str(root)) else path)


PATH_MAX = 4096
"""Linux's limit on a path handed to a system call, in bytes: a longer one names no file."""

_MAX_LINKS = 40
"""Symlinks one resolution follows at most, as the kernel's ``ELOOP`` limit."""


def real_path(path: str) -> tuple[str, list[str]]:
    """``os.path.realpath`` of the absolute ``path``, and every path the resolution went
    through: each component, each symlink and where it led, each ``..``.

    The same walk as :func:`os.path.realpath` (a missing component or a loop ends it, and the
    rest is joined as it stands), so that what is checked is what is opened; the steps let a
    caller refuse a route as well as an end (``/proc/self/cwd/..`` ends outside ``/proc``).
    """
    passed: list[str] = []
    seen: dict[str, str | None] = {}
    links = 0

    def join(current: str, rest: str) -> tuple[str, bool]:
        nonlocal links
        if rest.startswith("/"):
            current = "/"
        for index, name in enumerate(parts := rest.split("/")):
            if not name or name == ".":
                continue
            if name == "..":
                current = os.path.dirname(current)
                passed.append(current)
                continue
            step = os.path.join(current, name)
            passed.append(step)
            try:
                is_link = stat.S_ISLNK(os.lstat(step).st_mode)
            except OSError:
                is_link = False
            if not is_link:
                current = step
                continue
            known = seen.get(step, "")
            if known is None or links >= _MAX_LINKS:  # a loop: what is left stays as it is
                return os.path.join(step, *parts[index + 1 :]), False
            if known:
                current = known
                continue
            links += 1
            seen[step] = None
            current, whole = join(current, os.readlink(step))
            passed.append(current)
            if not whole:
                return os.path.join(current, *parts[index + 1 :]), False
            seen[step] = current
        return current, True

    return os.path.normpath(join("/", path)[0]), passed


def _expand_home(given: str) -> str:
    # Only "~" and "~/...": models write them meaning the home directory; "~user" is left alone.
    if given == "~" or given.startswith("~/"):
        return os.path.expanduser(given)
    return given


def check_arguments(tool: str, arguments: Mapping[str, Any], known: Sequence[str]) -> None:
    """Refuse an argument the tool does not take: ignoring it could do what was not meant."""
    for key in arguments:
        if key not in known:
            raise ToolError(
                f'invalid arguments: {tool} has no argument "{key}"; it takes {", ".join(known)}'
            )


def string_argument(
    arguments: Mapping[str, Any], name: str, *, required: bool = True, empty: bool = False
) -> str | None:
    """A string argument; None when optional and absent (null, or empty: models send ``""`` for
    "not given")."""
    value = arguments.get(name)
    if value is None or (value == "" and not required):
        if required:
            raise ToolError(f"invalid arguments: {name} is required")
        return None
    if not isinstance(value, str):
        raise ToolError(f"invalid arguments: {name} must be a string, not {_json_type(value)}")
    if not value and not empty:
        raise ToolError(f"invalid arguments: {name} is empty")
    return value


def int_argument(arguments: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    """An integer argument (``3.0`` accepted), at least ``minimum``; ``default`` when absent."""
    value = arguments.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ToolError(f"invalid arguments: {name} must be an integer, not {_json_type(value)}")
    if value < minimum:
        raise ToolError(f"invalid arguments: {name} must be at least {minimum}, not {value}")
    return value


def bool_argument(arguments: Mapping[str, Any], name: str, default: bool) -> bool:
    """A boolean argument; ``default`` when absent."""
    value = arguments.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(f"invalid arguments: {name} must be true or false, not {value!r}")
    return value


def counted(count: int, noun: str) -> str:
    """``1 line``, ``2,000 lines``, ``3 unreadable directories``: a count for a result."""
    if count == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{count:,} {plural}"


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    names |= {list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)


_UNLISTABLE = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff\u2028\u2029]")


def list_name(name: str) -> str:
    """A file name for a one-per-line list: as it is, or quoted when it has a line break.

    Quoted (``"a\\nb.txt"``, JSON-style escapes) when it holds a control character, a Unicode
    line separator, or bytes that are not UTF-8 (shown as ``\\xff``), so one name is one line
    and the result stays valid Unicode.
    """
    if not _UNLISTABLE.search(name):
        return name
    return '"' + _UNLISTABLE.sub(_escape, name.replace("\\", "\\\\").replace('"', '\\"')) + '"'


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _ESCAPES:
        return _ESCAPES[char]
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"
