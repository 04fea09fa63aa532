"""How ``bash`` runs in one session: the launcher (the sandbox, or none), chosen when a command
first needs it, so that a turn without commands loads none of the sandbox's code.

    launchers = SessionLaunchers(config, workspace, say=notice)
    BashTool(workspace, launcher=launchers.now)     # chosen at the first command
    launchers.state()                               # for /session
"""

from __future__ import annotations

from collections.abc import Callable

from dsh_core.tools import Launcher, Workspace

from ..config import Config

__all__ = ["SessionLaunchers"]


class SessionLaunchers:
    """The launcher of one session's commands, chosen once, at the first that needs it."""

    def __init__(
        self, config: Config, workspace: Workspace, *, on_unsandboxed: Callable[[str], None]
    ) -> None:
        self._config = config
        self._workspace = workspace
        self._on_unsandboxed = on_unsandboxed
        """Told once per choice that commands run without a sandbox, and how to get one
        (``--sandbox auto`` found none)."""
        self.chosen: Launcher | None = None

    def now(self) -> Launcher:
        """The launcher, chosen now if it was not yet (``--sandbox on`` without bwrap raises)."""
        if self.chosen is None:
            from dsh_core.trust.sandbox import choose_launcher

            self.chosen = choose_launcher(
                self._config.sandbox,
                workspace=self._workspace,
                network="network" in self._config.allow,
                on_chosen=self._said,
            )
        return self.chosen

    def _said(self, launcher: Launcher) -> None:
        from dsh_core.trust.sandbox import INSTALL_HINT, Bwrap

        if isinstance(launcher, Bwrap):
            return
        why = launcher.note.removeprefix("(not sandboxed: ").removesuffix(")")
        self._on_unsandboxed(f"commands run without a sandbox: {why}; to have one: {INSTALL_HINT}")

    def state(self) -> str:
        """For ``/session``: whether commands run sandboxed, and how."""
        from dsh_core.trust.sandbox import AutoSandbox

        launcher = self.now()
        if isinstance(launcher, AutoSandbox) and launcher.chosen is None:
            return f"auto: {launcher.note} (checked now; it is decided at the first command)"
        return launcher.note
