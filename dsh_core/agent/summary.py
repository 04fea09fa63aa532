"""A compaction's summary request, and what comes back (SPEC 11): the request's words, the
streamed answer taken in, and the budget it is held to.

    text = summary_request(budget=2_000, focus="the parser")   # the request's last message
    summary, usage = await stream_summary(model, request, cancellation, on_event)
    summary = cut_summary(summary, 2_000)                      # never accepted whole when over
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.seam import (
    ChatModel,
    ChatRequest,
    Event,
    KeepAlive,
    RetryNotice,
    TextDelta,
    Usage,
)
from .cancel import Cancellation
from .history import estimate_tokens
from .step import MaskedStream, close_stream

__all__ = ["SUMMARY_REQUEST", "cut_summary", "stream_summary", "summary_request"]

SUMMARY_REQUEST = """\
[Compaction request] The conversation above is about to be replaced by your summary of it, to \
free room in the context window; the most recent exchanges will be kept as they are. Write the \
summary now, in plain text, for yourself to continue the work from; do not call tools. Be \
specific (names, paths, commands, values) and brief. Use these headings:
1. The user's requests: every request and instruction, in the user's words where they matter.
2. Decisions: what was decided, and why.
3. Files touched: each file read, created or changed, and what changed in it.
4. Errors and fixes: what failed, and how it was fixed (or that it was not).
5. Current work: exactly what was being done when this summary was asked for.
6. Next step: what to do next to continue."""
"""The last message of a summary request (a user message after the conversation it covers),
followed by its budget and, for ``/compact FOCUS``, the focus (:func:`summary_request`)."""


def summary_request(budget: int, focus: str | None = None) -> str:
    """The request for a summary of at most ``budget`` tokens, on ``focus`` if given."""
    text = (
        f"{SUMMARY_REQUEST}\nKeep the whole summary under {budget:,} tokens (about "
        f"{budget * 3 // 4:,} words): a longer one is cut there."
    )
    if focus and focus.strip():
        text += (
            "\nThe user asked for this summary with a focus: keep everything that concerns it "
            f"in full detail, and the rest brief. The focus, in the user's words:\n{focus.strip()}"
        )
    return text


def cut_summary(summary: str, budget: int) -> str:
    """``summary`` whole if its estimate fits ``budget``, else cut at a line or a word before
    it, with a line saying so: an oversized summary is never accepted whole."""
    tokens = estimate_tokens(summary)
    if tokens <= budget:
        return summary
    low, high = 0, len(summary)
    while low < high:  # the longest start whose estimate fits
        middle = (low + high + 1) // 2
        if estimate_tokens(summary[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    kept = summary[:low]
    for sep in ("\n", " "):
        at = kept.rfind(sep)
        if at > low * 0.8:
            kept = kept[:at]
            break
    return (
        f"{kept.rstrip()}\n[dsh: the summary was cut here: it was about {tokens:,} tokens, over "
        f"its budget of {budget:,}]"
    )


async def stream_summary(
    model: ChatModel,
    request: ChatRequest,
    cancellation: Cancellation,
    on_event: Callable[[Any], None],
) -> tuple[str, Usage]:
    """The summary's text, masked, and its usage; retries and keep-alives are passed on."""
    masked = MaskedStream()
    text: list[str] = []
    usage = Usage()

    def take(event: Event) -> None:
        nonlocal usage
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, RetryNotice):
            text.clear()  # the request starts over
            on_event(event)
        elif isinstance(event, KeepAlive):
            on_event(event)
        # Reasoning is the model's own; a tool call cannot be run for a summary.

    with cancellation.phase():
        stream = model.stream(request)
        try:
            async for received in stream:
                for event in masked(received):
                    take(event)
                cancellation.check()
        finally:
            for event in masked.held():
                take(event)
            await close_stream(stream)
    return "".join(text), usage
