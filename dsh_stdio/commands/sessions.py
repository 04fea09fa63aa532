"""``dsh --sessions`` lists stored sessions; ``dsh --show ID|last`` prints one as a transcript.

Both only read (SPEC section 9): no lock, no repair, nothing created or touched, so a running
dsh can go on writing, and ``--continue`` afterwards picks the same session as before::

    status = list_sessions(config, sys.stdout, terminal=sys.stdout.isatty())
    status = show_session(config, "last", sys.stdout, terminal=sys.stdout.isatty())

(:func:`print_listing` and :func:`print_transcript` do the work on a store and a directory.)

``--show`` replays the stored records through the same :class:`~dsh_stdio.view.TurnView` that
showed the turns live, so by construction its output, without the ``> `` user lines and the
tool lines, is what a pipe run printed on stdout. What the log cannot give back: text that was
streamed by a process that was then killed (it was never recorded), and notices (retries,
usage), which a pipe prints on stderr anyway.

Errors that leave nothing to show (an unknown id, a path given for an id, an unreadable
sessions directory) are raised as :class:`~dsh_core.errors.SessionLogError` (or OSError), for
the front door to print as ``dsh: startup failed: <error_chain>`` with status 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from dsh_core.agent.loop import Compacted, Nested, ToolFinished, ToolStarting
from dsh_core.chain import error_chain
from dsh_core.checkpoints.turns import withdrawn_turns
from dsh_core.errors import SessionLogError
from dsh_core.model.seam import TextDelta, ToolCall
from dsh_core.session import (
    LOG_NAME,
    SUBAGENTS_DIR,
    SessionEvent,
    SessionStore,
    SessionSummary,
    read_log,
)
from dsh_core.session.events import (
    AssistantStep,
    CompactionEnd,
    CompactionPrune,
    CompactionSummary,
    Todo,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserText,
)
from dsh_core.session.undo import RedoDone, Rewound, UndoDone
from dsh_core.tools import Toolbox

from ..config import Config
from ..render import neutralise, todo_mark, writable
from ..status import EXIT_FAILED, EXIT_OK
from ..view import TurnView

__all__ = [
    "FIRST_LINE_WIDTH",
    "list_sessions",
    "print_listing",
    "print_transcript",
    "replay_events",
    "session_id",
    "show_session",
]

FIRST_LINE_WIDTH = 60
"""Characters of the first user message a listing line shows."""


Describe = Callable[[ToolCall], str]
"""A call's one-line summary, as :meth:`dsh_core.tools.Toolbox.describe` gives it."""


# --sessions


def list_sessions(
    config: Config,
    out: TextIO,
    *,
    terminal: bool,
    err: TextIO | None = None,
    cwd: Path | None = None,
) -> int:
    """``dsh --sessions [--all]``: :func:`print_listing` for the store and directory of this run.

    The listing is the same on a terminal and a pipe (always neutralised), so ``terminal``
    changes nothing; it is taken for symmetry with :func:`show_session`.
    """
    return print_listing(
        SessionStore(config.home),
        cwd if cwd is not None else Path.cwd(),
        all_directories=config.all_directories,
        out=out,
        err=err if err is not None else sys.stderr,
    )


def print_listing(
    store: SessionStore, cwd: Path, *, all_directories: bool, out: TextIO, err: TextIO
) -> int:
    """Print the sessions of ``cwd`` (or of every directory), newest first; return 0.

    A header row, then one line each: id, last activity (local time), turns, how the last turn
    ended (``open`` while a turn has no end: a running dsh, or one that died), with ``--all``
    the directory, then the first user message on one line. No sessions: one line on stderr
    saying so, and stdout stays empty. Raises SessionLogError when the sessions directory
    cannot be read.
    """
    summaries = store.summaries(None if all_directories else cwd)
    if not summaries:
        where = f"in {store.root}" if all_directories else f"for {cwd}"
        hint = "" if all_directories else " (dsh --sessions --all lists every directory's)"
        _note(err, f"no sessions yet {where}{hint}")
        return EXIT_OK
    header = ["SESSION", "LAST ACTIVITY", "TURNS", "LAST TURN"]
    header += ["DIRECTORY", "FIRST MESSAGE"] if all_directories else ["FIRST MESSAGE"]
    rows = [header]
    for summary in summaries:
        rows.append(_row(summary, all_directories))
        # A subagent's session, under the session whose call ran it.
        rows.extend(_row(child, all_directories, nested=True) for child in store.children(summary))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip() + "\n")
    try:
        out.write("".join(lines))
        out.flush()
    except OSError as exc:
        _note(err, f"cannot write to standard output: {error_chain(exc)}")
        return EXIT_FAILED
    return EXIT_OK


def _row(summary: SessionSummary, directory: bool, *, nested: bool = False) -> list[str]:
    updated = summary.updated.astimezone().strftime("%Y-%m-%d %H:%M")  # local time
    turns = f"{summary.turns} turn{'' if summary.turns == 1 else 's'}"
    name = f"  subagent {_safe(summary.id)}" if nested else _safe(summary.id)
    row = [name, updated, turns, _end_text(summary)]
    if directory:
        row.append(_safe(summary.cwd) if summary.cwd is not None else "?")
    row.append(_first_line(summary.first_user))
    return row


def _end_text(summary: SessionSummary) -> str:
    end = summary.last_end
    if summary.open:
        text = "open"
    elif end is None:
        text = ""
    elif end.kind == "error":
        text = f"error {end.failure.code}" if end.failure is not None else "error"
    else:
        text = end.name
    if summary.damage is not None:
        text = f"{text} damaged" if text else "damaged"
    return _safe(text) or "-"


def _first_line(text: str | None) -> str:
    """The message on one line (every run of whitespace one space), shortened, inert."""
    if not text:
        return "-"
    line = " ".join(text.split())
    if len(line) > FIRST_LINE_WIDTH:
        line = line[: FIRST_LINE_WIDTH - 1] + "…"
    return _safe(line)  # after the cut, which then never splits a ^[ in two


def _safe(text: str) -> str:
    return neutralise(text)


# --show


def show_session(
    config: Config,
    ref: str,
    out: TextIO,
    *,
    terminal: bool,
    err: TextIO | None = None,
    cwd: Path | None = None,
    describe: Describe | None = None,
) -> int:
    """``dsh --show ID|last``: :func:`print_transcript` for the store and directory of this run."""
    return print_transcript(
        SessionStore(config.home),
        cwd if cwd is not None else Path.cwd(),
        ref,
        out=out,
        err=err if err is not None else sys.stderr,
        terminal=terminal,
        describe=describe,
    )


def print_transcript(
    store: SessionStore,
    cwd: Path,
    ref: str,
    *,
    out: TextIO,
    err: TextIO,
    terminal: bool,
    describe: Describe | None = None,
) -> int:
    """Print the session ``ref`` (an id, or ``last``: the newest of ``cwd``) as a transcript.

    Each user message as lines beginning ``> ``, each tool call and result and each compaction
    as a terminal shows them, and, for each turn, what a pipe run printed on stdout: its text
    and outcome line; each undo, redo and rewind as a line in brackets, and a turn a rewind
    withdrew marked so before its message. On
    a terminal (``terminal``) text is neutralised; otherwise the model's text is passed
    through as the pipe run printed it. ``describe`` gives a call's summary (default: a toolbox
    without tools, which shows the call's arguments).

    Call it outside a running event loop (it runs one for TurnView). Returns 0, or 1 when the
    log is damaged (what can be read is shown, then each damaged place is named on stderr) or
    stdout failed. A session of another directory is shown, with
    a note on stderr. Raises SessionLogError when there is nothing to show: an unknown id, a
    path where an id belongs, no session yet for ``last``, an unreadable or newer-format log.
    """
    path = _resolve(store, cwd, ref)
    session = read_log(path)
    if session.cwd is not None and session.cwd != os.path.abspath(cwd):
        _note(err, f"session {session.id} was started in {session.cwd}")
    replay = replay_events(
        session.events, out, err, terminal, describe or Toolbox().describe, _children(path)
    )
    failed = asyncio.run(replay)
    if failed is not None:
        _note(err, f"cannot write to standard output: {error_chain(failed)}")
        return EXIT_FAILED
    if session.open_turn is not None:
        _note(
            err,
            f"turn {session.open_turn} of session {session.id} has not ended: a dsh is still "
            "running it, or one exited without ending it (resuming the session closes it)",
        )
    for problem in session.problems[:_PROBLEMS_NAMED]:
        _note(err, problem)
    if len(session.problems) > _PROBLEMS_NAMED:
        _note(err, f"and {len(session.problems) - _PROBLEMS_NAMED} more damaged lines in {path}")
    return EXIT_FAILED if session.problems else EXIT_OK


_PROBLEMS_NAMED = 5
"""Damaged places named one per line; the rest are counted."""


def _resolve(store: SessionStore, cwd: Path, ref: str) -> Path:
    """The log that ``ref`` names: ``last``, or a session id or its start (never a path)."""
    if ref == "last":
        path = store.newest_path(cwd)
        if path is None:
            raise SessionLogError(
                f"no sessions yet for {cwd} (dsh --sessions --all lists every directory's)"
            )
        return path
    if "/" in ref or os.sep in ref or ref.endswith(".jsonl"):
        found = _id_in_path(store, ref)
        hint = f": dsh --show {found}" if found else " (dsh --sessions lists them)"
        raise SessionLogError(f"{ref!r} is a path; --show takes a session id{hint}")
    return store.find(session_id(store, ref))


_ID_START = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""What a session id, or the start of one, may look like: nothing a glob would expand."""
_AMBIGUOUS_NAMED = 5
"""Ids named when a prefix matches several; the rest are counted."""


def session_id(store: SessionStore, ref: str) -> str:
    """The id of the one stored session whose id is ``ref`` or begins with it.

    Raises SessionLogError, with the way on, when no id or several ids begin with ``ref``.
    """
    if not _ID_START.fullmatch(ref):
        raise SessionLogError(f"{ref!r} is not a session id (dsh --sessions lists them)")
    if store.indexed(ref):  # a whole id, as dsh printed it: one look, however many are stored
        return ref
    ids = store.ids_starting_with(ref)
    if ref in ids or len(ids) == 1:
        return ref if ref in ids else ids[0]
    if not ids:
        hint = "dsh --sessions --all lists them"
        raise SessionLogError(f"no session {ref!r} in {store.root} ({hint})")
    named = ", ".join(ids[:_AMBIGUOUS_NAMED])
    more = f" and {len(ids) - _AMBIGUOUS_NAMED} more" if len(ids) > _AMBIGUOUS_NAMED else ""
    raise SessionLogError(
        f"{ref!r} is the start of {len(ids)} session ids ({named}{more}): type more of the id"
    )


def _id_in_path(store: SessionStore, ref: str) -> str | None:
    """The id of the session that the path ``ref`` points into, if it is one of the store."""
    path = Path(os.path.abspath(os.path.expanduser(ref)))
    root = Path(os.path.abspath(store.root))
    for candidate in (path, *path.parents):
        if candidate.parent.parent == root:
            return candidate.name
    return None


class _TranscriptView(TurnView):
    """A TurnView for a stored turn: tool lines on stdout, no waiting indicator, no notices.

    Tool lines and compaction lines are the one difference from a live pipe run, where they go
    to stderr.
    """

    def notice(self, text: str) -> None:
        """Usage and retry notices are not part of a transcript (a pipe prints them on stderr)."""

    def show_waiting(self, text: str = TurnView.WAITING) -> None:
        """Nothing is being waited for."""

    def _applied(self, preview: str) -> None:
        """The log keeps no diff: what a question or an unasked edit showed is not replayed."""

    def _output_tail(self, result: ToolResult) -> None:
        """A command's last lines are a live courtesy; the transcript has its result line."""

    def _remark(self, text: str, *, dim: bool) -> None:
        # Only tool and compaction lines reach here (notices are dropped above): on stdout,
        # as a terminal shows them, whatever stdout is.
        self._end_line()
        self._write(neutralise(text) + "\n")

    def _todo_line(self, todo: Todo) -> str:
        """As a terminal shows it, indented under its call: a tool line's continuation."""
        return f"  {todo_mark(todo.status)} {todo.content}"


def _children(path: Path) -> dict[str, Sequence[SessionEvent]]:
    """The events of the subagents' sessions of the log at ``path``, by the call that ran each."""
    found: dict[str, Sequence[SessionEvent]] = {}
    for child in sorted(path.parent.glob(f"{SUBAGENTS_DIR}/*/{LOG_NAME}")):
        try:
            stored = read_log(child)
            header = json.loads(child.read_bytes().partition(b"\n")[0])
        except (SessionLogError, OSError, ValueError):
            continue  # --show of the child itself names what is wrong with it
        parent = header.get("parent") if isinstance(header, dict) else None
        if isinstance(parent, dict) and isinstance(parent.get("call_id"), str):
            found[parent["call_id"]] = stored.events
    return found


async def replay_events(
    events: Sequence[SessionEvent],
    out: TextIO,
    err: TextIO,
    terminal: bool,
    describe: Describe,
    children: Mapping[str, Sequence[SessionEvent]] | None = None,
) -> OSError | None:
    """Feed stored turns to a TurnView as the live events that made them.

    ``children``: the events of the subagent run by a call, by its id; its tool lines are
    shown under that call, as they were live.

    Returns the error that stopped stdout, if one did. Async because TurnView batches its
    writes per event-loop pass; after each record the pass runs, as it did live.
    """
    view: _TranscriptView | None = None
    withdrawn = withdrawn_turns(events)
    calls: dict[str, ToolCall] = {}
    steps = 0  # the turn's last step: at a ``max-steps`` end, the limit it ran into
    summary: CompactionSummary | None = None  # a compaction's, until its end puts it in force

    def current() -> _TranscriptView:
        nonlocal view
        if view is None:
            view = _TranscriptView(out, err, terminal=terminal, show_reasoning=False)
        return view

    for event in events:
        record = event.record
        if isinstance(record, TurnStart):
            if view is not None:  # the turn before has no end (damage): close its line
                view.pause()
            view, calls, steps = None, {}, 0
            current()
            if record.turn in withdrawn and (failed := _line(out, _WITHDRAWN)) is not None:
                return failed
        elif isinstance(record, UndoDone | RedoDone | Rewound):
            if view is not None:
                view.pause()
            for line in _undo_lines(record):
                if (failed := _line(out, line)) is not None:
                    return failed
        elif isinstance(record, UserText):
            current().flush()  # what the view holds goes first
            if current().output_error is None:
                try:
                    out.write(_user_lines(record.text))
                except OSError as exc:
                    return exc
        elif isinstance(record, AssistantStep):
            # Reasoning is not replayed: a pipe does not print it on stdout.
            steps = record.step
            if record.text:
                current().on_event(TextDelta(record.text))
            calls.update((call.id, call) for call in record.tool_calls)
        elif isinstance(record, ToolResult):
            call = calls.get(record.call_id) or ToolCall(record.call_id, "unknown", "")
            current().on_event(ToolStarting(call, describe(call)))
            for nested in _nested((children or {}).get(call.id, ()), describe):
                current().on_event(Nested(call, nested))
            current().on_event(ToolFinished(call, record))
        elif isinstance(record, CompactionSummary):
            summary = record
        elif isinstance(record, CompactionPrune):
            pruned = len(record.results)
            current().on_event(Compacted(record.tokens_before, record.tokens_after, pruned))
        elif isinstance(record, CompactionEnd) and summary is not None:
            current().on_event(Compacted(summary.tokens_before, summary.tokens_after))
            summary = None
        elif isinstance(record, TurnEnd):
            ended = current()
            ended.finish(record, steps=steps)  # flushes
            view = None
            if ended.output_error is not None:
                return ended.output_error
        # Everything else (system prompt, usage, retries, approvals, tool/call, events of a
        # newer dsh) never reached stdout.
        await asyncio.sleep(0)  # the event-loop pass in which TurnView writes
        if view is not None and view.output_error is not None:
            return view.output_error
    if view is not None:  # the last turn is still open: end its line
        view.pause()
        if view.output_error is not None:
            return view.output_error
    try:
        out.flush()
    except OSError as exc:
        return exc
    return None


_WITHDRAWN = "[withdrawn by /rewind: the model no longer sees this turn]"


def _undo_lines(record: UndoDone | RedoDone | Rewound) -> list[str]:
    """How an undo, a redo or a rewind shows in a transcript."""
    if isinstance(record, Rewound):
        return [f"[rewind to turn {record.to_turn}: it and the later turns are withdrawn]"]
    word = "undo" if isinstance(record, UndoDone) else "redo"
    turns = ", ".join(str(turn) for turn in record.turns)
    restored = ", ".join(record.restored) or "nothing"
    lines = [f"[{word} turn {turns}] restored {len(record.restored)}: {restored}"]
    if record.conflicts:
        lines.append(f"[{word} turn {turns}] left as they were: {', '.join(record.conflicts)}")
    return lines


def _line(out: TextIO, text: str) -> OSError | None:
    """A line of dsh's own (neutralised: paths may hold anything), or why stdout refused it."""
    try:
        out.write(neutralise(text) + "\n")
    except OSError as exc:
        return exc
    return None


def _nested(
    events: Sequence[SessionEvent], describe: Describe
) -> list[ToolStarting | ToolFinished]:
    """A subagent's calls and results, as its tool lines showed them."""
    calls: dict[str, ToolCall] = {}
    shown: list[ToolStarting | ToolFinished] = []
    for event in events:
        record = event.record
        if isinstance(record, AssistantStep):
            calls.update((call.id, call) for call in record.tool_calls)
        elif isinstance(record, ToolResult):
            call = calls.get(record.call_id) or ToolCall(record.call_id, "unknown", "")
            shown += [ToolStarting(call, describe(call)), ToolFinished(call, record)]
    return shown


def _user_lines(text: str) -> str:
    """``> `` before every line of the message, neutralised: these lines are for a person
    (the part a pipe run printed, which is data, is the rest)."""
    text = writable(neutralise(text))
    lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    return "".join(f"> {line}\n" for line in lines)


def _note(err: TextIO, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr is only a side channel
        err.write(f"dsh: {neutralise(text)}\n")
        err.flush()
