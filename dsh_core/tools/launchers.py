"""How a command line is started: as it is, or confined by a sandbox (SPEC section 8).

A :class:`Launcher` turns the argv of a shell into the argv that runs it; :data:`UNSANDBOXED`
runs it as it is, and :mod:`dsh_core.tools.sandbox` provides the bubblewrap one. Kept apart from
the ``bash`` tool so that choosing a launcher at startup imports nothing of running commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["UNSANDBOXED", "DeferredLauncher", "Launcher", "Sandbox", "Unsandboxed"]


class Launcher(Protocol):
    """How a command line is started: as it is, or inside a sandbox (bubblewrap: a read-only
    file system but for the working directory, no network)."""

    @property
    def note(self) -> str:
        """What the approval question says about it: ``(not sandboxed)``."""
        ...

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` (``[bwrap, ..., "--", *argv]``)."""
        ...


@dataclass(frozen=True, slots=True)
class Unsandboxed:
    """Runs the shell as it is."""

    note: str = "(not sandboxed)"

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return list(argv)


UNSANDBOXED = Unsandboxed()


@runtime_checkable
class Sandbox(Launcher, Protocol):
    """A launcher that confines the command: a call may leave it, and a failure is explained."""

    def explain(self, output: str) -> str:
        """The line that ends the result of a command that exited non-zero inside it: what it
        forbids, and, when ``output`` shows it stopped the command, how to ask for more."""
        ...


@runtime_checkable
class DeferredLauncher(Launcher, Protocol):
    """A launcher chosen at the first call (``--sandbox auto``: the probe runs only then)."""

    def resolve(self) -> Launcher:
        """The launcher to use, chosen on the first call and the same ever after."""
        ...
