"""The price table and what a request costs (SPEC 15)."""

from __future__ import annotations

import pytest

from dsh_core.model.prices import Prices, cost_of, dollars, price_of, saved_by
from dsh_core.model.seam import Usage

FLASH = Prices(0.006, 0.30, 1.20)
PRO = Prices(0.044, 1.32, 3.96)


@pytest.mark.parametrize(
    ("name", "prices"),
    [
        ("deepseek-flash", FLASH),
        ("deepseek-v4-flash", FLASH),
        ("DeepSeek-V4-Flash", FLASH),
        ("deepseek-v4-flash-0731", FLASH),
        ("deepseek-v4-flash-vision-exp", FLASH),
        ("deepseek-chat", FLASH),
        ("deepseek-reasoner", FLASH),
        ("deepseek-v4-pro", PRO),
        ("deepseek-v4-pro-2026-08-13", PRO),
        ("qwen3-32b", None),
        ("deepseek-v4-pro-max", None),
        ("deepseek-v5", None),
    ],
)
def test_the_published_prices_by_name(name: str, prices: Prices | None) -> None:
    assert price_of(name) == prices


def test_the_config_files_prices_come_first() -> None:
    mine = Prices(0.022, 0.66, 1.98)
    assert price_of("deepseek-v4-pro", {"deepseek-v4-pro": mine}) == mine
    assert price_of("my-model", {"my-model": mine}) == mine
    assert price_of("deepseek-v4-pro", {"my-model": mine}) == PRO


def test_a_request_costs_its_tokens_times_the_prices() -> None:
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=2_000, cached_tokens=900_000)
    assert cost_of(usage, FLASH) == pytest.approx(0.006 * 0.9 + 0.30 * 0.1 + 1.20 * 0.002)
    assert saved_by(usage, FLASH) == pytest.approx((0.30 - 0.006) * 0.9)


def test_more_hits_than_prompt_tokens_are_not_believed() -> None:
    usage = Usage(prompt_tokens=100, completion_tokens=0, cached_tokens=500)
    assert cost_of(usage, FLASH) == pytest.approx(100 * 0.006 / 1e6)


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0, "$0"),
        (0.000012, "$0.000012"),
        (0.0421, "$0.0421"),
        (1.234, "$1.23"),
        (1234.5, "$1,234.50"),
    ],
)
def test_dollars_keep_a_small_turn_from_reading_zero(amount: float, shown: str) -> None:
    assert dollars(amount) == shown
