"""How a command line is started: as it is, or confined by a sandbox (SPEC section 8).

A :class:`Launcher` turns the argv of a shell into a :class:`Launch`, the command line that is
run and what goes with it; :data:`UNSANDBOXED` runs it as it is, and
:mod:`dsh_core.trust.sandbox` provides the bubblewrap one. Kept apart from the ``bash`` tool so
that choosing a launcher at startup imports nothing of running commands.

    with launcher.launch(["bash", "-c", command]) as launch:
        completion = await run_child(launch.argv, ..., pass_fds=launch.pass_fds,
                                     signal_group=launch.signal_group)
    launch.notes        # read after the block: what the launcher did once the command ended
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["UNSANDBOXED", "DeferredLauncher", "Launch", "Launcher", "Sandbox", "Unsandboxed"]


def _own_group() -> int | None:
    return None


@dataclass
class Launch:
    """One command's start: its command line, and what goes with it."""

    argv: list[str]
    """What is run: the shell's argv, or a sandbox's command line ending in it."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the command inherits, under the same numbers (a sandbox's set-up)."""
    signal_group: Callable[[], int | None] = _own_group
    """The process group that gets SIGINT, SIGTERM and SIGHUP, when it is not the command's own
    (bubblewrap puts the sandbox in a session of its own); None: the command's own group."""
    notes: list[str] = field(default_factory=list)
    """Lines for the result, added when the launch context exits (what the sandbox undid)."""
    escaped: list[str] = field(default_factory=list)
    """What the command left that the sandbox could not undo, added when the launch context
    exits: the run must stop (SPEC 10.12, ``SANDBOX_ESCAPE``)."""


class Launcher(Protocol):
    """How a command line is started: as it is, or inside a sandbox (bubblewrap: a read-only
    file system but for the working directory, no network)."""

    @property
    def note(self) -> str:
        """What the approval question says about it: ``(not sandboxed)``."""
        ...

    def launch(self, argv: Sequence[str]) -> contextlib.AbstractContextManager[Launch]:
        """A context for running ``argv`` once: set up on entry, cleaned up on exit."""
        ...


@dataclass(frozen=True, slots=True)
class Unsandboxed:
    """Runs the shell as it is."""

    note: str = "(not sandboxed)"

    def launch(self, argv: Sequence[str]) -> contextlib.AbstractContextManager[Launch]:
        return contextlib.nullcontext(Launch(list(argv)))


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
