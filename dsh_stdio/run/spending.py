"""What a session costs, as people read it: the usage line's dollars and context meter, the
rows ``/usage`` adds, and the ``--json`` run's ``result`` line (SPEC 15).

    tokens in 1,204 (cached 1,024) / out 30, $0.000016 (cache saved $0.000141),
        session $0.000042, ctx 1% of 1M, 0.84 s                     <- the usage line
    {"type":"result","session":"...","outcome":"refused","exit_status":3,"turns":1,...}

The numbers come from the session's :class:`~dsh_core.session.tally.Tally` and the prices of
:mod:`dsh_core.model.prices`; a model with no known price shows tokens only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsh_core.agent.budget import CostLimit
from dsh_core.errors import FailureRecord
from dsh_core.model.prices import Prices, cost_of, dollars, saved_by
from dsh_core.model.seam import Usage
from dsh_core.session import encode_line
from dsh_core.session.tally import Spend, Tally

from ..status import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_USAGE

if TYPE_CHECKING:
    from dsh_core.agent.loop import Conversation
    from dsh_core.session import SessionLog

    from ..config import Config
    from .runtime import Runtime

__all__ = [
    "context_words",
    "result_record",
    "run_result",
    "run_status",
    "session_spending",
    "startup_result",
    "turn_meter",
    "usage_rows",
    "window_words",
]


def session_spending(config: Config, log: SessionLog) -> tuple[Tally, CostLimit]:
    """The tally of the session of ``log`` (this run's part starts at the events loaded) and
    the ``--max-cost`` limit that reads it."""
    tally = Tally(config.price, since=len(log.events))
    return tally, CostLimit(config.max_cost, tally, config.price)


def run_status(status: int, tally: Tally) -> int:
    """The run's exit status, with SPEC 15's 3: no turn failed, but dsh refused a call it could
    not ask about (a person's own no is a ``rejected`` decision, not counted here)."""
    return EXIT_REFUSED if status == EXIT_OK and tally.run.refused else status


def window_words(window: int) -> str:
    """``1M`` for 1,048,576 tokens, ``128K`` for 131,072, ``32,000`` for what is neither."""
    for size, unit in ((1 << 20, "M"), (1 << 10, "K"), (1_000_000, "M"), (1_000, "K")):
        if window >= size and window % size == 0:
            return f"{window // size}{unit}"
    return f"{window:,}"


def context_words(conversation: Conversation) -> str | None:
    """``ctx 34% of 1M``: how full the window is; None when the window is not known."""
    window = conversation.keeper.window
    if not window:
        return None
    return f"ctx {conversation.keeper.size / window:.0%} of {window_words(window)}"


def turn_meter(
    usage: Usage | None,
    conversation: Conversation,
    tally: Tally,
    price: Callable[[str], Prices | None],
) -> list[str]:
    """What the usage line says after the turn's tokens: its cost, what the cache saved, the
    session's cost so far, and the context meter."""
    words: list[str] = []
    prices = price(conversation.model_name)
    if usage is not None and prices is not None:
        cost, saved = dollars(cost_of(usage, prices)), dollars(saved_by(usage, prices))
        words.append(f"{cost} (cache saved {saved})")  # $0 too: the line keeps one shape
    tally.update(conversation.log.events)
    if prices is not None and tally.session.cost is not None:
        words.append(f"session {dollars(tally.session.cost)}")
    context = context_words(conversation)
    if context is not None:
        words.append(context)
    return words


def usage_rows(
    conversation: Conversation, tally: Tally, price: Callable[[str], Prices | None]
) -> list[tuple[str, str]]:
    """The rows ``/usage`` adds: the session's cost, what the cache saved, the last turn's."""
    tally.update(conversation.log.events)
    spend, turn = tally.session, tally.turn
    name = conversation.model_name
    if spend.cost is None or price(name) is None:
        return [("cost", f"not known (no prices for {name}: config.toml [models.{name}])")]
    rows = [("cost", f"{dollars(spend.cost)} (the prompt cache saved {dollars(spend.saved)})")]
    if spend.turns and turn.cost is not None:
        rows.append(("last turn", f"{dollars(turn.cost)} (cache saved {dollars(turn.saved)})"))
    return rows


def result_record(
    status: int,
    *,
    session: str | None,
    spend: Spend | None = None,
    failure: FailureRecord | None = None,
) -> dict[str, Any]:
    """The ``result`` line that ends every ``--json`` run (SPEC 15).

    ``outcome``: ``completed`` (or the normal end of the last turn: ``max-tokens``,
    ``max-steps``, ``max-cost``), ``refused`` (exit status 3), ``error`` or ``rejected`` (the
    first failed turn's), ``aborted`` (a signal ended the run), ``startup-failed``. ``error``
    says what failed, when something did.
    """
    spend = spend if spend is not None else Spend()
    # A turn a load closed as ``interrupted`` was an earlier run's (SPEC 3).
    ends = [end for end in spend.ends if end.kind != "interrupted"]
    failed = next((end for end in ends if end.kind in ("error", "rejected")), None)
    if status == EXIT_USAGE:
        outcome = "startup-failed"
    elif status == EXIT_REFUSED:
        outcome = "refused"
    elif status == EXIT_FAILED:
        aborted = any(end.kind == "aborted" for end in ends)  # output closed
        outcome = failed.kind if failed is not None else "aborted" if aborted else "error"
    elif status != EXIT_OK:
        outcome = "aborted"
    else:
        outcome = ends[-1].name if ends else "completed"
    if failure is None and failed is not None:
        failure = failed.failure or FailureRecord("REJECTED", failed.reason or "")
    value: dict[str, Any] = {
        "type": "result",
        "session": session,
        "outcome": outcome,
        "exit_status": status,
        "turns": spend.turns,
        "steps": spend.steps,
        "tokens": {
            "in": spend.prompt_tokens,
            "cached": spend.cached_tokens,
            "out": spend.completion_tokens,
        },
        "cost_usd": None if spend.cost is None else round(spend.cost, 9),
        "refused": [{"tool": r.tool, "reason": r.reason} for r in spend.refused],
        "changed": list(spend.changed),
        "checkpoint": spend.checkpoint,
    }
    if failure is not None:
        value["error"] = failure.to_json()
    return value


def run_result(runtime: Runtime, status: int) -> dict[str, Any]:
    """The ``result`` line of the run that ``runtime`` ran, which exits with ``status``."""
    tally = runtime.tally
    tally.update(runtime.conversation.log.events)
    return result_record(status, session=runtime.conversation.log.id, spend=tally.run)


def startup_result(exc: BaseException) -> str:
    """The ``result`` line of a run that failed before it had a session, as one line of text."""
    value = result_record(EXIT_USAGE, session=None, failure=FailureRecord.from_exception(exc))
    return encode_line(value).decode("utf-8")
