"""``--max-cost``: a session's spending limit, checked before each request (SPEC 15).

    budget = CostLimit(0.50, tally, price=lambda model: price_of(model, overrides))
    Conversation(model, log, model_name=..., budget=budget)

Before a step's request (and again after a compaction, whose summary cost money too) the loop
asks :meth:`CostLimit.refuses`: when what the session has spent, plus what the next request is
estimated to cost, passes the limit, the turn ends ``max-cost`` *before* the request is sent,
and the reason names the limit and the spend. The estimate (``estimate_request``):

- input: the conversation's size now (:attr:`~dsh_core.agent.compaction.WindowKeeper.size`:
  the last request's ``prompt_tokens`` and an estimate of what was added since). The part the
  last request already carried is priced as a cache hit (dsh keeps the prefix byte-stable, and
  DeepSeek serves such a prefix from its cache), the rest as a miss;
- output: the mean output of the session's answered requests (none before the first).

A model without a known price cannot be budgeted: its turn stops, saying how to give it one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from ..model.prices import MILLION, Prices, dollars

if TYPE_CHECKING:
    from ..session.events import SessionEvent
    from ..session.tally import Tally
    from .loop import Conversation

__all__ = ["Budget", "CostLimit", "estimate_request"]


class Budget(Protocol):
    """What the loop asks before each request."""

    def refuses(self, conversation: Conversation) -> str | None:
        """Why the session cannot afford the next request (the turn ends ``max-cost``)."""


def estimate_request(size: int, cached: int, output: int, prices: Prices) -> float:
    """Dollars a request of ``size`` input tokens, ``cached`` of them likely a cache hit, and
    ``output`` tokens of answer would cost."""
    hit = min(cached, size)
    return (
        hit * prices.cache_hit + (size - hit) * prices.cache_miss + output * prices.output
    ) / MILLION


class CostLimit:
    """``--max-cost USD``: the session may not spend more than ``limit`` dollars.

    Without a limit it refuses nothing, and keeps :attr:`tally` folded before each request:
    a compaction lets go of the events it replaced, and the tally must have read them first.
    """

    def __init__(
        self, limit: float | None, tally: Tally, price: Callable[[str], Prices | None]
    ) -> None:
        self.limit = limit
        self.tally = tally
        """The session's spend (the same tally the usage line and the result line read)."""
        self._price = price

    def refuses(self, conversation: Conversation) -> str | None:
        return self.refuses_next(
            conversation.log.events, conversation.model_name, conversation.keeper.size
        )

    def refuses_next(self, events: Sequence[SessionEvent], name: str, size: int) -> str | None:
        """Why a request of ``size`` input tokens to model ``name`` may not be sent, with the
        session's ``events`` so far; None when it may."""
        tally = self.tally
        tally.update(events)
        if self.limit is None:
            return None
        prices = self._price(name)
        spent = tally.session.cost
        limit = f"the limit is {dollars(self.limit)}"
        if prices is None or spent is None:
            return (
                f"{limit}, and the cost of model {name} is not known "
                f"(next: give its prices in config.toml [models.{name}])"
            )
        answered = tally.requests
        output = tally.session.completion_tokens // answered if answered else 0
        estimate = estimate_request(size, tally.last_prompt, output, prices)
        if spent + estimate <= self.limit:
            return None
        return (
            f"{limit}, {dollars(spent)} spent, and the next request would cost about "
            f"{dollars(estimate)} (next: raise --max-cost)"
        )
