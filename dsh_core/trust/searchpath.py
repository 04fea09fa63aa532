"""``PATH`` as the shell searches it, and which of its directories a command could have written.

    for directory in search_path("/w/.venv/bin:bin:/usr/bin", Path("/w")):
        directory.entry, directory.resolved, directory.writable, directory.program("git")
    # (".../.venv/bin", "/w/.venv/bin", True, ...), ("bin", "/w/bin", True, ...),
    # ("/usr/bin", "/usr/bin", False, "/usr/bin/git")

One rule for every lookup dsh does (the shell and bwrap it starts, an MCP server's program, the
question's note on a planted program): a relative or empty entry is the working directory's
(whatever it is when the lookup runs: never trusted), and one that resolves under the working
directory is one a sandboxed command could have put a program in. What each caller does with a
writable directory is its own: pass it over, drop it, or say so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .policy import under

__all__ = ["SearchDirectory", "search_path"]


@dataclass(frozen=True, slots=True)
class SearchDirectory:
    """One ``PATH`` entry."""

    entry: str
    """As ``PATH`` spells it."""
    resolved: str
    """Resolved; a relative or empty entry joined to the working directory first."""
    writable: bool
    """Relative, or under the working directory: a command could have put a program there."""

    def program(self, name: str) -> str | None:
        """The executable ``name`` here, as ``PATH`` spells it (``/usr/bin/git``), or None."""
        here = os.path.join(self.resolved, name)
        if os.path.isfile(here) and os.access(here, os.X_OK):
            return os.path.join(self.entry or ".", name)
        return None


def search_path(path: str, root: Path | None) -> list[SearchDirectory]:
    """``path``'s directories in order; ``root`` is the working directory (resolved), None for
    the current one when no directory is writable but the relative ones."""
    base = os.getcwd() if root is None else str(root)
    directories = []
    for entry in path.split(os.pathsep):
        resolved = os.path.realpath(os.path.join(base, entry or "."))
        relative = not os.path.isabs(entry)
        writable = relative or (root is not None and under(resolved, root))
        directories.append(SearchDirectory(entry, resolved, writable))
    return directories
