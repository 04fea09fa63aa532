"""``dsh_core.records.record`` behaves as ``@dataclass(frozen=True, slots=True)`` does."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh_core.records import record


@record
class Fast:
    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    note: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Slow:
    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    note: str = field(default="", compare=False, repr=False)


def twins(**values: Any) -> tuple[Fast, Slow]:
    return Fast(**values), Slow(**values)


def test_repr_eq_and_hash_are_the_dataclasses() -> None:
    fast, slow = twins(name="a", count=2, tags=("x",), extra={"k": 1}, note="n")
    assert repr(fast).replace("Fast", "Slow") == repr(slow)
    assert fast == Fast("a", 2, ("x",), {"k": 1}, note="other")  # note is not compared
    assert fast != Fast("a", 3)
    assert fast.__eq__(slow) is NotImplemented  # another class: never equal
    assert hash(fast) == hash(Fast("a", 2, ("x",), {"other": 2}))  # extra is not hashed
    assert hash(fast) == hash(slow)  # the same tuple of the same fields
    assert len({fast, Fast("a", 2, ("x",), {"k": 1})}) == 1


def test_frozen_slotted_and_a_real_dataclass() -> None:
    fast, _ = twins(name="a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "b"  # type: ignore[misc]
    assert not hasattr(fast, "__dict__")
    assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(Slow)]
    assert dataclasses.replace(fast, count=5) == Fast("a", 5)
    assert Fast.__match_args__ == Slow.__match_args__
    assert pickle.loads(pickle.dumps(fast)) == fast
    match fast:
        case Fast("a", count=0):
            pass
        case _:
            raise AssertionError("match did not see the fields")
