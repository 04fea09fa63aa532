"""What tokens cost: each model's prices, and a request's cost in US dollars (SPEC 15).

    prices = price_of("deepseek-v4-flash")            # Prices(0.006, 0.30, 1.20)
    cost_of(Usage(1_000_000, 2_000, 900_000), prices)  # 0.006*0.9 + 0.30*0.1 + 1.20*0.002
    price_of("qwen3-32b")                              # None: tokens only

Prices are US dollars per million tokens, in DeepSeek's three columns: input served from the
prompt cache (a hit), input not served from it (a miss), and output (reasoning included, as
DeepSeek bills it). The table holds DeepSeek's published prices for the V4 family as
https://api-docs.deepseek.com/quick_start/pricing listed them when checked on 2026-11-15
(``docs/notes/2026-12-03-headless-and-cost.md``): ``deepseek-flash`` (DeepSeek-V4.1-Flash) and
the legacy names billed as it (``deepseek-v4-flash``, its dated variants and vision variant,
and the retired aliases ``deepseek-chat``/``deepseek-reasoner`` that SPEC 11 names), and
``deepseek-v4-pro``.

**At the peak rate.** DeepSeek bills half of it off-peak (every hour but 01:00-04:00 and
06:00-10:00 UTC on weekdays). dsh prices every request at the peak rate, so its figures are an
upper bound: off-peak they read up to twice the bill, and ``--max-cost`` stops early, never late.
Prices change: ``config.toml`` ``[models.NAME]`` overrides them (the off-peak rates, say), or
gives a model of another server its own. For any other name no price is assumed: a wrong
dollar figure is worse than none.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from ..records import record
from .seam import Usage

__all__ = [
    "DEEPSEEK_PRICES",
    "MILLION",
    "PRICE_KEYS",
    "Prices",
    "cost_of",
    "dollars",
    "price_of",
    "saved_by",
]

MILLION = 1_000_000


@record
class Prices:
    """One model's prices, US dollars per million tokens."""

    cache_hit: float
    """Input tokens served from the prompt cache."""
    cache_miss: float
    """Input tokens not served from it."""
    output: float
    """Output tokens (reasoning counts as output)."""


PRICE_KEYS = {"input_cache_hit": "cache_hit", "input_cache_miss": "cache_miss", "output": "output"}
"""The keys of a ``[models.NAME]`` table in ``config.toml``, and the field each sets."""

_FLASH = Prices(cache_hit=0.006, cache_miss=0.30, output=1.20)
_PRO = Prices(cache_hit=0.044, cache_miss=1.32, output=3.96)

_DATED = r"(?:-\d{4}(?:-?\d{2}-?\d{2})?)?"  # a dated variant, as models.py reads it: -0324

DEEPSEEK_PRICES = (
    # DeepSeek's name now, and the legacy names it serves and bills as Flash.
    (rf"deepseek-flash{_DATED}", _FLASH),
    (rf"deepseek-v4-flash{_DATED}(?:-vision-exp)?", _FLASH),
    (rf"deepseek-v4-pro{_DATED}", _PRO),
    # Retired aliases of V4 flash (SPEC 11); a server that still takes them bills them as it.
    (r"deepseek-(?:chat|reasoner)", _FLASH),
)
"""DeepSeek's published prices, by model name (matched whole, case-insensitively)."""


@functools.cache
def _patterns() -> tuple[tuple[re.Pattern[str], Prices], ...]:
    # Compiled at the first price asked for, not at import: 1 ms of every start otherwise.
    return tuple((re.compile(pattern), prices) for pattern, prices in DEEPSEEK_PRICES)


def price_of(name: str, overrides: Mapping[str, Prices] | None = None) -> Prices | None:
    """The prices of the model ``name``: ``overrides`` (``config.toml``, by exact name) first,
    then DeepSeek's table; None when nothing is known."""
    if overrides and name in overrides:
        return overrides[name]
    lowered = name.strip().lower()
    for pattern, prices in _patterns():
        if pattern.fullmatch(lowered):
            return prices
    return None


def cost_of(usage: Usage, prices: Prices) -> float:
    """What one request's ``usage`` cost, in US dollars."""
    hit = min(usage.cached_tokens, usage.prompt_tokens)
    miss = usage.prompt_tokens - hit
    return (
        hit * prices.cache_hit + miss * prices.cache_miss + usage.completion_tokens * prices.output
    ) / MILLION


def saved_by(usage: Usage, prices: Prices) -> float:
    """What the prompt cache saved on ``usage``: its hits at the miss price, less their cost."""
    hit = min(usage.cached_tokens, usage.prompt_tokens)
    return hit * max(prices.cache_miss - prices.cache_hit, 0.0) / MILLION


def dollars(amount: float) -> str:
    """``$1.23``, ``$0.0421``, ``$0.000012``: enough digits that a small turn is not $0.00."""
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount >= 0.01:
        return f"${amount:.4f}"
    if amount == 0:
        return "$0"
    return f"${amount:.6f}"
