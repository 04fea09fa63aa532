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
from ..records import maker

__all__ = [
    "FLAT",
    "Codec",
    "decode",
    "decoder",
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
    hint: Any
    """The field's type, for :func:`_compile`'s inlined checks."""
    mode: Literal["flat", "default", "absent", "required"]
    """Which of :func:`_reader`'s rules reads it."""
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
        absent = item.metadata.get("absent", _REQUIRED)
        read = _reader(item.name, decode, default, absent, flat)
        mode: Literal["flat", "default", "absent", "required"] = (
            "flat"
            if flat
            else "default"
            if default is not _REQUIRED
            else "absent"
            if absent is not _REQUIRED
            else "required"
        )
        made.append(_Field(item.name, hints[item.name], mode, encode, read, default, flat))
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
    fast = _FAST.get(cls)
    if fast is None:
        fast = _FAST[cls] = _compile(cls)
    return fast(data)


def decoder(cls: type[Codec]) -> Callable[[Mapping[str, Any]], Any]:
    """``cls.from_data`` as one function: its compiled :func:`decode`, unless the class reads
    its data its own way (then that method)."""
    if cls.from_data.__func__ is not Codec.from_data.__func__:  # type: ignore[attr-defined]
        return cls.from_data
    fast = _FAST.get(cls)
    if fast is None:
        fast = _FAST[cls] = _compile(cls)
    return fast


def _decode_slowly(cls: type, data: Mapping[str, Any]) -> Any:
    """:func:`decode` field by field through each field's reader: the one that says what is
    wrong, and the rules :func:`_compile`'s code must agree with."""
    fields = _FIELDS.get(cls) or _fields(cls)
    return cls(*[item.read(data) for item in fields])


_FAST: dict[type, Callable[[Mapping[str, Any]], Any]] = {}
_INLINED: dict[Any, type] = {
    int: int,
    str: str,
    bool: bool,
    int | None: int,
    str | None: str,
    bool | None: bool,
}
"""Field types whose check :func:`_compile` writes inline: an exact class (what ``json.loads``
makes); ``X | None`` lets null through, as its reader does."""
_MISSING: Any = object()
"""Sentinel: the key is not in the line's data."""


def _compile(cls: type) -> Callable[[Mapping[str, Any]], Any]:
    """A decoder for ``cls`` with its int, str and bool fields read inline, compiled per class.

    Resuming a long session decodes tens of thousands of lines, and a reader call and a lambda
    per field were most of it. The code only accepts: any value it does not expect sends the
    whole object to :func:`_decode_slowly`, so what is accepted, and every error, is the same.
    Other types (literals, tool calls, failures, flat usage) go through their readers as ever,
    a default one only when the key holds something.
    """
    fields = _FIELDS.get(cls) or _fields(cls)
    scope: dict[str, Any] = {
        "cls": cls,
        "make": maker(cls),
        "slow": _decode_slowly,
        "MISSING": _MISSING,
    }
    lines = ["def fast(data):", "    get = data.get"]
    for index, item in enumerate(fields):
        value, key = f"v{index}", repr(item.name)
        checked = _INLINED.get(item.hint)
        scope[f"read{index}"] = item.read
        scope[f"default{index}"] = item.default
        if item.mode == "flat" and item.hint is Usage:  # a step's counts, on every usage line
            scope[f"read{index}"] = _FAST.get(Usage) or _FAST.setdefault(Usage, _compile(Usage))
        if item.mode == "flat" or (checked is None and item.mode != "default"):
            lines.append(f"    {value} = read{index}(data)")
            continue
        if checked is None:  # a default, and its reader's own rule: null or missing is it
            lines.append(f"    {value} = get({key})")
            lines.append(f"    {value} = default{index} if {value} is None else read{index}(data)")
            continue
        scope[f"type{index}"] = checked
        bad = f"{value}.__class__ is not type{index}"
        if item.hint in (int | None, str | None, bool | None):
            bad = f"{value} is not None and {bad}"
        if item.mode == "default":
            lines.append(f"    {value} = get({key})")
            lines.append(f"    if {value} is None:")
            lines.append(f"        {value} = default{index}")
            lines.append(f"    elif {bad}:")
        elif item.mode == "absent":  # a missing key means what an older dsh meant; null does not
            scope[f"absent{index}"] = item.read({})
            lines.append(f"    {value} = get({key}, MISSING)")
            lines.append(f"    if {value} is MISSING:")
            lines.append(f"        {value} = absent{index}")
            lines.append(f"    elif {bad}:")
        else:
            lines.append(f"    {value} = get({key})")
            lines.append(f"    if {bad}:")
        lines.append("        return slow(cls, data)")
    lines.append(f"    return make({', '.join(f'v{i}' for i in range(len(fields)))})")
    exec("\n".join(lines), scope)  # our own text, made of the class's field names
    made: Callable[[Mapping[str, Any]], Any] = scope["fast"]
    return made


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
    make = _MAKE_CALL
    for raw in raw_calls:
        if not isinstance(raw, dict):
            raise ValueError("a tool call is not an object")
        get = raw.get
        call_id, name, arguments = get("id"), get("name"), get("arguments")
        if not (call_id.__class__ is name.__class__ is arguments.__class__ is str):
            call_id, name = read_str(raw, "id"), read_str(raw, "name")
            arguments = read_str(raw, "arguments")  # one of them raises, saying which
        calls.append(make(call_id, name, arguments))
    return tuple(calls)


_MAKE_CALL = maker(ToolCall)


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
