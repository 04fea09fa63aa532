"""What the attacks on what a person sees share: a terminal screen, and the question as dsh
lays it out on one (SPEC 10.9, 10.10).

:func:`screen` is what a 24 x 80 terminal shows after the text dsh wrote to it, rendered by a
terminal emulator (``pyte``): lines wrapped at the width, wide characters taking two columns,
the top scrolled away. :func:`question_screen` is the screen when dsh asks about a call: the
real tool prepares it, the real front-door code writes its tool line and its question, and
nothing else is on screen. The pty proofs (``pexpect``) render the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyte

from dsh_core.agent.approval import Question
from dsh_core.model.seam import ToolCall
from dsh_core.tools import Toolbox, Workspace, builtin_tools
from dsh_core.trust.sandbox import Bwrap
from dsh_stdio.render import tool_call_line
from dsh_stdio.terminal.approve import Layout, question_text

__all__ = ["COLUMNS", "ROWS", "Asked", "on_screen", "question_screen", "screen"]

ROWS, COLUMNS = 24, 80
"""The terminal the review attacked: the size most terminals open at."""


def screen(text: str, *, rows: int = ROWS, columns: int = COLUMNS) -> list[str]:
    """The rows a ``rows`` x ``columns`` terminal shows once ``text`` was written to it (a
    line end is CR LF there, as the pty's ``onlcr`` makes it)."""
    shown = pyte.Screen(columns, rows)
    pyte.Stream(shown).feed(text.replace("\r\n", "\n").replace("\n", "\r\n"))
    return list(shown.display)


def on_screen(rows: list[str], *texts: str) -> bool:
    """Whether each of ``texts`` can be read on the screen (a line wrapped onto the next row
    still reads as one)."""
    joined = "".join(rows)
    return all(text in joined for text in texts)


class Asked:
    """A call asked about on a terminal: its layout and the screen when the question waits."""

    def __init__(self, layout: Layout, rows: list[str]) -> None:
        self.layout = layout
        self.rows = rows

    def shows(self, *texts: str) -> bool:
        return on_screen(self.rows, *texts)

    def __repr__(self) -> str:  # what a failed assertion prints: the screen
        return "\n" + "\n".join(f"{n:2}|{row}" for n, row in enumerate(self.rows))


def question_screen(work: Path, name: str, **arguments: Any) -> Asked:
    """The screen when dsh asks about ``name(**arguments)`` in ``work``: the call's tool line,
    then the question (its details and its prompt line), laid out for 24 x 80.

    ``bash`` runs in a bubblewrap sandbox (never started here), so that ``sandbox: false``
    leaves it as on a machine that has one.
    """
    workspace = Workspace.at(work, work / ".out")
    sandbox = Bwrap.for_workspace(workspace)
    toolbox = Toolbox(builtin_tools(workspace, launcher=lambda: sandbox))
    call = ToolCall("c1", name, json.dumps(arguments))
    invocation = toolbox.prepare(call)
    layout = question_text(Question(call, invocation), rows=ROWS, columns=COLUMNS)
    line = tool_call_line(call, invocation.summary, invocation.access.note)
    written = f"{line}\n" + (f"{layout.details}\n" if layout.details else "") + layout.prompt
    return Asked(layout, screen(written))
