"""``/undo``, ``/redo`` and ``/rewind`` in the REPL (SPEC 14).

    commands = UndoCommands(runtime, out)
    await commands.undo()          # the most recent turn's changes to files, taken back
    await commands.rewind("3")     # files as before turn 3, and turns 3.. withdrawn
    text = commands.take_draft()   # the withdrawn turn's message, for the next prompt

A file changed since its turn ended is a conflict: the command lists such files and asks
whether to overwrite them too (default no: they are left, and named). Ctrl-C or Ctrl-D at that
question puts nothing back. What the turns did that no undo reaches is said after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from dsh_core.chain import error_chain
from dsh_core.errors import HarnessError

from ..commands.undo import conflict_lines, outcome_lines, restoration_heading
from ..render import neutralise

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from dsh_core.checkpoints.turns import Checkpoints, Restoration
    from dsh_core.session.events import SessionEvent

    from ..run.runtime import Runtime

__all__ = ["UndoCommands"]

Planner = Callable[["Sequence[SessionEvent]"], "Restoration | str"]
"""What a command asks the checkpoints for: a restoration of the log's turns, or why none."""

LISTED_PATHS = 5
"""Files ``/rewind`` names for each turn it lists; the rest are counted."""


class UndoCommands:
    """The REPL's undo commands, on the runtime's current conversation."""

    def __init__(self, runtime: Runtime, out: TextIO) -> None:
        self._runtime = runtime
        self._out = out
        self._editor: PromptSession[str] | None = None
        self._draft = ""

    def take_draft(self) -> str:
        """The text to put in the next prompt (a rewound turn's message), once."""
        draft, self._draft = self._draft, ""
        return draft

    async def undo(self) -> None:
        checkpoints = self._checkpoints()
        if checkpoints is not None:
            await self._carry_out(lambda events: checkpoints.plan_undo(events))

    async def redo(self) -> None:
        checkpoints = self._checkpoints()
        if checkpoints is not None:
            await self._carry_out(lambda events: checkpoints.plan_redo(events))

    async def rewind(self, argument: str) -> None:
        checkpoints = self._checkpoints()
        if checkpoints is None:
            return
        events = self._runtime.conversation.log.events
        turns = checkpoints.rewindable(events)
        if not turns:
            self._say("nothing to rewind: no turn since the last compaction")
            return
        if not argument:
            self._say("turns (rewinding restores the files to before the turn chosen and")
            self._say("withdraws it and every later turn from what the model sees):")
            for turn, message, changed in turns:
                first = " ".join(message.split())[:60]
                files = ", ".join(changed[:LISTED_PATHS])
                more = (
                    f" and {len(changed) - LISTED_PATHS} more"
                    if len(changed) > LISTED_PATHS
                    else ""
                )
                self._say(f"  {turn:>3}  {first}" + (f"  [{files}{more}]" if changed else ""))
            try:
                argument = (await self._ask("rewind to turn (its number; Enter: none): ")).strip()
            except (KeyboardInterrupt, EOFError):
                argument = ""
            if not argument:
                self._say("not rewound")
                return
        if not argument.isdigit():
            self._say(
                f"usage: /rewind [TURN] (a number from the list /rewind shows), not {argument!r}"
            )
            return
        to_turn = int(argument)
        restoration = await self._carry_out(lambda evs: checkpoints.plan_rewind(evs, to_turn))
        if restoration is not None:
            self._draft = restoration.message
            self._say(f"turns {to_turn} and after are withdrawn; its message is in the prompt")

    def _checkpoints(self) -> Checkpoints | None:
        checkpoints = self._runtime.conversation.checkpoints
        if checkpoints is None:
            self._say(f"no undo: checkpoints are {self._runtime.undo_state()}")
        return checkpoints

    async def _carry_out(self, plan: Planner) -> Restoration | None:
        """Plan, ask about the conflicts, put the files back, say what happened; the
        restoration carried out, or None."""
        conversation = self._runtime.conversation
        checkpoints = conversation.checkpoints
        assert checkpoints is not None
        try:
            restoration = plan(conversation.log.events)
        except HarnessError as exc:
            self._say(f"dsh: cannot put files back: {error_chain(exc)}")
            return None
        if isinstance(restoration, str):
            self._say(restoration)
            return None
        overwrite = False
        conflicts = restoration.plan.conflicts
        if conflicts:
            self._say(f"{restoration_heading(restoration)}: {len(conflicts)} changed since:")
            for line in conflict_lines(conflicts):
                self._say(line)
            if any(conflict.step is not None for conflict in conflicts):
                try:
                    answer = await self._ask("overwrite them too? [y]es / [N]o (leave them): ")
                except (KeyboardInterrupt, EOFError):
                    self._say("nothing was put back")
                    return None
                overwrite = answer.strip().lower() in ("y", "yes")
        try:
            outcome = checkpoints.carry_out(
                conversation.log, restoration, overwrite_conflicts=overwrite
            )
        except HarnessError as exc:
            self._say(f"dsh: cannot put files back: {error_chain(exc)}")
            return None
        for line in outcome_lines(outcome):
            self._say(line)
        return restoration

    async def _ask(self, prompt: str) -> str:
        if self._editor is None:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import DummyHistory

            self._editor = PromptSession(history=DummyHistory())
        return await self._editor.prompt_async(prompt)

    def _say(self, text: str) -> None:
        self._out.write(neutralise(text) + "\n")  # paths and messages may hold anything
        self._out.flush()
