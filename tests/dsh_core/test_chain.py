"""error_chain: the SPEC section 5 cases, hostile values, and real httpx failures."""

from __future__ import annotations

import asyncio
import itertools
import sys

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import error_chain
from dsh_core.chain import MAX_LINKS, iter_chain
from dsh_core.testing import closed_port
from tests.reliability.faults import FaultServer, hang


def chained(*links: Exception) -> Exception:
    """Link ``links`` outermost first through ``__cause__``."""
    for outer, inner in itertools.pairwise(links):
        outer.__cause__ = inner
    return links[0]


class Hostile(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class VeryHostile(Exception):
    def __str__(self) -> str:
        raise KeyboardInterrupt  # not even a BaseException escapes error_chain


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (RuntimeError("a"), "a"),
        (TimeoutError(), "TimeoutError"),
        ("boom", "boom"),
        (42, "42"),
        (None, "None"),
        (Hostile(), "<unrenderable value>"),
        (VeryHostile(), "<unrenderable value>"),
    ],
)
def test_single_values(value: object, expected: str) -> None:
    assert error_chain(value) == expected


def test_cause() -> None:
    exc = chained(RuntimeError("outer"), ConnectionRefusedError(111, "Connection refused"))
    assert error_chain(exc) == "outer: [Errno 111] Connection refused"


def test_suppressed_context_is_followed() -> None:
    try:
        try:
            raise OSError("inner")
        except OSError:
            raise ValueError("outer") from None
    except ValueError as exc:
        assert exc.__suppress_context__
        assert error_chain(exc) == "outer: inner"


def test_cause_wins_over_context() -> None:
    try:
        try:
            raise OSError("context")
        except OSError:
            raise ValueError("outer") from KeyError("cause")
    except ValueError as exc:
        assert error_chain(exc) == "outer: 'cause'"


def test_repeated_text_is_not_repeated() -> None:
    exc = chained(RuntimeError("same"), RuntimeError("same"), KeyError("k"))
    assert error_chain(exc) == "same: 'k'"


def test_exception_group_uses_its_own_message_and_member_chains() -> None:
    group = ExceptionGroup(
        "multiple connection attempts failed",
        [OSError("c1"), chained(OSError("c2"), ConnectionRefusedError("deep"))],
    )
    assert error_chain(group) == "multiple connection attempts failed [c1; c2: deep]"
    outer = chained(RuntimeError("outer"), group)
    assert error_chain(outer).startswith("outer: multiple connection attempts failed [c1;")


def test_cycle() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert error_chain(a) == "a: b: <circular cause>"


def test_self_cycle() -> None:
    a = RuntimeError("a")
    a.__context__ = a
    assert error_chain(a) == "a: <circular cause>"


def test_unrenderable_link() -> None:
    assert error_chain(chained(RuntimeError("outer"), Hostile())) == "outer: <unrenderable value>"


def test_member_sharing_a_cause_is_not_called_circular() -> None:
    shared = OSError("shared")
    group = ExceptionGroup("g", [chained(OSError("m1"), shared), chained(OSError("m2"), shared)])
    assert error_chain(group) == "g [m1: shared; m2: shared]"


def test_group_member_pointing_back_at_the_group() -> None:
    member = OSError("m")
    group = ExceptionGroup("g", [member])
    member.__cause__ = group
    assert error_chain(group) == "g [m: <circular cause>]"


def test_deep_chain_is_iterative_and_capped() -> None:
    links = [RuntimeError(f"e{i}") for i in range(20_000)]
    text = error_chain(chained(*links))
    assert text.startswith("e0: e1: e2")
    assert text.endswith(f"e{MAX_LINKS - 1}: <{20_000 - MAX_LINKS} more links>")


def test_deeply_nested_groups_stay_bounded() -> None:
    exc: Exception = OSError("leaf")
    for i in range(sys.getrecursionlimit() * 2):
        exc = ExceptionGroup(f"g{i}", [exc])
    assert error_chain(exc).startswith(f"g{sys.getrecursionlimit() * 2 - 1} [")


# iter_chain: the walk on its own.


def test_iter_chain_yields_the_value_then_each_link() -> None:
    inner = ConnectionRefusedError(111, "refused")
    middle = OSError("middle")
    middle.__context__ = inner
    middle.__suppress_context__ = True  # as httpcore's "raise ... from None" leaves it
    outer = RuntimeError("outer")
    outer.__cause__ = middle
    outer.__context__ = KeyError("context")  # the cause wins
    assert list(iter_chain(outer)) == [outer, middle, inner]


@pytest.mark.parametrize("value", ["text", 42, None])
def test_iter_chain_of_a_value_that_is_not_an_exception(value: object) -> None:
    assert list(iter_chain(value)) == [value]


def test_iter_chain_stops_at_a_cycle() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__context__ = b, a
    assert list(iter_chain(a)) == [a, b]
    a.__cause__ = a
    assert list(iter_chain(a)) == [a]


def test_iter_chain_shares_its_seen_set() -> None:
    shared = OSError("shared")
    first = chained(RuntimeError("first"), shared)
    seen: set[int] = set()
    assert list(iter_chain(first, seen)) == [first, shared]
    second = chained(RuntimeError("second"), shared)
    assert list(iter_chain(second, seen)) == [second]  # it stops before the link seen before
    assert list(iter_chain(first, seen)) == []  # already walked


def test_iter_chain_is_lazy_and_iterative() -> None:
    links = [RuntimeError(f"e{i}") for i in range(sys.getrecursionlimit() * 10)]
    walk = iter_chain(chained(*links))
    assert [next(walk) for _ in range(3)] == links[:3]
    assert sum(1 for _ in walk) == len(links) - 3


# Property: random graphs of values never make error_chain raise or return a non-str.


class BadGroupMessage(ExceptionGroup[Exception]):
    @property
    def message(self) -> str:
        raise RuntimeError("hostile message")


def _leaf(kind: int, text: str) -> object:
    return [
        lambda: RuntimeError(text),
        lambda: OSError(111, text),
        lambda: Hostile(),
        lambda: TimeoutError(),
        lambda: text,
        lambda: 7,
        lambda: KeyError(text),
    ][kind]()


@st.composite
def exception_graphs(draw: st.DrawFn) -> object:
    size = draw(st.integers(min_value=1, max_value=12))
    nodes: list[object] = []
    for _ in range(size):
        kind = draw(st.integers(min_value=0, max_value=6))
        text = draw(st.text(max_size=8))
        make_group: bool = draw(st.booleans())
        if nodes and make_group:
            members: list[Exception] = [
                n
                for n in draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=3))
                if isinstance(n, Exception)
            ] or [RuntimeError("m")]
            cls = BadGroupMessage if draw(st.booleans()) else ExceptionGroup
            nodes.append(cls(text or "g", members))
        else:
            nodes.append(_leaf(kind, text))
    for node in nodes:
        if not isinstance(node, BaseException):
            continue
        target = draw(st.sampled_from(nodes))
        link = target if isinstance(target, BaseException) else None
        how = draw(st.integers(min_value=0, max_value=2))
        if how == 0:
            node.__cause__ = link
        else:
            node.__context__ = link
            node.__suppress_context__ = how == 2
    return draw(st.sampled_from(nodes))


@settings(max_examples=300, deadline=None)
@given(exception_graphs())
def test_property_always_a_str_never_raises(value: object) -> None:
    text = error_chain(value)
    assert isinstance(text, str)


# Real sockets: what httpx actually raises.


def test_async_httpx_refused_renders_the_errno() -> None:
    port = closed_port()

    async def post() -> BaseException:
        async with httpx.AsyncClient() as client:
            try:
                await client.post(f"http://127.0.0.1:{port}/chat/completions")
            except httpx.HTTPError as exc:
                return exc
        raise AssertionError("the request should have failed")

    exc = asyncio.run(post())
    assert error_chain(exc) == (
        f"All connection attempts failed: [Errno 111] Connect call failed ('127.0.0.1', {port})"
    )


def test_sync_httpx_refused_renders_the_errno() -> None:
    port = closed_port()
    with httpx.Client() as client, pytest.raises(httpx.ConnectError) as info:
        client.post(f"http://127.0.0.1:{port}/")
    assert error_chain(info.value) == "[Errno 111] Connection refused"


def test_dns_failure_renders_the_resolver_error() -> None:
    async def post() -> BaseException:
        async with httpx.AsyncClient() as client:
            try:
                await client.post("http://dsh-test.invalid/")
            except httpx.HTTPError as exc:
                return exc
        raise AssertionError("the request should have failed")

    text = error_chain(asyncio.run(post()))
    assert "[Errno -" in text, text


def test_read_timeout_renders_the_class_name() -> None:
    async def post(url: str) -> BaseException:
        async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2)) as client:
            try:
                await client.post(f"{url}/")
            except httpx.HTTPError as exc:
                return exc
        raise AssertionError("the request should have failed")

    with FaultServer(hang) as silent:  # reads the request, never answers
        exc = asyncio.run(post(silent.url))
    assert isinstance(exc, httpx.ReadTimeout)
    # The empty message renders as the class name; anyio's cancel-scope detail follows.
    assert error_chain(exc).startswith("ReadTimeout: TimeoutError")
