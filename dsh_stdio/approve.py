"""The terminal's approval question: the whole call, neutralised, answered by a person.

Only the REPL builds one; a pipe or a one-shot run has no :class:`TerminalQuestion`, so the
policy refuses what would need asking, and a line ``y`` on stdin stays a user turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TextIO

from dsh_core.approval import Answer, Question

from .render import neutralise
from .tty import STDIN, discard_typed_ahead

__all__ = ["CHOICES", "CHOICES_ONCE", "TerminalQuestion", "question_text"]

CHOICES = "[y]es / [n]o / [a]lways this session"
CHOICES_ONCE = "[y]es / [n]o"
"""For a call that reaches outside the working directory or leaves the sandbox: such a yes is
never remembered, so "always" is not offered."""


def _shown(text: str) -> str:
    # A carriage return is part of what runs: shown as ^M, never folded into a line end.
    return neutralise(text.replace("\r", "^M"))


def question_text(question: Question) -> tuple[str, str]:
    """The lines shown before the prompt (a diff, a long command), and the prompt line."""
    invocation = question.invocation
    summary = _shown(invocation.summary)
    first, _, rest = summary.partition("\n")
    details: list[str] = []
    if rest:
        details.append(summary)  # the whole command, not only its first line
    if invocation.preview:
        details.append(_shown(invocation.preview).rstrip("\n"))
    access = invocation.access
    unnamed = [path for path in access.outside if path not in invocation.summary]
    if unnamed:  # the summary names most of them already
        places = ", ".join(neutralise(path) for path in unnamed)
        details.append(f"(outside the working directory: {places})")
    note = f" {neutralise(access.note)}" if access.note else ""
    name = neutralise(question.call.name)
    shown = f"{first} ..." if rest else first
    choices = CHOICES if access.may_remember else CHOICES_ONCE
    return "\n".join(details), f"Allow {name}? {shown}{note} {choices}: "


class TerminalQuestion:
    """Asks on the terminal; Ctrl-C at the question aborts the turn (``cancel_turn``)."""

    def __init__(
        self,
        out: TextIO,
        *,
        before: Callable[[], None],
        after: Callable[[], None],
        cancel_turn: Callable[[str], object],
    ) -> None:
        """``before`` puts the turn's output on screen; ``after`` re-arms Ctrl-C for the turn
        (prompt_toolkit removes the loop's SIGINT handler when a prompt ends)."""
        self._out = out
        self._before = before
        self._after = after
        self._cancel_turn = cancel_turn

    async def __call__(self, question: Question) -> Answer:
        from prompt_toolkit import PromptSession

        self._before()
        details, prompt = question_text(question)
        if details:
            self._out.write(details + "\n")
            self._out.flush()
        # What was typed during the turn must not answer the question.
        discard_typed_ahead(STDIN)
        try:
            with _echo(STDIN):
                reply = await PromptSession[str]().prompt_async(prompt)
        except KeyboardInterrupt:
            self._cancel_turn("user")
            raise asyncio.CancelledError from None
        except EOFError:
            reply = ""  # Ctrl-D: no
        finally:
            self._after()
        word = reply.strip().lower()
        if word in ("y", "yes"):
            return "yes"
        if word in ("a", "always"):
            return "always"
        return "no"


@contextlib.contextmanager
def _echo(fd: int) -> Iterator[None]:
    """Echo on while the person answers: a turn runs with it off (``quiet_terminal``)."""
    if not os.isatty(fd):
        yield
        return
    import termios

    saved = termios.tcgetattr(fd)
    loud = list(saved)
    loud[3] |= termios.ECHO | termios.ECHOCTL
    termios.tcsetattr(fd, termios.TCSANOW, loud)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
