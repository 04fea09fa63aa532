"""How a record dataclass becomes a JSON object and back, following from its fields.

    @dataclass(frozen=True, slots=True)
    class UserText(Codec):
        turn: int
        text: str

    UserText(1, "hi").to_data()                    # {"turn": 1, "text": "hi"}
    UserText.from_data({"turn": 1, "text": "hi"})  # ValueError says what is wrong, if anything

The rules, for :mod:`dsh_core.session.events`: the keys are the fields, in order; a field that has a
default is left out while it holds it, and a missing or null key reads as it; a field marked
``FLAT`` writes its value's own keys into the same object (a step's
:class:`~dsh_core.model.seam.Usage`, a retry's :class:`~dsh_core.errors.FailureRecord`); a field
whose metadata has ``absent`` reads a missing key as that value (what an older dsh meant by leaving
it out). Field types: ``int``, ``float``, ``str``, ``bool``, a ``Literal`` of strings, ``X | None``,
``tuple[ToolCall, ...]``, ``FailureRecord`` and ``Usage``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

from ..errors import FailureRecord
from ..model.seam import ToolCall, Usage

__all__ = [
    "FLAT",
    "Codec",
    "decode",
    "encode",
    "read_bool",
    "read_failure",
    "read_int",
    "read_optional_str",
    "read_str",
]

FLAT = {"flat": True}
"""Field metadata: the value's own keys are written into the record's object."""


class Codec:
    """Gives a record dataclass ``to_data`` and ``from_data`` that follow from its fields."""

    __slots__ = ()

    def to_data(self) -> dict[str, Any]:
        """The line's ``data`` object."""
        return encode(self)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        """The record a line's ``data`` holds; ``ValueError`` says what is wrong with it."""
        record: Self = decode(cls, data)
        return record


Encode = Callable[[Any], Any]
Decode = Callable[[Mapping[str, Any], str], Any]
"""Reads the value under one key (the field's name) of a line's data."""

_REQUIRED: Any = object()
"""Sentinel: the field has no such value."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    encode: Encode
    read: Callable[[Mapping[str, Any]], Any]
    """The field's value from a line's data: its default, what its absence meant, or the
    value under its key, read and checked."""
    default: Any
    """Left out while the field holds it, and taken for a missing or null key."""
    flat: bool


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    """How each field of ``cls`` is written and read, worked out once per class."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    made = []
    for item in dataclasses.fields(cls):
        default = item.default
        if item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        if default is dataclasses.MISSING:
            default = _REQUIRED
        flat = item.metadata.get("flat", False)
        encode, decode = _codec_for(hints[item.name])
        read = _reader(item.name, decode, default, item.metadata.get("absent", _REQUIRED), flat)
        made.append(_Field(item.name, encode, read, default, flat))
    _FIELDS[cls] = result = tuple(made)
    return result


def _reader(
    name: str, decode: Decode, default: Any, absent: Any, flat: bool
) -> Callable[[Mapping[str, Any]], Any]:
    """One field's reader, its rule chosen once (lines are read by the thousand)."""
    if flat:
        return lambda data: decode(data, "")
    if default is not _REQUIRED:
        return lambda data: default if data.get(name) is None else decode(data, name)
    if absent is not _REQUIRED:
        return lambda data: decode(data, name) if name in data else absent
    return lambda data: decode(data, name)


def encode(value: Any) -> dict[str, Any]:
    """``value``'s fields as a JSON object, by the rules above."""
    data: dict[str, Any] = {}
    for item in _fields(type(value)):
        field_value = getattr(value, item.name)
        if item.flat:
            data.update(item.encode(field_value))
        elif item.default is _REQUIRED or field_value != item.default:
            data[item.name] = item.encode(field_value)
    return data


def decode(cls: type, data: Mapping[str, Any]) -> Any:
    """The ``cls`` that ``data`` holds, by the rules above; ``ValueError`` says what is wrong."""
    fields = _FIELDS.get(cls) or _fields(cls)
    return cls(*[item.read(data) for item in fields])


def _codec_for(hint: Any) -> tuple[Encode, Decode]:
    """How a value of type ``hint`` is written and read."""
    if hint is FailureRecord:
        return FailureRecord.to_json, read_failure
    if hint is Usage:  # every count is written, zeros too
        return _all_fields, lambda data, key: decode(Usage, data)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        (inner,) = (arg for arg in args if arg is not type(None))
        write, read = _codec_for(inner)
        return write, lambda data, key: None if data.get(key) is None else read(data, key)
    if origin is Literal:
        return _same, _one_of(frozenset(args))
    if hint == tuple[ToolCall, ...]:
        return _calls_to_json, _calls
    scalars: dict[Any, Decode] = {int: read_int, str: read_str, bool: read_bool, float: read_float}
    if hint not in scalars:
        raise TypeError(f"no codec for {hint!r}")
    return _same, scalars[hint]


def _same(value: Any) -> Any:
    return value


def _all_fields(value: Any) -> dict[str, Any]:
    return {item.name: getattr(value, item.name) for item in dataclasses.fields(value)}


def _calls_to_json(calls: tuple[ToolCall, ...]) -> list[dict[str, str]]:
    return [{"id": call.id, "name": call.name, "arguments": call.arguments} for call in calls]


def _calls(data: Mapping[str, Any], key: str) -> tuple[ToolCall, ...]:
    raw_calls = data[key]
    if not isinstance(raw_calls, list):
        raise ValueError(f"{key} is not a list")
    calls = []
    for raw in raw_calls:
        if not isinstance(raw, dict):
            raise ValueError("a tool call is not an object")
        calls.append(
            ToolCall(read_str(raw, "id"), read_str(raw, "name"), read_str(raw, "arguments"))
        )
    return tuple(calls)


def read_failure(data: Mapping[str, Any], key: str) -> FailureRecord:
    """A failure record: under ``key``, or (flat, ``key`` empty) in ``data`` itself."""
    value = data[key] if key else data
    if not isinstance(value, dict):
        raise ValueError(f"{key} is not an object")
    return FailureRecord.from_json(value)


def _one_of(allowed: frozenset[str]) -> Decode:
    def decode(data: Mapping[str, Any], key: str) -> str:
        value = read_str(data, key)
        if value not in allowed:
            raise ValueError(f"unknown {key} {value!r}")
        return value

    return decode


def read_int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} is not an integer" if key in data else f"no {key}")
    return value


def read_float(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{key} is not a number" if key in data else f"no {key}")
    return float(value)


def read_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string" if key in data else f"no {key}")
    return value


def read_optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value


def read_bool(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} is not true or false")
    return value
