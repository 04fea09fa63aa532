"""A step's text as it arrives: in order, whatever the pieces, held as a few strings."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dsh_core.agent.step import Pieces, Step
from dsh_core.model.seam import ReasoningDelta, RetryNotice, TextDelta
from dsh_core.session import SessionStore


@given(st.lists(st.text(max_size=5), max_size=3 * Pieces.JOINED))
def test_the_text_is_the_pieces_in_order(pieces: list[str]) -> None:
    held = Pieces()
    for piece in pieces:
        held.append(piece)
    assert bool(held) == any(pieces)
    assert held.text() == "".join(pieces)
    assert held.text() == "".join(pieces)  # asked again: the same


def test_once_joined_the_step_holds_the_str_it_records() -> None:
    step = Step(1)
    for number in range(3 * Pieces.JOINED + 1):
        step.add(TextDelta(f"{number} "))
    record = step.record(1, interrupted=False)
    assert record.text == "".join(f"{number} " for number in range(3 * Pieces.JOINED + 1))
    assert step.text.text() is record.text  # one copy of a long answer, not two


def test_a_retry_starts_the_text_over() -> None:
    step = Step(1)
    step.add(ReasoningDelta("hmm"))
    step.add(TextDelta("half an ans"))
    step.add(RetryNotice(attempt=1, max_retries=4, delay=0.0, error=OSError("busy")))
    assert not step.shown
    step.add(TextDelta("whole"))
    assert step.record(1, interrupted=False).text == "whole"


def test_a_long_answer_costs_about_its_size_held_and_recorded(tmp_path: Path) -> None:
    """Held: the blocks, not an object per delta (a list of them cost ten times the text).
    Recorded: one join, then the line a slice at a time (it cost three copies more)."""
    words = ["the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. "]
    size = 4_000_000
    with SessionStore(tmp_path).create(Path("/project")) as log:
        tracemalloc.start()
        try:
            step = Step(1)
            for number in range(size * len(words) // sum(map(len, words))):
                step.add(TextDelta(words[number % len(words)]))
            held = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            log.append(step.record(1, interrupted=False))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert held < 1.2 * size
    assert peak - held < 1.2 * size
