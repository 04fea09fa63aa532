"""A session's checkpoints (SPEC 14): where the store is, whether they are on, and opening them.

checkpoints, off = open_checkpoints(config, log, workspace, warn)   # off: why not, or None
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_core.chain import error_chain
from dsh_core.errors import HarnessError
from dsh_core.session import SessionLog
from dsh_core.trust.workspace import Workspace

from ..config import Config

if TYPE_CHECKING:
    from dsh_core.checkpoints.turns import Checkpoints

__all__ = ["CHECKPOINTS_DIR", "checkpoints_off", "open_checkpoints"]

CHECKPOINTS_DIR = "checkpoints"
"""In ``DSH_HOME``: the checkpoint store (SPEC 14)."""


def checkpoints_off(config: Config, root: Path) -> str | None:
    """Why a session here takes no checkpoints; None when it does."""
    if not config.checkpoints:
        return "off (--no-checkpoints, or checkpoints = false in config.toml)"
    home = os.path.realpath(config.home)
    if os.path.commonpath([str(root), home]) == home:
        return f"off: the working directory is in DSH_HOME ({home}), where the store is"
    return None


def open_checkpoints(
    config: Config,
    log: SessionLog,
    workspace: Workspace,
    warn: Callable[[tuple[str, ...]], None],
) -> tuple[Checkpoints | None, str | None]:
    """The session's checkpoints and None, or None and why they are off (``--no-checkpoints``
    or the configuration file, or the working directory is in ``DSH_HOME``, where the store
    is). A resumed session's turn left open by a crash gets its changes recorded now."""
    off = checkpoints_off(config, workspace.root)
    if off is not None:
        return None, off
    from dsh_core.checkpoints.turns import Checkpoints

    checkpoints = Checkpoints(
        config.home / CHECKPOINTS_DIR,
        str(workspace.root),
        session=log.id,
        fences=lambda directory: workspace.credentials.within(directory),
    )
    if log.events:
        try:
            checkpoints.settle(log)
        except (HarnessError, OSError) as exc:
            warn((f"what the interrupted turn changed is not known: {error_chain(exc)}",))
    return checkpoints, None
