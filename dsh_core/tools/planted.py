"""Which programs a command line would take from the working directory (SPEC 10.1, 10.10).

    planted("git status", "/w/.venv/bin:/usr/bin", Path("/w"))
    # ["git is ./.venv/bin/git, a file in the working directory"]

A sandboxed command writes the working directory; a program it put there (an activated
``.venv/bin/git``) is what the shell runs for ``git`` at the next command. Inside the sandbox
that is the sandbox's business; outside it (``sandbox: false``, or no sandbox at all) the
question must say so, since ``$ git status`` reads as the system's git (SPEC 10.10).

Every word of the command that names a program is looked up as the shell does (the first
``PATH`` entry holding an executable of that name; a builtin before any), not only the first
word: ``true && git status`` runs the same ``git``. A word that is only an argument may be
named too (``echo git``): saying too much is the safe side. A path (``./run.sh``,
``.venv/bin/pytest``) as the first word is named when it leads inside.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .trust import under

__all__ = ["planted"]

_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
"""A program name as a command line may hold one (no slash: that is a path)."""
_WORDS = re.compile(r"[^A-Za-z0-9_./+-]+")
"""What separates words, for this purpose: blanks, quotes, operators, expansions."""
_MAX_NAMES = 1000
"""Distinct names looked up at most (a huge command stays cheap to ask about)."""

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
    ``path`` or as its first word: ``git is ./.venv/bin/git, a file in the working directory``.

    Empty when ``root`` is ``/``: everything is inside it, and the note says so already.
    """
    if root == Path("/"):
        return []
    # Relative entries (and an empty one) are the working directory's, as for the shell. The
    # directories are resolved, not the programs: a venv's python is a link out, yet a name
    # in the working directory, which a command can change.
    directories = [
        os.path.realpath(os.path.join(root, entry or ".")) for entry in path.split(os.pathsep)
    ]
    words = [word for word in _WORDS.split(command) if word]
    found: list[str] = []
    if words and "/" in words[0]:
        where = os.path.realpath(os.path.join(root, os.path.dirname(words[0])))
        target = os.path.join(where, os.path.basename(words[0]))
        if under(target, root) and os.path.isfile(target):
            found.append(_line(words[0], target, root))
    if not any(under(directory, root) for directory in directories):
        return found  # the common case: no PATH entry a command could have written
    names = dict.fromkeys(w for w in words if _NAME.fullmatch(w) and w not in _BUILTINS)
    for name in list(names)[:_MAX_NAMES]:
        for directory in directories:
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                if under(directory, root):
                    found.append(_line(name, candidate, root))
                break
    return found


def _line(word: str, path: str, root: Path) -> str:
    return f"{word} is ./{os.path.relpath(path, root)}, a file in the working directory"
