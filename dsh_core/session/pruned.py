"""The session log's prune event (SPEC 11, issue 29): old tool results sent as one-line stubs.

    compaction/prune {turn, tokens_before, tokens_after, results: [{call_id, stub}]}

Written before a step's request (``turn`` null for ``/compact``), fsynced, and in force once it is
written: from then on each named tool result is sent as its ``stub``, a line that says what it
was, how big, and where its whole output is kept. Nothing else changes, so the conversation
stays valid (every call keeps its result). :mod:`dsh_core.session.events` makes it a record of
the log; :mod:`dsh_core.agent.history` applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..records import record
from .codec import read_int, read_str

__all__ = ["CompactionPrune", "PrunedResult"]


@record
class PrunedResult:
    """One tool result a prune replaced: which, and the line the model sees instead."""

    call_id: str
    stub: str


@record
class CompactionPrune:
    """Old tool results replaced by one-line stubs (fsynced); in force once written."""

    TYPE: ClassVar[str] = "compaction/prune"
    turn: int | None
    tokens_before: int
    tokens_after: int
    """The conversation's size before, and as estimated after (the next request measures it)."""
    results: tuple[PrunedResult, ...]

    def to_data(self) -> dict[str, Any]:
        results = [{"call_id": item.call_id, "stub": item.stub} for item in self.results]
        return {
            "turn": self.turn,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "results": results,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> CompactionPrune:
        raw = data.get("results")
        if not isinstance(raw, list):
            raise ValueError("results is not a list")
        results = []
        for item in raw:
            if not isinstance(item, dict):
                raise ValueError("a pruned result is not an object")
            results.append(PrunedResult(read_str(item, "call_id"), read_str(item, "stub")))
        turn = None if data.get("turn") is None else read_int(data, "turn")
        return cls(
            turn, read_int(data, "tokens_before"), read_int(data, "tokens_after"), tuple(results)
        )
