"""Checkpoints and undo for one session: what the loop asks before a change and at a turn's end,
and what ``/undo``, ``/redo``, ``/rewind`` and ``dsh --undo`` do (SPEC 14).

    checkpoints = Checkpoints(home / "checkpoints", root, session=log.id, fences=fences)
    record = await checkpoints.before_change(turn)      # CheckpointTaken: on disk, then the call
    changes = checkpoints.at_turn_end(turn)             # TurnChanges, or None: no checkpoint
    ...
    restoration = checkpoints.plan_undo(log.events)     # or a sentence saying why there is none
    outcome = checkpoints.carry_out(log, restoration)   # files back, then ``undo`` in the log

What was done is read back from the session log, never kept elsewhere: a turn with a
``checkpoint`` event changed files if its ``turn/changes`` lists any; ``undo`` and ``redo``
events say which turns' changes are taken back now; ``rewind`` withdraws turns for good. The
store holds each checkpoint's trees (before the turn, and after it once it ended), so an undo
in a later process (a resume, ``dsh --undo``) finds what it needs. A turn left open by a crash
has no ``after``: :meth:`Checkpoints.settle` takes it when the session is resumed, from the
tree as it is then, so that ``/undo`` restores the interrupted turn's changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..chain import error_chain
from ..errors import CHECKPOINT, HarnessError
from ..session import SessionLog
from ..session.events import (
    SessionEvent,
    ToolCallStarted,
    ToolOutput,
    TurnEnd,
    TurnStart,
    UserText,
)
from ..session.undo import CheckpointTaken, RedoDone, Rewound, TurnChanges, UndoDone

if TYPE_CHECKING:  # imported at first use: a run that changes no file pays nothing for them
    from .restore import Conflict, Plan
    from .snapshot import Change, Snapshot, Snapshotter
    from .store import CheckpointStore

__all__ = [
    "CheckpointNote",
    "Checkpoints",
    "Outcome",
    "Restoration",
    "TurnFiles",
    "changed_paths",
    "not_covered_note",
    "turn_files",
    "withdrawn_turns",
]

CHANGING_KINDS = frozenset(("write", "shell", "mcp"))
"""What a call that can change files is (its :class:`~dsh_core.tools.Access` kind)."""

State = Literal["done", "undone", "withdrawn"]


@dataclass(frozen=True, slots=True)
class CheckpointNote:
    """Live event of the loop: what a checkpoint does not cover, or why undo cannot cover a
    turn (SPEC 14); a notice."""

    text: str


@dataclass(slots=True)
class TurnFiles:
    """A turn that took a checkpoint, as the log tells it."""

    turn: int
    checkpoint: str
    changed: tuple[str, ...] | None
    """What it changed; None when its end was not recorded (a crash)."""
    state: State = "done"
    """``undone``: an undo took its changes back (until a redo); ``withdrawn``: rewound."""
    message: str = ""
    """The person's message that started it."""
    skipped: tuple[str, ...] = ()
    """What its checkpoint did not hold (over the size cap, unreadable)."""
    effects: list[str] = field(default_factory=list)
    """What it did that no undo reaches: writes outside, commands, MCP calls."""


@dataclass(frozen=True, slots=True)
class Restoration:
    """An undo, redo or rewind, planned: what it would put back, and what it would leave."""

    kind: Literal["undo", "redo", "rewind"]
    turns: tuple[int, ...]
    plan: Plan
    to_turn: int | None = None
    """For a rewind: the turn withdrawn with every later one."""
    message: str = ""
    """For a rewind: the withdrawn turn's message, to put back in the prompt."""
    not_covered: tuple[str, ...] = ()
    """What these turns did that it cannot take back, in words."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What carrying out a restoration did."""

    restoration: Restoration
    restored: tuple[str, ...]
    left: tuple[Conflict, ...]
    """Conflicts left as they were, and paths that could not be written."""


def turn_files(events: Sequence[SessionEvent], root: str | None = None) -> list[TurnFiles]:
    """Every turn that took a checkpoint, oldest first, with its state now."""
    found: dict[int, TurnFiles] = {}
    messages: dict[int, str] = {}
    calls: dict[int, list[ToolCallStarted]] = {}
    started: list[int] = []
    for event in events:
        record = event.record
        if isinstance(record, TurnStart):
            started.append(record.turn)
        elif isinstance(record, UserText):
            messages[record.turn] = record.text
        elif isinstance(record, ToolCallStarted):
            calls.setdefault(record.turn, []).append(record)
        elif isinstance(record, CheckpointTaken):
            found[record.turn] = TurnFiles(record.turn, record.id, None, skipped=record.skipped)
        elif isinstance(record, TurnChanges) and record.turn in found:
            found[record.turn].changed = record.changed
        elif isinstance(record, UndoDone | RedoDone):
            for turn in record.turns:
                if turn in found and found[turn].state != "withdrawn":
                    found[turn].state = "undone" if isinstance(record, UndoDone) else "done"
        elif isinstance(record, Rewound):
            for turn in started:
                if turn >= record.to_turn and turn in found:
                    found[turn].state = "withdrawn"
    for turn, files in found.items():
        files.message = messages.get(turn, "")
        files.effects = _effects(calls.get(turn, []), root)
    return [found[turn] for turn in sorted(found)]


def withdrawn_turns(events: Sequence[SessionEvent]) -> set[int]:
    """The turns a ``rewind`` withdrew."""
    started: list[int] = []
    withdrawn: set[int] = set()
    for event in events:
        record = event.record
        if isinstance(record, TurnStart):
            started.append(record.turn)
        elif isinstance(record, Rewound):
            withdrawn.update(turn for turn in started if turn >= record.to_turn)
    return withdrawn


def changed_paths(changes: Sequence[Change]) -> tuple[str, ...]:
    """The paths a turn changed, as ``turn/changes`` lists them (a directory ends in ``/``)."""
    return tuple(change.path + "/" if _is_directory(change) else change.path for change in changes)


def _is_directory(change: Change) -> bool:
    from .snapshot import DIRECTORY

    entry = change.after if change.after is not None else change.before
    return entry is not None and entry.kind == DIRECTORY


def _effects(calls: list[ToolCallStarted], root: str | None) -> list[str]:
    """What a turn's calls did that an undo of files in the working directory cannot reach."""
    effects: list[str] = []
    outside: list[str] = []
    ran = {call.name for call in calls}
    for call in calls:
        if call.name not in ("write", "edit") or root is None:
            continue
        try:
            path = json.loads(call.arguments).get("file_path")
        except (ValueError, AttributeError):
            continue
        if isinstance(path, str):
            real = os.path.realpath(os.path.join(root, os.path.expanduser(path)))
            if os.path.commonpath([real, root]) != root:
                outside.append(real)
    if outside:
        effects.append("writes outside the working directory: " + ", ".join(sorted(set(outside))))
    if "bash" in ran:
        effects.append("what its commands did beyond these files (a database, the network)")
    if any(name.startswith("mcp__") for name in ran):
        effects.append("what its MCP calls did beyond these files")
    return effects


class Checkpoints:
    """Checkpoints of one working directory for one session, and undoing them."""

    def __init__(
        self,
        directory: Path,
        root: str,
        *,
        session: str,
        fences: Callable[[str], Mapping[str, str]] | None = None,
        max_file_bytes: int | None = None,
    ) -> None:
        """``directory``: the store's (``$DSH_HOME/checkpoints``); ``root``: the working
        directory, resolved; ``fences``: what a walk never enters (credentials, DSH_HOME);
        ``max_file_bytes``: the size cap (default :data:`.snapshot.MAX_FILE_BYTES`)."""
        self.directory = directory
        self.root = root
        self.session = session
        self._fences = fences
        self._max_file_bytes = max_file_bytes
        self._store: CheckpointStore | None = None
        self._snapshotter: Snapshotter | None = None
        self._before: dict[int, tuple[str, Snapshot]] = {}
        """This run's checkpoints by turn, while their turn runs."""
        self._pruned = False

    @property
    def store(self) -> CheckpointStore:
        """The store, opened at first use (no run pays for SQLite before a change)."""
        if self._store is None:
            from .store import CheckpointStore

            self._store = CheckpointStore.open(self.directory)
        return self._store

    @property
    def snapshotter(self) -> Snapshotter:
        if self._snapshotter is None:
            from .snapshot import MAX_FILE_BYTES, Snapshotter

            self._snapshotter = Snapshotter(
                self.store,
                self.root,
                fences=self._fences,
                max_file_bytes=self._max_file_bytes or MAX_FILE_BYTES,
            )
        return self._snapshotter

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
            self._snapshotter = None

    # -- the loop's side ----------------------------------------------------------------------

    async def before_change(
        self, turn: int, log: SessionLog, observer: Callable[[CheckpointNote], None]
    ) -> ToolOutput | None:
        """Before a call that can change files: the turn's checkpoint, unless it has one.
        Taken in a thread (Ctrl-C stays live), durable in the store, then its ``checkpoint``
        event in ``log`` (fsynced) before the call runs; what it does not hold is a notice.
        When it cannot be taken: the call's result, not run, saying why (a change that undo
        could not cover is not made behind the person's back)."""
        if turn in self._before:
            return None
        stop = threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(self._take_before, turn, stop))
        try:
            taken = await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()  # the walk stops between directories; nothing is recorded
            with contextlib.suppress(BaseException):
                await work
            raise
        except (HarnessError, OSError) as exc:  # the store (CheckpointError), the tree
            refusal = HarnessError(
                "not run: the checkpoint before it could not be taken, so undo could not "
                "cover it (dsh --no-checkpoints goes on without undo)",
                CHECKPOINT,
            )
            refusal.__cause__ = exc
            return ToolOutput.failed(refusal)
        log.append(taken, durable=True)
        if taken.skipped:
            observer(CheckpointNote(not_covered_note(taken.skipped)))
        return None

    def _take_before(self, turn: int, stop: threading.Event) -> CheckpointTaken:
        from .restore import root_identity
        from .store import CheckpointRow

        identity = root_identity(self.root)
        snapshot = self.snapshotter.take(stop=stop)
        checkpoint = f"{self.session}.{turn}"
        row = CheckpointRow(
            checkpoint,
            _directory_key(self.root, identity),
            self.session,
            turn,
            snapshot.root,
            None,
            time.time(),
        )
        with self.store.writing():
            self.store.record(row)
        self._before[turn] = (checkpoint, snapshot)
        self._prune_once()
        return CheckpointTaken(turn, checkpoint, snapshot.files, snapshot.bytes, snapshot.skipped)

    def at_turn_end(
        self, turn: int, observer: Callable[[CheckpointNote], None]
    ) -> list[TurnChanges]:
        """What turn ``turn`` changed since its checkpoint, to write with its end (none: it
        took no checkpoint); the tree as it is now is stored as the checkpoint's ``after``.
        Synchronous: a turn's end is written whatever happens, and this is part of it; a
        failure is a notice."""
        changes = self._changes(turn)
        if isinstance(changes, str):
            observer(CheckpointNote(changes))
            return []
        return [changes] if changes is not None else []

    def _changes(self, turn: int) -> TurnChanges | str | None:
        from .snapshot import diff

        taken = self._before.pop(turn, None)
        if taken is None:
            return None
        checkpoint, before = taken
        try:
            after = self.snapshotter.take(rules_from=before)
            with self.store.writing():
                self.store.set_after(checkpoint, after.root)
            changed = changed_paths(diff(self.store, before.root, after.root))
        except Exception as exc:  # the turn's end is written whatever happens here
            return f"what turn {turn} changed could not be recorded: {error_chain(exc)}"
        return TurnChanges(turn, changed)

    def settle(self, log: SessionLog) -> TurnChanges | None:
        """After a crash: the changes of a checkpointed turn whose end was never recorded,
        from the tree as it is now, written to ``log`` (fsynced). None when there is none."""
        from .snapshot import diff

        events = log.events
        pending = [
            files for files in turn_files(events) if files.changed is None and files.state == "done"
        ]
        if not pending or _open_turn(events):
            return None
        files = pending[-1]
        row = self.store.row(files.checkpoint)
        if row is None:
            return None
        if row.after is None:
            after = self.snapshotter.take()
            with self.store.writing():
                self.store.set_after(files.checkpoint, after.root)
            row = self.store.row(files.checkpoint)
            assert row is not None and row.after is not None
        assert row.after is not None
        record = TurnChanges(files.turn, changed_paths(diff(self.store, row.before, row.after)))
        log.append(record, durable=True)
        return record

    def _prune_once(self) -> None:
        """Prune the store at the first checkpoint of a run (in its thread), keeping this
        session's checkpoints."""
        from .snapshot import tree_children
        from .store import CheckpointError

        if self._pruned:
            return
        self._pruned = True
        store = self.store
        with contextlib.suppress(CheckpointError):
            store.prune(
                keep_session=self.session, children=lambda digest: tree_children(store, digest)
            )

    # -- the person's side --------------------------------------------------------------------

    def plan_undo(self, events: Sequence[SessionEvent]) -> Restoration | str:
        """``/undo``: the most recent turn whose changes are in place; a sentence when none."""
        turns = [f for f in turn_files(events, self.root) if f.state == "done" and f.changed != ()]
        if not turns:
            return "nothing to undo: no turn of this session changed files that are not undone"
        files = turns[-1]
        return self._restoration("undo", [files], "before")

    def plan_redo(self, events: Sequence[SessionEvent]) -> Restoration | str:
        """``/redo``: what the last undo took back, unless a turn changed files since."""
        last: UndoDone | None = None
        for event in events:
            record = event.record
            if isinstance(record, UndoDone):
                last = record
            elif isinstance(record, RedoDone | Rewound) or (
                isinstance(record, TurnChanges) and record.changed
            ):
                last = None
        if last is None or not last.turns:
            return "nothing to redo: no undo since the last change"
        by_turn = {f.turn: f for f in turn_files(events, self.root)}
        files = [by_turn[turn] for turn in last.turns if turn in by_turn]
        return self._restoration("redo", files, "after")

    def rewindable(self, events: Sequence[SessionEvent]) -> list[tuple[int, str, tuple[str, ...]]]:
        """The turns ``/rewind`` may go back to: (turn, message, files it changed), oldest
        first; not those a compaction in force has summarised."""
        withdrawn = withdrawn_turns(events)
        changed = {f.turn: (f.changed or ()) for f in turn_files(events) if f.state == "done"}
        after_compaction = _turns_after_last_compaction(events)
        listed = []
        for event in events:
            record = event.record
            if (
                isinstance(record, UserText)
                and record.turn not in withdrawn
                and record.turn in after_compaction
            ):
                listed.append((record.turn, record.text, changed.get(record.turn, ())))
        return listed

    def plan_rewind(self, events: Sequence[SessionEvent], to_turn: int) -> Restoration | str:
        """``/rewind``: files as before ``to_turn``, and it and every later turn withdrawn."""
        turns = {turn: text for turn, text, _ in self.rewindable(events)}
        if to_turn not in turns:
            return f"turn {to_turn} cannot be rewound to (/rewind lists the turns that can)"
        files = [
            f
            for f in turn_files(events, self.root)
            if f.turn >= to_turn and f.state == "done" and f.changed != ()
        ]
        restoration = self._restoration("rewind", files, "before")
        return Restoration(
            "rewind",
            restoration.turns,
            restoration.plan,
            to_turn,
            turns[to_turn],
            restoration.not_covered,
        )

    def _restoration(
        self,
        kind: Literal["undo", "redo", "rewind"],
        turns: Sequence[TurnFiles],
        towards: Literal["before", "after"],
    ) -> Restoration:
        """The changes of ``turns`` merged (each path from the first turn's before to the last
        one's after), planned against the tree as it is."""
        from .restore import plan_restore
        from .snapshot import Change, diff
        from .store import CheckpointError

        merged: dict[str, Change] = {}
        identity: tuple[int, int] | None = None
        for files in sorted(turns, key=lambda f: f.turn):
            row = self.store.row(files.checkpoint)
            if row is None or row.after is None:
                raise CheckpointError(
                    f"the checkpoint of turn {files.turn} is no longer in {self.directory} "
                    "(pruned, or the store was removed): its files cannot be put back"
                )
            identity = _identity_of(row.directory)
            for change in diff(self.store, row.before, row.after):
                earlier = merged.get(change.path)
                before = earlier.before if earlier is not None else change.before
                merged[change.path] = Change(change.path, before, change.after)
        changes = [change for change in merged.values() if change.before != change.after]
        changes.sort(key=lambda change: change.path)
        plan = plan_restore(self.root, identity, changes, towards=towards)
        not_covered = _not_covered(turns)
        return Restoration(kind, tuple(f.turn for f in turns), plan, not_covered=not_covered)

    def carry_out(
        self, log: SessionLog, restoration: Restoration, *, overwrite_conflicts: bool = False
    ) -> Outcome:
        """Put the files back, then record it in ``log`` (fsynced): ``undo`` (and ``rewind``
        for a rewind) or ``redo``. ``overwrite_conflicts``: the person said to put back the
        files changed since too."""
        from .restore import Applied, apply_restore, overwrite
        from .store import CheckpointError

        plan = overwrite(restoration.plan) if overwrite_conflicts else restoration.plan
        applied: Applied = apply_restore(self.store, plan) if plan.steps else Applied()
        left = (*plan.conflicts, *applied.failed)
        restored = tuple(applied.restored)
        conflicts = tuple(sorted({conflict.path for conflict in left}))
        records: list[UndoDone | RedoDone | Rewound] = []
        if restoration.kind == "redo":
            records.append(RedoDone(restoration.turns, restored, conflicts))
        elif restoration.turns:
            records.append(UndoDone(restoration.turns, restored, conflicts))
        if restoration.kind == "rewind":
            assert restoration.to_turn is not None
            records.append(Rewound(restoration.to_turn))
        if records:
            log.extend(records, durable=True)
        with contextlib.suppress(CheckpointError):
            self.store.touch(f"{self.session}.{turn}" for turn in restoration.turns)
        return Outcome(restoration, restored, left)


def _directory_key(root: str, identity: tuple[int, int]) -> str:
    """What a checkpoint row says of the directory: its path, device and inode."""
    return f"{identity[0]}:{identity[1]}:{root}"


def _identity_of(directory: str) -> tuple[int, int] | None:
    device, _, rest = directory.partition(":")
    inode, _, _ = rest.partition(":")
    try:
        return int(device), int(inode)
    except ValueError:
        return None


def _open_turn(events: Sequence[SessionEvent]) -> bool:
    for event in reversed(events):
        if isinstance(event.record, TurnEnd):
            return False
        if isinstance(event.record, TurnStart):
            return True
    return False


def _turns_after_last_compaction(events: Sequence[SessionEvent]) -> set[int]:
    """Turns that started after the last compaction that took effect (all, when none did)."""
    from ..session.events import CompactionEnd

    last = -1
    for event in events:
        if isinstance(event.record, CompactionEnd):
            last = event.seq
    return {
        event.record.turn
        for event in events
        if isinstance(event.record, TurnStart) and event.seq > last
    }


def not_covered_note(skipped: Sequence[str]) -> str:
    """The notice for what a checkpoint did not hold."""
    more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    return f"not covered by undo: {', '.join(skipped[:5])}{more}"


def _not_covered(turns: Sequence[TurnFiles]) -> tuple[str, ...]:
    from .snapshot import MAX_FILE_BYTES

    said: list[str] = []
    skipped = sorted({path for files in turns for path in files.skipped})
    if skipped:
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        cap = f"over {MAX_FILE_BYTES >> 20} MiB, or unreadable"
        said.append(f"files its checkpoint did not hold ({cap}): {', '.join(skipped[:5])}{more}")
    for files in turns:
        for effect in files.effects:
            if effect not in said:
                said.append(effect)
    return tuple(said)
