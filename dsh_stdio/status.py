"""Exit statuses (SPEC section 3), and the one a turn of this run asks for."""

from __future__ import annotations

from dsh_core.session.events import TurnEnd

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_SIGHUP",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_USAGE",
    "turn_status",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""A turn of this run ended ``error`` or ``rejected``; or stdout could not be written."""
EXIT_INTERNAL = 1
"""A bug of ours, reported as one line."""
EXIT_REFUSED = 3
"""No turn failed, but dsh refused a call the model asked for because nobody could be asked
or the policy forbids it unattended (SPEC 15); a person's own no does not count."""
EXIT_USAGE = 2
"""A usage error or a startup failure."""
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
EXIT_SIGHUP = 129


def turn_status(end: TurnEnd) -> int:
    """The exit status one turn of this run asks for: ``error`` and ``rejected`` fail."""
    return EXIT_FAILED if end.kind in ("error", "rejected") else EXIT_OK
