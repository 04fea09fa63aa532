"""Pruning (SPEC 11, issue 29): old tool results sent as one-line stubs, before any summary.

    plan = plan_prune(history, basis=20_000)          # None: nothing worth pruning
    save_outputs(plan, output_dir)                     # the whole outputs, fsynced
    log.append(plan.record(turn, before), durable=True)   # in force once written

A tool result is most of what a long session carries, and most of it is needed once: the model
read the file, ran the tests, and moved on. A prune replaces each result outside the recent
budget (:data:`PROTECT`, the newest results) with a stub that says what it was, how big, and
where its whole output is kept, a file the ``read`` tool opens without a question because dsh
named it (:mod:`dsh_core.tools.read`). It costs no model request, and it breaks the prompt
cache once, from the first result it stubs on: everything before stays a cached prefix.

What is kept where: a result that was cut already (a command's output over 30,000 characters)
points at the file that holds all of it; any other is written whole to
``tool-output/result-<seq>.txt`` (0600, fsynced, the directory too) before the event, so a
stub never names a file a crash lost. The text saved is what the model was sent (masked).

A result of :data:`MIN_TOKENS` or less is left alone: its stub would save little. The stubs
are written into the event, so a resume sends the same bytes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..fileio import fsync_descriptor, fsync_directory
from ..model.seam import ToolMessage
from ..records import record
from ..session.events import CompactionPrune, PrunedResult
from .history import History, Result, message_tokens

__all__ = ["MIN_TOKENS", "PROTECT", "PrunePlan", "plan_prune", "save_outputs", "stub_text"]

PROTECT = 0.1
"""Share of the basis (the window) the newest tool results keep whole; the newest always."""
MIN_TOKENS = 200
"""A result this small (estimated) is not pruned: a stub costs about a quarter of it."""

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A tool name a stub repeats; another is the model's own text, and the stub says ``tool``."""


@record
class Pruned:
    """One result a prune stubs, and where its whole output goes."""

    result: Result
    path: Path
    """The file that holds (or will hold) its whole output."""
    write: bool
    """Whether :func:`save_outputs` writes it (False: the cut output's own file)."""
    stub: str


@record
class PrunePlan:
    """The results a prune stubs, oldest first, and the tokens it saves (estimated)."""

    pruned: tuple[Pruned, ...]
    saved: int

    def record(self, turn: int | None, before: int) -> CompactionPrune:
        results = tuple(PrunedResult(p.result.call_id, p.stub) for p in self.pruned)
        return CompactionPrune(turn, before, before - self.saved, results)


def stub_text(result: Result, path: Path) -> str:
    """The line the model reads instead of ``result``: what, how big, where all of it is."""
    tool = result.tool if _NAME.fullmatch(result.tool) else "tool"
    return (
        f"[dsh: this {tool} result ({result.chars:,} characters) was pruned from the "
        f"conversation to save room; all of it is in {path}, which read opens without a "
        "question: read it again there only if it is still needed]"
    )


def plan_prune(history: History, *, basis: int, output_dir: Path) -> PrunePlan | None:
    """The results outside the newest :data:`PROTECT` share of ``basis`` tokens, each larger
    than :data:`MIN_TOKENS`; None when there is none."""
    results = history.results
    protected, budget = 0, PROTECT * basis
    start = len(results)
    for index in range(len(results) - 1, -1, -1):
        protected += results[index].tokens
        if protected > budget and index < len(results) - 1:
            break
        start = index
    pruned: list[Pruned] = []
    saved = 0
    for result in results[:start]:
        if result.pruned or result.tokens <= MIN_TOKENS:
            continue
        if result.output_file is not None:
            path, write = Path(result.output_file), False
        else:
            path, write = output_dir / f"result-{result.seq}.txt", True
        stub = stub_text(result, path)
        saving = result.tokens - message_tokens(ToolMessage(result.call_id, stub))
        if saving <= 0:
            continue
        pruned.append(Pruned(result, path, write, stub))
        saved += saving
    return PrunePlan(tuple(pruned), saved) if pruned else None


def save_outputs(plan: PrunePlan, output_dir: Path) -> None:
    """Write the whole outputs the stubs name, each fsynced, then the directory; OSError when
    one cannot be written (the prune is then not done)."""
    if not any(p.write for p in plan.pruned):
        return
    output_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for item in plan.pruned:
        if not item.write:
            continue
        # A name of dsh's own in a directory only dsh writes; O_NOFOLLOW all the same, and a
        # temporary file renamed over it, so a file left by a crash is replaced whole.
        temporary = item.path.with_name(f".{item.path.name}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600)
        try:
            data = item.result.content.encode("utf-8", "surrogatepass")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            fsync_descriptor(fd)
        finally:
            os.close(fd)
        os.replace(temporary, item.path)
    fsync_directory(output_dir)
