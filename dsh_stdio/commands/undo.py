"""``dsh --undo [ID]`` and ``dsh --changes [ID]``, and the words ``/undo`` and its kin show.

    status = undo_session(config, out, err)        # /undo of a session, without a REPL
    status = print_changes(config, out, err, terminal=out.isatty())

``--undo`` opens the session (the newest of this directory by default, or ``ID``: a unique
start of one) as a resume does: locked, a crash's damage repaired and the interrupted turn's
changes recorded; then it puts back the files of the most recent turn whose changes are in
place. A file changed since that turn ended is left as it is and named: exit status 1
(SPEC 14). ``--changes`` only reads, as ``--show`` does: each checkpointed turn, the files it
changed, and a unified diff of each from the checkpoint store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dsh_core.chain import error_chain
from dsh_core.checkpoints.restore import Conflict
from dsh_core.checkpoints.turns import Checkpoints, Outcome, Restoration, TurnFiles, turn_files
from dsh_core.errors import HarnessError
from dsh_core.session import SessionStore, read_log
from dsh_core.tools.diff import unified_diff

from ..config import Config, StartupError
from ..render import neutralise, writable
from ..run.checkpointing import CHECKPOINTS_DIR, checkpoints_off
from ..status import EXIT_FAILED, EXIT_OK
from .sessions import _resolve, session_id

if TYPE_CHECKING:
    from dsh_core.checkpoints.snapshot import Change
    from dsh_core.checkpoints.store import CheckpointStore

__all__ = [
    "conflict_lines",
    "outcome_lines",
    "print_changes",
    "restoration_heading",
    "undo_session",
]

NAMED = 20
"""Paths a line of the undo's report names; the rest are counted."""


def restoration_heading(restoration: Restoration) -> str:
    """``undo turn 3 ("fix the tests")``: what is being taken back."""
    turns = ", ".join(str(turn) for turn in restoration.turns) or "none"
    word = "turn" if len(restoration.turns) == 1 else "turns"
    if restoration.kind == "rewind":
        return f"rewind to turn {restoration.to_turn} (files of {word} {turns})"
    return f"{restoration.kind} {word} {turns}"


def _named(paths: list[str]) -> str:
    more = f" and {len(paths) - NAMED} more" if len(paths) > NAMED else ""
    return ", ".join(paths[:NAMED]) + more


def conflict_lines(conflicts: tuple[Conflict, ...]) -> list[str]:
    """One line per conflict: the path and why it is left (changed since, a link on its way)."""
    return [f"  {conflict.path}: {conflict.why}" for conflict in conflicts]


def outcome_lines(outcome: Outcome) -> list[str]:
    """What an undo, redo or rewind did, for a person: the heading and what went back, what
    was left, and what it never covers."""
    restoration = outcome.restoration
    removed = {s.path for s in restoration.plan.steps if s.target is None}
    shown = [f"{path} (removed)" if path in removed else path for path in outcome.restored]
    lines = [f"[{restoration_heading(restoration)}] restored {len(shown)}: {_named(shown)}"]
    if not shown:
        lines = [f"[{restoration_heading(restoration)}] nothing to put back"]
    if outcome.left:
        lines.append(f"left as they are ({len(outcome.left)}):")
        lines += conflict_lines(outcome.left)
    for effect in restoration.not_covered:
        lines.append(f"not covered by undo: {effect}")
    return lines


def undo_session(config: Config, out: TextIO, err: TextIO, cwd: Path | None = None) -> int:
    """``dsh --undo [ID]``: 0 when everything went back (or there was nothing to undo), 1 when
    a file was left (named on stderr). Raises StartupError (a session that cannot be opened,
    a store that cannot be used) for the front door's one line, exit status 2."""
    here = cwd if cwd is not None else Path.cwd()
    store = SessionStore(config.home)
    ref = config.target or "last"
    if ref == "last":
        found = store.newest(here)
        if found is None:
            raise StartupError(f"no sessions yet for {here}: nothing to undo")
        log, report = found
    else:
        log, report = store.open(session_id(store, ref))
    try:
        for notice in report.notices:
            _note(err, notice)
        root = os.path.realpath(log.cwd)
        off = checkpoints_off(config, Path(root))
        if off is not None and not config.checkpoints:
            off = None  # --no-checkpoints stops new ones; the old ones can still be undone
        if off is not None:
            raise StartupError(f"no undo here: checkpoints are {off}")
        checkpoints = Checkpoints(config.home / CHECKPOINTS_DIR, root, session=log.id)
        try:
            checkpoints.settle(log)
            restoration = checkpoints.plan_undo(log.events)
            if isinstance(restoration, str):
                _note(err, f"session {log.id}: {restoration}")
                return EXIT_OK
            outcome = checkpoints.carry_out(log, restoration)
        except HarnessError as exc:
            raise StartupError(f"cannot undo in session {log.id}: {error_chain(exc)}") from None
        finally:
            checkpoints.close()
    finally:
        log.close()
    lines = outcome_lines(outcome)
    out.write(neutralise(lines[0]) + "\n")
    for line in lines[1:]:
        _note(err, line)
    out.flush()
    return EXIT_FAILED if outcome.left else EXIT_OK


def print_changes(
    config: Config, out: TextIO, err: TextIO, *, terminal: bool, cwd: Path | None = None
) -> int:
    """``dsh --changes [ID]``: each checkpointed turn of the session, the files it changed, and
    a unified diff of each. Reads only. 0, or 1 when stdout failed or the store is gone."""
    here = cwd if cwd is not None else Path.cwd()
    store = SessionStore(config.home)
    session = read_log(_resolve(store, here, config.target or "last"))
    root = os.path.realpath(session.cwd) if session.cwd else str(here)
    turns = turn_files(session.events, root)
    if not turns:
        _note(err, f"session {session.id}: no turn changed files (none took a checkpoint)")
        return EXIT_OK
    from dsh_core.checkpoints.store import CheckpointError, CheckpointStore

    try:
        checkpoints: CheckpointStore | None = CheckpointStore.open(
            config.home / CHECKPOINTS_DIR, read_only=True
        )
    except CheckpointError as exc:
        _note(err, f"no diffs: {error_chain(exc)}")
        checkpoints = None
    try:
        for files in turns:
            out.write(_turn_text(files, checkpoints, terminal))
        out.flush()
    except OSError as exc:
        _note(err, f"cannot write to standard output: {error_chain(exc)}")
        return EXIT_FAILED
    finally:
        if checkpoints is not None:
            checkpoints.close()
    return EXIT_OK if checkpoints is not None else EXIT_FAILED


def _turn_text(files: TurnFiles, store: CheckpointStore | None, terminal: bool) -> str:
    from dsh_core.checkpoints.snapshot import diff
    from dsh_core.checkpoints.store import CheckpointError

    state = {"done": "", "undone": " (undone)", "withdrawn": " (withdrawn by /rewind)"}
    first = files.message.split("\n", 1)[0][:60]
    changed = files.changed
    count = (
        "changes not recorded (the turn was cut short)"
        if changed is None
        else (f"{len(changed)} changed")
    )
    lines = [neutralise(f"turn {files.turn}{state[files.state]}: {first!r}: {count}")]
    if store is None:
        lines += [neutralise(f"  {path}") for path in changed or ()]
        return "\n".join(lines) + "\n"
    try:
        row = store.row(files.checkpoint)
        if row is None or row.after is None:
            raise CheckpointError(f"checkpoint {files.checkpoint} is not in the store")
        for change in diff(store, row.before, row.after):
            lines.append(_change_text(store, change, terminal))
    except CheckpointError as exc:
        lines.append(neutralise(f"  (no diff: {error_chain(exc)})"))
    return "\n".join(lines) + "\n"


def _change_text(store: CheckpointStore, change: Change, terminal: bool) -> str:
    from dsh_core.checkpoints.snapshot import DIRECTORY, LINK, Entry

    path = change.path

    def text(entry: Entry | None) -> str | None:
        if entry is None:
            return None
        if entry.kind == LINK:
            return f"-> {os.fsdecode(entry.ref)}\n"
        data = store.get(entry.ref)
        if b"\0" in data[:8192]:
            return f"(binary, {len(data):,} bytes)\n"
        return data.decode("utf-8", "replace")

    before, after = change.before, change.after
    kinds = {before.kind if before else None, after.kind if after else None}
    if DIRECTORY in kinds:
        what = (
            "directory created"
            if before is None
            else "directory removed"
            if after is None
            else f"mode {before.mode:o} -> {after.mode:o}"
        )
        return neutralise(f"  {path}/: {what}")
    old, new = text(before), text(after)
    header = ""
    if before is not None and after is not None and before.mode != after.mode:
        header = neutralise(f"  {path}: mode {before.mode:o} -> {after.mode:o}") + "\n"
    if old == new:
        return header.rstrip("\n")
    body = unified_diff(path, old, new or "").rstrip("\n")
    body = neutralise(body) if terminal else writable(body)
    return header + body


def _note(err: TextIO, text: str) -> None:
    try:
        err.write(f"dsh: {neutralise(text)}\n")
        err.flush()
    except (OSError, ValueError):
        pass
