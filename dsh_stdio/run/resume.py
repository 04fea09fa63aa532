"""Where a resumed session runs: the directory its header names, once a person said so
(SPEC 10.14, 12)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from dsh_core.session import SessionLog, cwd_key

from ..config import StartupError
from ..render import neutralise

__all__ = ["enter_its_directory"]


def enter_its_directory(log: SessionLog, err: TextIO, stdin: int) -> None:
    """Run a resumed session in the directory it was started in, once a person said so when
    that is not here: its tools and its recorded system prompt are about that directory.

    The directory comes only from a header dsh wrote (SPEC 10.14): dsh stores a session under
    the key of the directory its header names, so a header changed since (a command that
    could write ``DSH_HOME`` pointing ``cwd`` at ``/``) is found out and refused. A different
    directory is asked about on a terminal and refused on a pipe, with the way out; one that
    cannot be entered any more is refused too. Raises StartupError.
    """
    if log.path.parent.parent.name != cwd_key(log.cwd):
        log.close()
        raise StartupError(
            f"session {log.id} says it was started in {log.cwd}, but it is not stored as a "
            "session of that directory: its header was changed after dsh wrote it, and dsh "
            "does not run where it says; start a new session (dsh without -r)"
        )
    here = os.path.abspath(Path.cwd())
    if log.cwd == here:
        return
    elsewhere = f"session {log.id} was started in {log.cwd}"
    try:
        directory = os.open(log.cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        log.close()
        raise StartupError(
            f"{elsewhere}, which cannot be entered now; "
            "start a new session (dsh without -r), or restore that directory"
        ) from exc
    try:
        if not os.isatty(stdin) or not _confirmed(
            f"dsh: {elsewhere}: run there? [y/N]: ", stdin, err
        ):
            log.close()
            said = "" if os.isatty(stdin) else " (stdin is not a terminal: nobody to ask)"
            raise StartupError(
                f"{elsewhere}, not here{said}; to resume it there: cd {log.cwd} && dsh -r {log.id}"
            )
        os.fchdir(directory)  # the directory the person was asked about, not a later swap
    finally:
        os.close(directory)
    err.write(neutralise(f"dsh: {elsewhere}: running there") + "\n")


def _confirmed(question: str, stdin: int, err: TextIO) -> bool:
    """Ask ``question`` on the terminal (before any prompt exists: a line, as typed); whether
    the answer was yes. The default, Enter, is no."""
    err.write(neutralise(question))
    err.flush()
    try:
        answer = os.read(stdin, 1024).decode("utf-8", "replace").strip().lower()
    except OSError:
        return False
    return answer in ("y", "yes")
