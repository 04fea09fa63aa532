"""The terminal's approval question: the whole call, inert, answered by a person.

    ls -la | head                                     <- details: what the prompt line cannot
    the model's justification: "needs the network"       hold, each line of the model's own
    --- a/demo.txt ...                                   words quoted, the diff (what fits)
    [diff cut: 12 more lines hidden; answer v to see all of it]
    Allow bash? $ pytest -q (sandboxed: ...) [y]es / [N]o / [a]lways for "pytest ...": _

One line plus details (SPEC 8, 10.10, 12): the default is the capital letter, and Enter takes
it; ``n use uv`` is a no with a reason the model is told; ``a`` is offered only for a call
that an "always" may cover, and for ``bash`` it covers the commands with the same first word;
``v`` shows the whole diff when it was cut; anything else asks again. Every line of a command
is on screen (blank lines counted, not shown), paths are resolved by the tool, and the model's
words are quoted on their own lines, never in dsh's.

Only the REPL builds a :class:`TerminalQuestion`; a pipe or a one-shot run has none, so the
policy refuses what would need asking, and a line ``y`` on stdin stays a user turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, TextIO

from dsh_core.approval import Answer, Question

from .render import clip, coloured_diff, compact, neutralise, quote, shown
from .tty import STDIN, discard_typed_ahead

__all__ = ["VIEW", "Layout", "TerminalQuestion", "parse_answer", "question_text"]

VIEW: Literal["view"] = "view"
"""What :func:`parse_answer` returns for ``v``: show the whole diff, then ask again."""

MIN_DIFF_LINES = 10
"""Lines of a diff shown however small the terminal is."""
NEWLINE = "\n"


@dataclass(frozen=True, slots=True)
class Layout:
    """A question as it is shown, and what its answers may be."""

    details: str
    """The lines before the prompt line (may be empty)."""
    prompt: str
    """``Allow bash? $ pytest -q (...) [y]es / [N]o / [a]lways for "pytest ...": ``"""
    always: bool
    """``a`` is an answer: the call may be covered by an "always"."""
    whole: str
    """The whole diff, when the details show only part of it (``v`` shows it); else ""."""
    hint: str
    """What to say when an answer is none of the choices."""


def question_text(
    question: Question, *, colour: bool = False, rows: int = 24, columns: int = 80
) -> Layout:
    """How ``question`` is shown on a terminal of ``rows`` x ``columns``.

    The diff gets what is left of the screen once the rest of the question is on it, and at
    least :data:`MIN_DIFF_LINES` lines; what does not fit is counted, and ``v`` shows it.
    """
    invocation = question.invocation
    access = invocation.access
    summary = compact(shown(invocation.summary))
    first, _, rest = summary.partition("\n")
    details: list[str] = []
    if rest:
        details.append(summary)  # every line of it, the prompt line names none
    for what, text in invocation.quoted:
        details.append(f"the model's {neutralise(what)}: {quote(text)}")
    unnamed = [path for path in access.outside if path not in invocation.summary]
    if unnamed:  # the summary names most of them already
        details.append(f"(outside the working directory: {', '.join(map(neutralise, unnamed))})")
    whole = ""
    if invocation.preview:
        diff = compact(neutralise(invocation.preview))
        room = max(MIN_DIFF_LINES, rows - 3 - sum(text.count("\n") + 1 for text in details))
        part, hidden = clip(diff, lines=room, chars=room * columns)
        details.append(coloured_diff(part) if colour else part)
        if hidden:
            details.append(f"[diff cut: {hidden:,} more lines hidden; answer v to see all of it]")
            whole = coloured_diff(diff) if colour else diff
    call = f"the {summary.count(NEWLINE) + 1} lines above" if rest else first
    note = f" {neutralise(access.note)}" if access.note else ""
    choices = ["[y]es", "[N]o"]
    if access.may_remember:
        scope = access.scope
        choices.append(
            f'[a]lways for "{neutralise(scope)} ..."' if scope else "[a]lways this session"
        )
    if whole:
        choices.append("[v]iew all")
    prompt = f"Allow {neutralise(question.call.name)}? {call}{note} {' / '.join(choices)}: "
    hint = "please answer y or n (Enter is no; after n, what to do instead: n use uv)"
    hint += ", a for always" if access.may_remember else ""
    hint += ", v to see the whole diff" if whole else ""
    return Layout("\n".join(details), prompt, access.may_remember, whole, hint)


_NO_BECAUSE = re.compile(r"no?[\s,:;.!-]+(\S.*)", re.IGNORECASE | re.DOTALL)
"""``n use uv``, ``no, use uv``, ``n: use uv``: a no with what to do instead."""


def parse_answer(reply: str, layout: Layout) -> Answer | Literal["view"] | None:
    """The answer ``reply`` gives to the question laid out as ``layout``; None when it is
    none of the choices (ask again)."""
    text = reply.strip()
    word = text.lower()
    if word in ("", "n", "no"):
        return Answer("no")
    if word in ("y", "yes"):
        return Answer("yes")
    if word in ("a", "always") and layout.always:
        return Answer("always")
    if word in ("v", "view") and layout.whole:
        return VIEW
    because = _NO_BECAUSE.fullmatch(text)
    return Answer("no", because.group(1).strip()) if because else None


class TerminalQuestion:
    """Asks on the terminal; Ctrl-C at the question aborts the turn (``cancel_turn``)."""

    def __init__(
        self,
        out: TextIO,
        *,
        before: Callable[[], None],
        after: Callable[[], None],
        cancel_turn: Callable[[str], object],
        colour: bool = False,
    ) -> None:
        """``before`` puts the turn's output on screen; ``after`` re-arms Ctrl-C for the turn
        (prompt_toolkit removes the loop's SIGINT handler when a prompt ends); ``colour``
        colours the diff."""
        self._out = out
        self._before = before
        self._after = after
        self._cancel_turn = cancel_turn
        self._colour = colour

    async def __call__(self, question: Question) -> Answer:
        import shutil  # with bz2 and lzma: only a question needs it

        from prompt_toolkit import PromptSession

        self._before()
        size = shutil.get_terminal_size()
        layout = question_text(question, colour=self._colour, rows=size.lines, columns=size.columns)
        self._say(layout.details)
        # What was typed during the turn must not answer the question.
        discard_typed_ahead(STDIN)
        try:
            while True:
                with _echo(STDIN):
                    reply = await PromptSession[str]().prompt_async(layout.prompt)
                answer = parse_answer(reply, layout)
                if isinstance(answer, Answer):
                    return answer
                self._say(layout.whole if answer == VIEW else layout.hint)
        except KeyboardInterrupt:
            self._cancel_turn("user")
            raise asyncio.CancelledError from None
        except EOFError:
            return Answer("no")  # Ctrl-D
        finally:
            self._after()

    def _say(self, text: str) -> None:
        if text:
            self._out.write(text + "\n")
            self._out.flush()


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
