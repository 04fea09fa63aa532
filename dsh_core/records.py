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

:func:`maker` gives a record's fastest positional constructor, for a decoder that builds tens of
thousands (a session's resume): a frozen ``__init__`` sets each field through
``object.__setattr__``, which costs more than the slot itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

__all__ = ["maker", "record"]

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
    hand_written = "__init__" in cls.__dict__  # before dataclass adds its own
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
    # Only the dataclass's own __init__ may be skipped: one written by hand, a __post_init__
    # or a field it does not take would do something the slots alone do not.
    made.__record_plain__ = (
        not hand_written
        and not hasattr(made, "__post_init__")
        and all(f.init and f._field_type is dataclasses._FIELD for f in fields)  # type: ignore[attr-defined]
    )
    return made  # type: ignore[no-any-return]


_MAKERS: dict[type, Callable[..., Any]] = {}


def maker(cls: type[T]) -> Callable[..., T]:
    """``cls`` itself, or a function that builds the same record from every field in order,
    without the frozen ``__init__``'s ``object.__setattr__`` per field (compiled once)."""
    made = _MAKERS.get(cls)
    if made is None:
        made = _MAKERS[cls] = _compile_maker(cls) if cls.__dict__.get("__record_plain__") else cls
    return made


def _compile_maker(cls: type) -> Callable[..., Any]:
    names = [f.name for f in dataclasses.fields(cls)]
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = [f"def make({', '.join(f'v{i}' for i in range(len(names)))}):", "    o = new(cls)"]
    for index, name in enumerate(names):
        scope[f"set{index}"] = getattr(cls, name).__set__  # the slot's own descriptor
        lines.append(f"    set{index}(o, v{index})")
    lines.append("    return o")
    exec("\n".join(lines), scope)  # our own text, made of the class's field names
    made: Callable[..., Any] = scope["make"]
    return made
