"""``@record``: a frozen, slotted dataclass that costs less to define at import.

    @record
    class TurnStart(Codec):
        turn: int  # with a docstring under it, as for any dataclass field

is ``@dataclass(frozen=True, slots=True)`` in every way the code and the tests see: a real
dataclass (``dataclasses.fields``, ``replace``, field metadata, ``__match_args__``), frozen
(``FrozenInstanceError``), slotted, equal and hashed by its fields as a dataclass is, and shown
by the same ``repr``. What differs is how: ``dataclasses`` compiles six methods of source text
for each class (``exec``), about 0.3-0.9 ms a class, and a run of dsh defines some 75 such
classes before its first request. Here only ``__init__`` and the frozen ``__setattr__`` and
``__delattr__`` are compiled; ``__eq__``, ``__hash__`` and ``__repr__`` are one shared function
each, reading the class's field names (docs/notes/2026-12-02-repl-craft.md measures it).

For classes built per delta or per event on a hot path the shared ``__eq__`` and ``__hash__``
are slower than compiled ones (they loop over the fields); records are compared and hashed in
tests and in small sets, never per delta.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

__all__ = ["record"]

T = TypeVar("T")


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(getattr(self, name) == getattr(other, name) for name in self.__record_compared__)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, name) for name in self.__record_hashed__))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
    return f"{self.__class__.__qualname__}({shown})"


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """``cls`` as a frozen, slotted dataclass (see the module docstring)."""
    made: Any = dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)(cls)
    fields = dataclasses.fields(made)
    made.__record_compared__ = tuple(f.name for f in fields if f.compare)
    made.__record_shown__ = tuple(f.name for f in fields if f.repr)
    # The fields a dataclass hashes: field(hash=...) when given, else those it compares.
    made.__record_hashed__ = tuple(
        f.name for f in fields if (f.compare if f.hash is None else f.hash)
    )
    made.__eq__ = _eq
    made.__hash__ = _hash
    made.__repr__ = _repr
    return made  # type: ignore[no-any-return]
