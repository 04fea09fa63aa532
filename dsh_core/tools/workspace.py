"""Where tools work: the working directory, the session's output files, the child environment.

One :class:`Workspace` per conversation: the files read in it (``write`` and ``edit`` refuse a
file that was not read, or that changed on disk since) belong to that session, and a fresh
session (``/new``) starts with none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SECRET_VARIABLES", "Workspace", "child_environment"]

SECRET_VARIABLES = ("DEEPSEEK_API_KEY",)
"""Variables never passed to a child process."""


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without the API key.

    The key is dropped under any name: a variable whose value holds it is removed too, so a
    user's ``export OPENAI_API_KEY=$DEEPSEEK_API_KEY`` does not hand it to a command either.
    """
    source = os.environ if environ is None else environ
    secrets = [source[name] for name in SECRET_VARIABLES if source.get(name, "").strip()]
    return {
        name: value
        for name, value in source.items()
        if name not in SECRET_VARIABLES and not any(s.strip() in value for s in secrets)
    }


@dataclass
class Workspace:
    """The working directory tools act in, and what they share within one session."""

    root: Path
    """The working directory, resolved (symlinks followed): what "inside" means."""
    output_dir: Path
    """Where a command's whole output goes when the result is cut (created 0700 on demand)."""
    environment: dict[str, str] = field(default_factory=child_environment)
    """The environment of every child process: no API key."""

    @classmethod
    def at(cls, cwd: Path, output_dir: Path) -> Workspace:
        return cls(Path(os.path.realpath(cwd)), output_dir)
