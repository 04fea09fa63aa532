"""The model a run talks to: the DeepSeek adapter the flags describe."""

from __future__ import annotations

from dsh_core.clock import Clock
from dsh_core.model.deepseek import CONNECT_TIMEOUT, IDLE_TIMEOUT, READ_TIMEOUT, DeepSeekAdapter

from ..config import Config

__all__ = ["deepseek_adapter"]


def deepseek_adapter(config: Config, *, terminal: bool, clock: Clock) -> DeepSeekAdapter:
    """The adapter for ``config``: its base URL, key and timeouts."""
    wait = config.timeout  # one knob for every wait; connecting keeps its own cap
    return DeepSeekAdapter(
        base_url=config.base_url,
        api_key=config.api_key,
        clock=clock,
        connect_timeout=CONNECT_TIMEOUT if wait is None else min(CONNECT_TIMEOUT, wait),
        read_timeout=READ_TIMEOUT if wait is None else wait,
        idle_timeout=IDLE_TIMEOUT if wait is None else wait,
        # On a pipe reasoning is hidden: a stream cut after reasoning only showed nothing, and
        # may be retried. A terminal shows it; so do --show-reasoning and --json.
        reasoning_shown=terminal or config.show_reasoning or config.json,
    )
