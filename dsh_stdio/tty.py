"""The terminal: standard input's descriptor, echo during a turn, and whether to use colour.

A run reads and writes through one :class:`Streams`: the process's own (``dsh``), or a test's
(``tests/harness.py`` runs the front door in-process over a file and in-memory text).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

__all__ = [
    "STDIN",
    "Streams",
    "colour_wanted",
    "controlling_terminal",
    "discard_typed_ahead",
    "quiet_terminal",
]

STDIN = 0
"""Standard input's descriptor: read with os.read, never through sys.stdin's buffer."""


@dataclass(frozen=True, slots=True)
class Streams:
    """Where one run reads its input and writes its output."""

    stdin: int
    """Input's descriptor: a terminal, a pipe or a file, read with ``os.read``."""
    out: TextIO
    """Answers and outcome lines (the transcript), or ``--json`` lines."""
    err: TextIO
    """Notices, warnings, the question of a one-shot run, startup failures."""

    @classmethod
    def of_process(cls) -> Streams:
        """The process's own: descriptor 0, ``sys.stdout`` and ``sys.stderr``."""
        assert sys.stdout is not None and sys.stderr is not None
        return cls(STDIN, sys.stdout, sys.stderr)


@contextlib.contextmanager
def quiet_terminal(fd: int) -> Iterator[None]:
    """While a turn runs, the terminal does not echo what is typed.

    Otherwise Ctrl-C shows as ``^C`` in front of the outcome line and text typed ahead lands
    in the middle of the answer. Keys still count: Ctrl-C still sends SIGINT, and what was
    typed ahead waits for the next prompt, Ctrl-D too (the line discipline's end-of-file is
    off: it would take the key as the end of a read nobody makes, and the key would be lost).
    A no-op when ``fd`` is not a terminal.
    """
    if not os.isatty(fd):
        yield
        return
    import termios

    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)  # lflags
    quiet[6] = list(quiet[6])  # control characters
    quiet[6][termios.VEOF] = bytes([os.fpathconf(fd, "PC_VDISABLE")])
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def discard_typed_ahead(fd: int) -> None:
    """Throw away what was typed and not read yet, so that it cannot answer a question."""
    if os.isatty(fd):
        import termios

        with contextlib.suppress(OSError):
            termios.tcflush(fd, termios.TCIFLUSH)


def colour_wanted(stream: TextIO) -> bool:
    """Dim text only on a real terminal that can show it, and never against NO_COLOR."""
    return (
        stream.isatty()
        and os.environ.get("TERM", "dumb") != "dumb"
        and "NO_COLOR" not in os.environ
    )


def controlling_terminal(err: TextIO) -> TextIO | None:
    """``/dev/tty``, opened for a question, when stdin is not a terminal but a person is at one
    (``git diff | dsh "fix it"`` typed in a shell): ``err`` is a terminal and the process has a
    controlling terminal. None without one (cron, CI, ``setsid``), or when it cannot be opened:
    then nothing can be asked, as before (SPEC 15). ``sudo`` and ``ssh`` ask there likewise.
    """
    try:
        if not err.isatty():
            return None
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):  # ENXIO: no controlling terminal
        return None
    try:
        if not os.isatty(fd):
            raise OSError("/dev/tty is not a terminal")
        # Written to as a text stream; answers are read from its descriptor (os.read).
        return open(fd, "w", buffering=1, encoding="utf-8", errors="replace")
    except OSError:
        os.close(fd)
        return None
