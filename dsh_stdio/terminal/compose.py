"""What a line typed at the REPL becomes: the queue, ``@path``, ``!command`` (SPEC 17).

The REPL (``repl.py``) calls these hooks; the work is in their own modules:

- :meth:`Composer.next_queued`: a line entered while the last turn ran (``typeahead.py``) is
  the next turn, before any prompt; Ctrl-C during a turn drops the queue
  (:meth:`Composer.drop_queue`).
- :meth:`Composer.own_command`: ``!command`` runs the person's command and keeps its output
  for the next message (``own_command.py``); ``!!text`` sends ``!text``.
- :meth:`Composer.message`: the text sent for a line: the outputs kept, the line, the files
  its ``@paths`` name (``attach.py``); None when a file was refused (the line comes back at
  the prompt, :meth:`Composer.take_draft`, so nothing typed is lost).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dsh_core.chain import error_chain

from ..render import neutralise
from ..run.runtime import TOOL_OUTPUT_DIR, Runtime
from .completion import DshCompleter
from .typeahead import TypeAhead

if TYPE_CHECKING:
    from dsh_core.tools import Toolbox

__all__ = ["KNOWN_MODELS", "Composer"]

KNOWN_MODELS = ("deepseek-v4-flash", "deepseek-v4-pro")
"""What ``/model`` completes, with the model in use and the one the flags named."""


class Composer:
    """The REPL's typing hooks over one run's :class:`~dsh_stdio.run.runtime.Runtime`."""

    def __init__(self, runtime: Runtime, out: TextIO, *, colour: bool) -> None:
        self._runtime = runtime
        self._out = out
        self._colour = colour
        self.typeahead = TypeAhead(runtime.stdin, on_queued=self._show_queued)
        self._offered: list[str] = []
        """``!command`` outputs waiting for the next message."""
        self._draft = ""

    def completer(
        self, commands: dict[str, str], *, sessions: Callable[[], Iterable[str]] | None = None
    ) -> DshCompleter:
        """Tab's completer over the help table ``commands``."""
        arguments: dict[str, Callable[[], Iterable[str]]] = {"/model NAME": self._models}
        if sessions is not None:
            arguments["/resume ID"] = sessions
        return DshCompleter(commands, arguments=arguments)

    def _models(self) -> list[str]:
        runtime = self._runtime
        return list(
            dict.fromkeys([*KNOWN_MODELS, runtime.conversation.model_name, runtime.config.model])
        )

    # The queue.

    def _show_queued(self, line: str) -> None:
        view = self._runtime.current_view
        if view is not None:
            view.notice(f"queued: {line} (sent when this turn ends; Ctrl-C drops it)")

    def next_queued(self) -> str | None:
        """The next queued line, shown as if typed at the prompt; None when none is queued."""
        line = self.typeahead.take()
        if line is not None:
            self._say(f"> {neutralise(line)}", dim=False)
        return line

    def drop_queue(self) -> None:
        """Ctrl-C during a turn: the lines queued are not sent."""
        if dropped := self.typeahead.drop():
            view = self._runtime.current_view
            text = f"dropped {dropped} queued line{'' if dropped == 1 else 's'}"
            if view is not None:
                view.notice(text)

    def take_draft(self) -> str:
        """What the next prompt starts with: a line that was not sent, else nothing."""
        draft, self._draft = self._draft, ""
        return draft

    # !command

    async def own_command(self, command: str) -> None:
        """Run the person's ``command``; Ctrl-C stops it. Its output goes with the next message."""
        command = command.strip()
        if not command:
            self._say("dsh: !COMMAND runs a command of yours (!!text sends a message !text)")
            return
        from .own_command import run_own_command  # the process machinery: only for a !command

        loop = asyncio.get_running_loop()
        spill = self._spill_dir()
        task = asyncio.ensure_future(run_own_command(command, out=self._out, spill_dir=spill))
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            ran = await task
        except OSError as exc:
            self._say(f"dsh: cannot run {neutralise(command)}: {neutralise(error_chain(exc))}")
            return
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        self._offered.append(ran.offered())
        lines = f"{ran.lines:,} line{'' if ran.lines == 1 else 's'}"
        self._say(f"[! {ran.status}] {lines}, offered to the model with your next message")

    # The message.

    async def message(self, line: str) -> str | None:
        """The text to send for ``line``; None when it is not sent (it comes back as the draft)."""
        from .attach import attach_files  # the read tool and its rules: first message on

        conversation = self._runtime.conversation
        attached = await attach_files(line, self._toolbox(), conversation.approval)
        for notice in attached.notices:
            self._say(f"dsh: {neutralise(notice)}")
        if attached.refused is not None:
            self._say(f"dsh: {neutralise(attached.refused)}; the message was not sent")
            self._draft = line
            return None
        for path in attached.files:
            self._say(f"[attached {neutralise(path)}]")
        text = "\n\n".join([*self._offered, attached.text])
        self._offered.clear()
        return text

    def _toolbox(self) -> Toolbox:
        """The session's tools; with ``--no-tools`` a ``read`` of its own, under the same
        rules (the model is offered no tool, the person may still attach a file)."""
        from dsh_core.tools import Toolbox
        from dsh_core.tools.read import ReadTool
        from dsh_core.trust.workspace import Workspace

        toolbox = self._runtime.conversation.toolbox
        if "read" in toolbox.names:
            return toolbox
        workspace = Workspace.at(Path.cwd(), self._spill_dir(), dsh_home=self._runtime.config.home)
        return Toolbox([ReadTool(workspace)])

    def _spill_dir(self) -> Path:
        """Beside the session's log: the whole output of a long ``!command``."""
        return self._runtime.conversation.log.path.parent / TOOL_OUTPUT_DIR

    def _say(self, text: str, *, dim: bool = True) -> None:
        self._out.write((f"\x1b[2m{text}\x1b[0m" if dim and self._colour else text) + "\n")
        self._out.flush()
