"""The session log's events of checkpoints and undo (SPEC 14), each fsynced when written.

    checkpoint   {turn, id, files, bytes, skipped}  before a turn's first call that may change files
    turn/changes {turn, changed}                    at its end: the paths it changed
    undo         {turns, restored, conflicts}       /undo, dsh --undo, and what /rewind restored
    redo         {turns, restored, conflicts}       /redo
    rewind       {to_turn}                          /rewind: that turn and later ones withdrawn

``checkpoint`` and ``turn/changes`` come inside their turn (``turn/changes`` before its
``turn/end``, or after an ``interrupted`` end, written when the session is resumed); the others
between turns. A path names a file, a link, or a directory (ending in ``/``) relative to the
working directory. :mod:`dsh_core.session.events` makes them records of the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from .codec import read_int, read_str

__all__ = ["CheckpointTaken", "RedoDone", "Rewound", "TurnChanges", "UndoDone"]


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{key} is not a list of strings")
    return tuple(value)


def _integers(data: Mapping[str, Any], key: str) -> tuple[int, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) for item in value
    ):
        raise ValueError(f"{key} is not a list of integers")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class CheckpointTaken:
    """The working directory was checkpointed before the turn's first change (fsynced)."""

    TYPE: ClassVar[str] = "checkpoint"
    turn: int
    id: str
    """The checkpoint in ``$DSH_HOME/checkpoints``."""
    files: int
    """Files and links it holds."""
    bytes: int
    """Their size."""
    skipped: tuple[str, ...] = ()
    """What it does not hold: files over the size cap, what could not be read."""

    def to_data(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "id": self.id,
            "files": self.files,
            "bytes": self.bytes,
            "skipped": list(self.skipped),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> CheckpointTaken:
        return cls(
            read_int(data, "turn"),
            read_str(data, "id"),
            read_int(data, "files"),
            read_int(data, "bytes"),
            _strings(data, "skipped"),
        )


@dataclass(frozen=True, slots=True)
class TurnChanges:
    """What the turn changed in the working directory, since its checkpoint (fsynced)."""

    TYPE: ClassVar[str] = "turn/changes"
    turn: int
    changed: tuple[str, ...]

    def to_data(self) -> dict[str, Any]:
        return {"turn": self.turn, "changed": list(self.changed)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TurnChanges:
        return cls(read_int(data, "turn"), _strings(data, "changed"))


@dataclass(frozen=True, slots=True)
class _Restored:
    """Files of some turns put back (fsynced, once the files are)."""

    TYPE: ClassVar[str]
    turns: tuple[int, ...]
    restored: tuple[str, ...]
    conflicts: tuple[str, ...] = ()
    """Paths left as they were: changed since, or behind a link."""

    def to_data(self) -> dict[str, Any]:
        return {
            "turns": list(self.turns),
            "restored": list(self.restored),
            "conflicts": list(self.conflicts),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            _integers(data, "turns"), _strings(data, "restored"), _strings(data, "conflicts")
        )


@dataclass(frozen=True, slots=True)
class UndoDone(_Restored):
    """Files of ``turns`` put back as they were before them."""

    TYPE: ClassVar[str] = "undo"


@dataclass(frozen=True, slots=True)
class RedoDone(_Restored):
    """What the last undo took back, put back as its turns had left it."""

    TYPE: ClassVar[str] = "redo"


@dataclass(frozen=True, slots=True)
class Rewound:
    """Turn ``to_turn`` and every later one are withdrawn from what the model sees (fsynced)."""

    TYPE: ClassVar[str] = "rewind"
    to_turn: int

    def to_data(self) -> dict[str, Any]:
        return {"to_turn": self.to_turn}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Rewound:
        return cls(read_int(data, "to_turn"))
