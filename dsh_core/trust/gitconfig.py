"""What a git configuration file makes git run, and which files of the working tree it names.

    config = read_config(Path(".git/config"), home=Path.home())
    config.runs_code()                 # ["core.fsmonitor", "alias.st"]: keys git runs as code
    config.named_paths(Path("."))      # [NamedPath(.githooks, "core.hooksPath in ...", True)]

Git runs commands from its configuration at the user's next ``git`` (``core.fsmonitor`` at
``git status``, ``core.pager`` at ``git log``, a ``!`` alias, a filter's ``clean``), takes its
hooks from ``core.hooksPath``, and reads more configuration from ``include.path`` and
``includeIf.<condition>.path``. A command whose words name a file in the working tree
(``core.fsmonitor = ./tools/watch.sh``), a hooks directory there (husky's ``.husky``) or an
included file there is code the model could rewrite for git to run outside the sandbox: those
are the :meth:`GitConfig.named_paths` that :mod:`.policy` keeps.

The reader follows git's syntax (sections ``[core]``, ``[remote "origin"]``, the old
``[branch.main]``; ``;`` and ``#`` comments; quotes, escapes and ``\\`` line continuations;
a variable on the header's line) closely enough for files people and git write. It follows
every include whatever its condition (more is kept, never less), up to git's own depth of 10.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..fileio import read_regular

__all__ = ["BOOLEAN_WORDS", "Entry", "GitConfig", "NamedPath", "read_config"]

MAX_CONFIG_BYTES = 1024 * 1024
"""Bytes of one file read at most: configuration files are small; a huge one is not parsed."""

MAX_INCLUDE_DEPTH = 10
"""git's own limit on nested includes."""

BOOLEAN_WORDS = frozenset(("true", "false", "yes", "no", "on", "off", "1", "0", ""))
"""Values that are a switch, not a command (``core.fsmonitor = true``: git's own daemon)."""

_COMMANDS = re.compile(
    r"""
    core\.(?:fsmonitor|sshcommand|pager|editor|askpass|gitproxy)
    | sequence\.editor | diff\.external | diff\..+\.(?:textconv|command)
    | merge\..+\.driver | mergetool\..+\.cmd | difftool\..+\.cmd
    | filter\..+\.(?:clean|smudge|process)
    | gpg\.program | gpg\..+\.program | credential\.(?:.+\.)?helper
    | pager\..+ | alias\..+ | interactive\.difffilter | web\.browser
    | browser\..+\.(?:cmd|path) | man\..+\.(?:cmd|path)
    | remote\..+\.(?:uploadpack|receivepack) | uploadpack\.packobjectshook
    | sendemail\.(?:.+\.)?(?:smtpserver|tocmd|cccmd|headercmd)
    | core\.hookspath | include\.path | includeif\..*\.path
    """,
    re.VERBOSE,
)
"""Keys (section and variable lower-cased, subsection as written) whose value git runs, or
that decide where git finds what it runs (hooks, more configuration)."""

_PATH_DIRECTORY_KEYS = frozenset(("core.hookspath",))
_INCLUDE = re.compile(r"include\.path|includeif\..*\.path")


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``key = value`` line."""

    key: str
    """``section.variable`` or ``section.subsection.variable``; section and variable
    lower-cased, as git compares them."""
    value: str
    file: Path
    """The file it was read from (an included one, perhaps)."""


@dataclass(frozen=True, slots=True)
class NamedPath:
    """A path a configuration names, where git would run or read what is there."""

    path: Path
    """Absolute, normalised (symlinks not followed: the caller resolves)."""
    reason: str
    """``core.hooksPath in .git/config``: which key, in which file."""
    directory: bool
    """A hooks directory (else a file: a program, an included configuration)."""


@dataclass(frozen=True, slots=True)
class GitConfig:
    """What one configuration file says, its includes followed."""

    entries: tuple[Entry, ...] = ()
    included: tuple[Path, ...] = field(default=())
    """Every file an include names (existing or not), absolute."""

    def runs_code(self) -> list[str]:
        """The keys that make git run something or look for it elsewhere, as written (once)."""
        found: dict[str, None] = {}
        for entry in self.entries:
            if _runs(entry):
                found.setdefault(entry.key, None)
        return list(found)

    def named_paths(self, top: Path, home: Path | None = None) -> list[NamedPath]:
        """The paths the configuration names, for a repository whose working tree is ``top``.

        ``core.hooksPath`` (relative to ``top``, where git runs hooks), every included file
        (relative to the file that includes it), and every word with a ``/`` of a command
        (relative to ``top``, where git runs them): ``./tools/watch.sh``, ``sh tools/x``.
        """
        named: list[NamedPath] = []
        for entry in self.entries:
            if not _runs(entry):
                continue
            shown = f"{entry.key} in {entry.file}"
            if _INCLUDE.fullmatch(entry.key):
                path = _expand(entry.value, entry.file.parent, home)
                if path is not None:
                    named.append(NamedPath(path, shown, directory=False))
                continue
            if entry.key in _PATH_DIRECTORY_KEYS:
                path = _expand(entry.value, top, home)
                if path is not None:
                    named.append(NamedPath(path, shown, directory=True))
                continue
            for word in _path_words(entry.value):
                path = _expand(word, top, home)
                if path is not None:
                    named.append(NamedPath(path, shown, directory=False))
        return named


def _runs(entry: Entry) -> bool:
    if not _COMMANDS.fullmatch(entry.key):
        return False
    switch = entry.key == "core.fsmonitor" or entry.key.startswith("pager.")
    if switch and entry.value.strip().lower() in BOOLEAN_WORDS:
        return False  # git's own daemon, or the pager on or off: no command
    return not (entry.key.startswith("alias.") and not entry.value.lstrip().startswith("!"))


def _expand(value: str, base: Path, home: Path | None) -> Path | None:
    """``value`` as git reads a path: ``~/`` from the home directory, relative from ``base``."""
    value = value.strip()
    if not value:
        return None
    if value == "~" or value.startswith("~/"):
        if home is None:
            return None
        value = str(home) + value[1:]
    elif value.startswith("~"):
        return None  # ~user: another user's home, outside any working directory we keep
    return Path(os.path.normpath(base / value))


def _path_words(command: str) -> Iterator[str]:
    """The words of a shell command that look like paths (hold a ``/``)."""
    command = command.lstrip().removeprefix("!")
    try:
        words = shlex.split(command, comments=False)
    except ValueError:  # an unbalanced quote: git's shell would fail, but look anyway
        words = command.split()
    for word in words:
        if word.startswith("-") and "=" in word:
            word = word.partition("=")[2]  # --option=/path
        if "/" in word:
            yield word


def read_config(path: Path, *, home: Path | None = None) -> GitConfig:
    """The entries of the configuration file ``path`` and of the files it includes.

    A file that is missing, unreadable, not a regular file or too large reads as empty. Read
    again only when one of the files changed (it is asked before and after every command).
    """
    path = Path(os.path.abspath(path))
    cached = _CACHE.get((path, home))
    if cached is not None and cached[0] == _signature((path, *cached[1].included)):
        return cached[1]
    settled = time.time_ns() - _RACY_NS
    entries: list[Entry] = []
    included: list[Path] = []
    _read(path, home, entries, included, depth=0)
    config = GitConfig(tuple(entries), tuple(included))
    signature = _signature((path, *included))
    if all(item is None or item[2] < settled for item in signature):
        _CACHE[(path, home)] = (signature, config)
    return config


_Signature = tuple[tuple[int, int, int, int] | None, ...]

_CACHE: dict[tuple[Path, Path | None], tuple[_Signature, GitConfig]] = {}
"""What each file read last held, with the signature of the files it was read from."""

_RACY_NS = 2_000_000_000
"""A file changed this recently is not cached: a change within the same tick of the file
system's clock keeps the same times (git's "racy git" problem)."""


def _signature(paths: tuple[Path, ...]) -> _Signature:
    """What says a file changed (or appeared, or went): its inode, size and times."""
    signature: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            signature.append(None)
            continue
        signature.append((status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns))
    return tuple(signature)


def _read(
    path: Path, home: Path | None, entries: list[Entry], included: list[Path], depth: int
) -> None:
    text = _text(path)
    if text is None:
        return
    for key, value in _parse(text):
        entry = Entry(key, value, path)
        entries.append(entry)
        if _INCLUDE.fullmatch(key) and depth < MAX_INCLUDE_DEPTH:
            target = _expand(value, path.parent, home)
            if target is not None and target not in included:
                included.append(target)
                _read(target, home, entries, included, depth + 1)


def _text(path: Path) -> str | None:
    data = read_regular(path, MAX_CONFIG_BYTES + 1)
    if data is None or len(data) > MAX_CONFIG_BYTES:
        return None
    return data.decode("utf-8", "surrogateescape")


_HEADER = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\\n]|\\.)*)")?\s*\]')
_NAME = re.compile(r"\s*([A-Za-z][A-Za-z0-9-]*)\s*")
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}


def _parse(text: str) -> Iterator[tuple[str, str]]:
    """(key, value) for each variable in a configuration file's ``text``, in order."""
    section = ""
    position = 0
    end = len(text)
    while position < end:
        header = _HEADER.match(text, position)
        if header is not None:
            name, subsection = header.groups()
            if subsection is not None:
                subsection = re.sub(r"\\(.)", r"\1", subsection)
                section = f"{name.lower()}.{subsection}"
            elif "." in name:  # [branch.main]: the old form, its subsection lower-cased
                head, _, rest = name.partition(".")
                section = f"{head.lower()}.{rest.lower()}"
            else:
                section = name.lower()
            position = header.end()
            continue
        variable = _NAME.match(text, position)
        line_end = text.find("\n", position)
        line_end = end if line_end < 0 else line_end
        if variable is None or not section or variable.end() > line_end + 1:
            position = line_end + 1  # a comment, a blank line, or a line git would reject
            continue
        key = f"{section}.{variable.group(1).lower()}"
        position = variable.end()
        if position < end and text[position] == "=":
            value, position = _value(text, position + 1)
        else:
            value = "true"  # a bare name is a switch that is on
            position = line_end + 1
        yield key, value


def _value(text: str, position: int) -> tuple[str, int]:
    """A value starting at ``position`` (after the ``=``): (value, where the next line starts)."""
    out: list[str] = []
    pending = ""  # whitespace kept only if more value follows it
    quoted = False
    end = len(text)
    while position < end:
        char = text[position]
        position += 1
        if char == "\n":
            if not quoted:
                break
            out.append(pending + char)  # git fails on this; keep reading as best we can
            pending = ""
            continue
        if char == "\\":
            # The whitespace before a backslash is kept, a line continuation's too (git).
            out.append(pending)
            pending = ""
            following = text[position] if position < end else "\n"  # the end ends a line
            position += 1
            if following != "\n":
                out.append(_ESCAPES.get(following, following))
            continue  # after a line continuation: the value goes on
        if char == '"':
            quoted = not quoted
            continue
        if not quoted and char in "#;":
            newline = text.find("\n", position)
            position = end if newline < 0 else newline + 1
            break
        if not quoted and char in " \t\r":
            if out:
                pending += char
            continue
        out.append(pending + char)
        pending = ""
    return "".join(out), position
