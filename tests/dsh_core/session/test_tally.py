"""What a session's log adds up to (SPEC 15), and the cost limit that reads it.

A real log on disk (``SessionStore``), the records the loop writes, and the tally following it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.agent.budget import CostLimit, estimate_request
from dsh_core.model.prices import Prices
from dsh_core.model.seam import ToolCall, Usage
from dsh_core.session import SessionLog, SessionStore
from dsh_core.session.events import (
    ApprovalDecided,
    AssistantStep,
    StepUsage,
    ToolOutput,
    ToolResult,
    TurnEnd,
    TurnStart,
)
from dsh_core.session.tally import Refusal, Tally

PRICES = Prices(cache_hit=1.0, cache_miss=10.0, output=100.0)
"""Round numbers: a million tokens of each."""
REFUSED = 'Error: tool "bash" needs approval and stdin is not a terminal; run with --allow shell'


def price(model: str) -> Prices | None:
    return PRICES if model == "priced" else None


@pytest.fixture
def log(tmp_path: Path) -> SessionLog:
    return SessionStore(tmp_path / "home").create(tmp_path)


def turn(
    log: SessionLog, number: int, *, model: str = "priced", outcome: str | None = None
) -> None:
    """One turn of one step asking for ``bash``, decided ``outcome`` (None: no call)."""
    log.append(TurnStart(number, model))
    calls = (ToolCall(f"c{number}", "bash", "{}"),) if outcome else ()
    log.append(AssistantStep(number, 1, "", tool_calls=calls))
    log.append(StepUsage(number, 1, Usage(1_000_000, 1_000_000, 500_000)))
    if outcome:
        log.append(ApprovalDecided(number, f"c{number}", outcome))  # type: ignore[arg-type]
        log.append(ToolResult(number, 1, f"c{number}", ToolOutput(REFUSED)))
    log.append(TurnEnd(number, "completed"))


def test_it_counts_tokens_and_dollars_for_the_session_and_this_run(log: SessionLog) -> None:
    turn(log, 1)
    tally = Tally(price, since=len(log.events))  # the first turn was an earlier run's
    turn(log, 2)
    tally.update(log.events)
    one = 0.5 * 1.0 + 0.5 * 10.0 + 1.0 * 100.0
    assert tally.session.cost == pytest.approx(2 * one)
    assert tally.run.cost == pytest.approx(one)
    assert tally.turn.cost == pytest.approx(one)
    assert (tally.run.turns, tally.run.steps, tally.session.turns) == (1, 1, 2)
    assert tally.session.saved == pytest.approx(2 * 0.5 * (10.0 - 1.0))


def test_only_a_call_nobody_could_be_asked_about_is_a_refusal(log: SessionLog) -> None:
    tally = Tally(price)
    turn(log, 1, outcome="rejected")  # a person's no
    turn(log, 2, outcome="unavailable")
    turn(log, 3, outcome="granted-by-flag")
    tally.update(log.events)
    assert tally.run.refused == [Refusal("bash", REFUSED)]


def test_a_request_to_a_model_without_prices_leaves_the_cost_unknown(log: SessionLog) -> None:
    tally = Tally(price)
    turn(log, 1)
    turn(log, 2, model="unpriced")
    turn(log, 3)
    tally.update(log.events)
    assert tally.session.cost is None
    assert tally.session.prompt_tokens == 3_000_000


def test_the_limit_refuses_the_request_that_would_pass_it(log: SessionLog) -> None:
    turn(log, 1)
    spent = 105.5
    # The next request: 1.5M tokens, the 1M the last one carried likely a hit, and the
    # session's mean output (1M tokens).
    next_one = estimate_request(1_500_000, 1_000_000, 1_000_000, PRICES)
    assert next_one == pytest.approx(1.0 + 5.0 + 100.0)

    def refused(limit: float | None, model: str = "priced") -> str | None:
        return CostLimit(limit, Tally(price), price).refuses_next(log.events, model, 1_500_000)

    assert refused(spent + next_one) is None
    why = refused(spent + next_one - 0.01)
    assert why is not None
    assert why.startswith("the limit is $211.49, $105.50 spent, and the next request would")
    assert refused(None) is None
    unpriced = refused(1000, "unpriced")
    assert unpriced is not None and "config.toml [models.unpriced]" in unpriced
