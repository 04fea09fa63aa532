"""What the file tools share: paths resolved against the working directory, argument checks.

A path resolves against :attr:`Workspace.root` (absolute paths and ``~`` allowed), symlinks
followed; whatever lands outside the root is *outside*, which the approval policy asks about::

    target = resolve_path(workspace, arguments, "file_path")
    target.real      # absolute, symlinks followed: what is opened
    target.shown     # the path as given, relative when it is inside: for results
    target.summary   # where it leads, resolved, on one line: for the question (SPEC 10.10)
    target.outside   # () inside, else (target.real,): what Access lists

Names are never cleaned up here: the front door neutralises what it shows on a terminal. What
must stay on one line (a summary, the lists of ``glob`` and ``grep``) quotes a name with a line
break in it (:func:`list_name`), so nobody can be shown where a name ends but the next line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import ToolError

__all__ = [
    "Target",
    "bool_argument",
    "check_arguments",
    "counted",
    "display_path",
    "int_argument",
    "is_within",
    "list_name",
    "resolve_path",
    "string_argument",
]


@dataclass(frozen=True, slots=True)
class Target:
    """A path argument, resolved."""

    given: str
    """The argument as the model wrote it."""
    real: str
    """Absolute, symlinks followed (``os.path.realpath``): what the tool opens."""
    inside: bool
    """Whether ``real`` is the working directory or below it."""
    shown: str
    """For results: as given, or relative to the working directory when inside."""
    named: str
    """The path as named, ``..`` and ``.`` resolved but no link followed, as :attr:`summary`
    shows it: relative when inside, on one line."""
    leads: str
    """:attr:`real` as :attr:`summary` shows it: relative when inside, on one line."""

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
    root: Path, arguments: Mapping[str, Any], name: str, *, default: str | None = None
) -> Target:
    """The path argument ``name`` resolved; ToolError ``invalid arguments: ...`` if it is none.

    ``default`` is used when the argument is absent or null (``glob``'s and ``grep``'s ``path``).
    """
    given = string_argument(arguments, name, required=default is None)
    if given is None:
        assert default is not None
        given = default
    return resolve(root, given, name)


def resolve(root: Path, given: str, name: str = "path") -> Target:
    """``given`` resolved against ``root``; ToolError when no file can have that name."""
    if "\0" in given:
        raise ToolError(f"invalid arguments: {name} contains a NUL character")
    try:
        os.fsencode(given)
    except UnicodeError as exc:  # a lone surrogate from JSON: no file can be named that
        raise ToolError(f"invalid arguments: {name} is not a valid file name") from exc
    joined = os.path.join(root, _expand_home(given))
    try:
        real = os.path.realpath(joined)
    except (OSError, ValueError) as exc:
        raise ToolError(f"invalid arguments: cannot resolve {name} {given!r}") from exc
    named, leads = (_summary_path(root, path) for path in (os.path.normpath(joined), real))
    inside = is_within(real, str(root))
    return Target(given, real, inside, display_path(root, given), named, leads)


def _summary_path(root: Path, path: str) -> str:
    """An absolute, normalised path for a summary: relative when inside ``root``, one line."""
    return list_name(os.path.relpath(path, root) if is_within(path, str(root)) else path)


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
