"""Render any thrown value, with its whole cause chain, for people.

    >>> try:
    ...     try:
    ...         raise ConnectionRefusedError(111, "Connection refused")
    ...     except OSError as exc:
    ...         raise RuntimeError("outer") from exc
    ... except RuntimeError as exc:
    ...     error_chain(exc)
    'outer: [Errno 111] Connection refused'

The walk follows ``__cause__``, else ``__context__`` even when ``__suppress_context__`` is set:
httpcore re-raises ``from None`` and the errno lives in that suppressed context. This is the one
renderer for every place that shows or stores a failure; routing uses ``HarnessError.code``.
What it renders is masked (:mod:`dsh_core.masking`): a server that echoes the API key, or a URL
that carries it, shows ``[DEEPSEEK_API_KEY]`` in every failure shown, stored or logged.
:func:`iter_chain` is that walk on its own, for code that looks for a kind of link (the
adapter's permanent-failure check) rather than rendering.
"""

from __future__ import annotations

from collections.abc import Iterator

from .masking import mask

__all__ = ["error_chain", "iter_chain"]

MAX_LINKS = 64
"""Links shown before the rest of a long chain is summarised as a count."""

MAX_GROUP_DEPTH = 16
"""Exception groups nested deeper than this are summarised, which bounds the recursion."""

CIRCULAR = "<circular cause>"
UNRENDERABLE = "<unrenderable value>"


def error_chain(value: object) -> str:
    """Render ``value`` and its cause chain as ``outer: inner: ...``, masked; never raises."""
    try:
        return mask(_render(value, frozenset(), 0))
    except BaseException:  # a hostile value we did not foresee must not break error reporting
        return UNRENDERABLE


def iter_chain(value: object, seen: set[int] | None = None) -> Iterator[object]:
    """Yield ``value``, then each link of its chain: ``__cause__``, else ``__context__`` even
    when suppressed. Stops before a link already seen (a cycle) or at the end of the chain.

    ``seen`` (ids) is shared and updated: a link in it when the walk reaches it ends the walk.
    Whether the walk ended at a cycle: the last link yielded still has a next link.
    """
    if seen is None:
        seen = set()
    current: object = value
    while id(current) not in seen:
        seen.add(id(current))
        yield current
        current = _next_link(current)
        if current is None:
            return


def _render(value: object, ancestors: frozenset[int], depth: int) -> str:
    parts: list[str] = []
    seen = set(ancestors)
    previous: str | None = None
    last: object = None
    walked = False
    shown = 0
    links = iter_chain(value, seen)
    for link in links:
        if shown == MAX_LINKS:
            parts.append(f"<{1 + sum(1 for _ in links)} more links>")
            return ": ".join(parts)
        try:
            text = _link_text(link, frozenset(seen), depth)
        except BaseException:  # e.g. a group whose .message property raises
            text = UNRENDERABLE
        if text != previous:
            parts.append(text)
            shown += 1
        previous = text
        last, walked = link, True
    # The walk stops at the chain's end or at a link seen before: only the second has a next.
    if (_next_link(last) if walked else value) is not None:
        parts.append(CIRCULAR)
    return ": ".join(parts)


def _link_text(value: object, seen: frozenset[int], depth: int) -> str:
    if isinstance(value, BaseExceptionGroup):
        message = _safe_str(value.message) or type(value).__name__
        if depth >= MAX_GROUP_DEPTH:
            return f"{message} [<{len(value.exceptions)} nested members>]"
        members = "; ".join(_render(member, seen, depth + 1) for member in value.exceptions)
        return f"{message} [{members}]"
    text = _safe_str(value)
    if text == "" and isinstance(value, BaseException):
        return type(value).__name__
    return text


def _next_link(value: object) -> object:
    if not isinstance(value, BaseException):
        return None
    if value.__cause__ is not None:
        return value.__cause__
    return value.__context__


def _safe_str(value: object) -> str:
    try:
        text = str(value)
    except BaseException:  # even SystemExit from a __str__: rendering must never raise
        return UNRENDERABLE
    # A str subclass could override __eq__ or __str__; keep a plain str.
    return text if type(text) is str else UNRENDERABLE
