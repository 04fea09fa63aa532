"""``!command`` at the prompt: a command of the person's own, its output offered to the model.

    ran = await run_own_command("git status", out=out, spill_dir=tool_output_dir)
    message = ran.offered() + "\\n\\n" + next_message

The person typed it, so nobody is asked: it runs at once, as a shell line, in the working
directory, outside the sandbox, with the environment dsh gives every command it runs (without
the API key: ``child_environment``), stdin ``/dev/null``, in a process group of its own that
Ctrl-C stops (``dsh_core.tools.process.run_child``). Its output is shown as it comes, inert
(``neutralise``), and kept as a command's output is for the model (``CappedOutput``: head and
tail past 30,000 characters, the whole of it in a file); the REPL adds it to the next message
sent, and says so.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from dsh_core.tools.process import CappedOutput, run_child, signal_name
from dsh_core.tools.shell import shell_argv
from dsh_core.trust.workspace import child_environment

from ..render import neutralise

__all__ = ["OWN_COMMAND_LIMIT", "OwnCommand", "run_own_command"]

OWN_COMMAND_LIMIT = 30_000
"""Characters of a command's output offered to the model whole (a ``bash`` call's cap)."""
_NO_TIME_LIMIT = 7 * 24 * 3600.0
"""The person's own command runs until it ends or they press Ctrl-C."""


@dataclass(frozen=True, slots=True)
class OwnCommand:
    """A command the person ran, and what of it the model is offered."""

    command: str
    status: str
    """``exit 0``, ``killed by SIGINT``, ``stopped by Ctrl-C``."""
    output: str
    """Its output as the model gets it (capped, the key masked)."""
    lines: int

    def offered(self) -> str:
        """The text that goes before the person's next message."""
        output = self.output if self.output.strip() else "(no output)"
        return (
            f"[I ran a command in the working directory: $ {self.command} ({self.status}); "
            f"its output follows]\n{output.rstrip()}\n[end of the output of $ {self.command}]"
        )


async def run_own_command(command: str, *, out: TextIO, spill_dir: Path) -> OwnCommand:
    """Run ``command``, showing its output on ``out``; raises OSError when it cannot start.

    Cancelling the awaiting task (Ctrl-C) stops the command; what it printed is kept."""
    env = child_environment()
    capped = CappedOutput(spill_dir, limit=OWN_COMMAND_LIMIT, prefix="command-")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    ends_line = [True]

    def show(data: bytes) -> None:
        capped.feed(data)
        text = decoder.decode(data)
        if text:
            out.write(neutralise(text))
            out.flush()
            ends_line[0] = text.endswith("\n")

    try:
        completion = await run_child(
            shell_argv(command, env),
            cwd=Path(os.getcwd()),
            env=env,
            sink=show,
            time_limit=_NO_TIME_LIMIT,
        )
    finally:
        capped.close()
    if not ends_line[0]:
        out.write("\n")
    if completion.ended == "cancelled":
        status = "stopped by Ctrl-C"
    elif completion.returncode < 0:
        status = f"killed by {signal_name(-completion.returncode)}"
    else:
        status = f"exit {completion.returncode}"
    text = capped.text()
    lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
    return OwnCommand(command, status, text, lines)
