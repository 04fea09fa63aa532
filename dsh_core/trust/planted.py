"""Which programs a command line would take from the working directory (SPEC 10.1, 10.10).

    planted("git status", "/w/.venv/bin:/usr/bin", Path("/w"))
    # ["git is ./.venv/bin/git, a file in the working directory"]
    planted('g""it status', "/w/.venv/bin:/usr/bin", Path("/w"))
    # ["PATH holds ./.venv/bin, in the working directory"]

A sandboxed command writes the working directory; a program it put there (an activated
``.venv/bin/git``) is what the shell runs for ``git`` at the next command. Inside the sandbox
that is the sandbox's business; outside it (``sandbox: false``, or no sandbox at all) the
question must say so, since ``$ git status`` reads as the system's git (SPEC 10.10).

Every word of the command (and every part of one between ``=``, ``:`` and ``,``:
``--pre=./x``) is looked at, not only the first: ``true && git status`` runs the same ``git``,
``FOO=1 ./run.sh`` the same ``./run.sh``. A name is looked up as the shell does (the first
``PATH`` entry holding an executable of that name; a builtin before any), and named when that
directory is inside or the program there is a link into it (``npm link``, pipx); a path
(``./run.sh``, ``.venv/bin/pytest``) is named when it leads to an executable file inside. A
word that is only an argument may be named too (``echo git``): saying too much is the safe side.

The words are taken as they are written, so a command whose words the shell changes first
(quotes, escapes, expansions, globs: ``g""it``, ``$(printf gi)t``, ``g?t``), or that changes
where the shell looks (``cd``, ``source``, ``hash``, ``alias``, ``enable``), cannot be looked
up: when ``PATH`` holds a directory inside, the question names the directory itself instead.
A command that mentions ``PATH`` may set it to anything: the question says so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .policy import under
from .searchpath import SearchDirectory, search_path

__all__ = ["planted"]

_LITERAL = re.compile(r"[A-Za-z0-9_./+=,:@%^#!{} \t\n;&|()<>-]*")
"""A command whose words are what they look like: no quote, escape, expansion or glob."""
_BRACES = re.compile(r"[{}]\S|\S[{}]")
"""A brace in a word (``{git,x}``, brace expansion); ``{`` and ``}`` alone are a group."""
_SEPARATORS = re.compile(r"[ \t\n;&|()<>]+")
"""What separates words (blanks and operators)."""
_PARTS = re.compile(r"[=:,]")
"""What separates the parts of a word that may each be a program (``--pre=./x``, ``a:b``)."""
_LOOKUP_CHANGERS = frozenset({"cd", "pushd", "popd", ".", "source", "hash", "alias", "enable"})
"""Builtins after which a name or a relative path is not what it was at the start."""
_MAX_WORDS = 1000
"""Distinct words looked up at most (a huge command stays cheap to ask about)."""

_BUILTIN_NAMES = """
    . : [ alias bg bind break builtin caller cd command compgen complete compopt continue
    declare dirs disown echo enable eval exec exit export false fc fg getopts hash help history
    jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return set
    shift shopt source suspend test times trap true type typeset ulimit umask unalias unset wait
"""
_BUILTINS = frozenset(_BUILTIN_NAMES.split())
"""bash's builtins (``compgen -b``): the shell runs these whatever ``PATH`` holds."""


def planted(command: str, path: str, root: Path) -> list[str]:
    """One line per program ``command`` would run from inside ``root`` (resolved), by ``PATH``
    ``path`` or by a path: ``git is ./.venv/bin/git, a file in the working directory``; a line
    per ``PATH`` directory inside ``root`` when the words cannot be looked up as written.

    Empty when ``root`` is ``/``: everything is inside it, and the note says so already.
    """
    if root == Path("/"):
        return []
    directories = search_path(path, root)
    writable = [d for d in directories if d.writable]
    words = [word for word in _SEPARATORS.split(command) if word]
    parts = dict.fromkeys(part for word in words for part in (word, *_PARTS.split(word)) if part)
    found: list[str] = []
    for part in list(parts)[:_MAX_WORDS]:
        if "/" in part:
            found += _path(part, root)
        elif part not in _BUILTINS:
            found += _name(part, directories, root)
    literal = (
        _LITERAL.fullmatch(command) is not None
        and not _BRACES.search(command)
        and _LOOKUP_CHANGERS.isdisjoint(words)
        and len(parts) <= _MAX_WORDS
    )
    if not literal:
        found += [_directory(d, root) for d in writable]
    if "PATH" in parts:
        found.append("the command sets PATH")
    return list(dict.fromkeys(found))


def _path(word: str, root: Path) -> list[str]:
    """``word``'s line if it leads to an executable file inside ``root``."""
    # The directory is resolved, not the program: a venv's python is a link out, yet a name
    # in the working directory, which a command can change.
    where = os.path.realpath(os.path.join(root, os.path.dirname(word)))
    target = os.path.join(where, os.path.basename(word))
    inside = under(target, root) and os.path.isfile(target) and os.access(target, os.X_OK)
    return [_line(word, target, root)] if inside else []


def _name(name: str, directories: list[SearchDirectory], root: Path) -> list[str]:
    """``name``'s line if the first directory with that program lies inside ``root``, or the
    program there is a link into ``root`` (``ln -s``, ``npm link``, pipx: what runs is the file
    a sandboxed command can rewrite)."""
    for directory in directories:
        if directory.program(name) is not None:
            here = os.path.join(directory.resolved, name)
            if under(directory.resolved, root):
                return [_line(name, here, root)]
            target = os.path.realpath(here)
            return [_line(name, target, root)] if under(target, root) else []
    return []


def _directory(directory: SearchDirectory, root: Path) -> str:
    if os.path.isabs(directory.entry):
        return f"PATH holds {_shown(directory.resolved, root)}, in the working directory"
    return f"PATH holds {directory.entry or '.'}, relative to the working directory"


def _shown(path: str, root: Path) -> str:
    relative = os.path.relpath(path, root)
    return "." if relative == "." else f"./{relative}"


def _line(word: str, path: str, root: Path) -> str:
    return f"{word} is {_shown(path, root)}, a file in the working directory"
