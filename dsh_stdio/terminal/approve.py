"""The terminal's approval question: the whole call, inert, answered by a person.

    ls -la | head                                     <- details: what the prompt line cannot
    the model's justification: "needs the network"       hold, each line of the model's own
    --- a/demo.txt ...                                   words quoted, the diff (what fits)
    [diff cut: 12 more lines hidden; answer v to see all of it]
    Allow bash? $ pytest -q (sandboxed: ...) [y]es / [N]o / [a]lways for "pytest ...": _

One line plus details (SPEC 8, 10.10, 12): the default is the capital letter, and Enter takes it;
``n use uv`` is a no with a reason the model is told; ``a`` is offered only for a call that an
"always" may cover, and for ``bash`` it covers the commands with the same first word; ``v`` shows
all of the details when they were cut; anything else asks again. The question is laid out by display
width (:mod:`dsh_stdio.cells`): it fits the screen, blank runs are counted, and a call too long for
it is cut by rows, saying so, never pushed out of sight by what the model wrote. Paths are resolved
by the tool, and the model's words are quoted on their own lines, never in dsh's.

The REPL builds a :class:`TerminalQuestion`, and so does a one-shot run at a terminal (on
stderr), or a run whose stdin is a pipe while a person is at the controlling terminal (on
``/dev/tty``, SPEC 15: ``dsh_stdio.pipe``); otherwise the policy refuses what would need asking.
A line ``y`` on stdin is never an answer: it stays data, or a user turn.

The model's own questions (``ask_user_question``, SPEC 16) go through the same machinery
(:meth:`TerminalQuestion.ask_user`): the model's words quoted, options numbered, a number (or
several, when it allows that) or the person's own words as the answer, Enter for none, Ctrl-C
aborting the turn::

    the model asks (1 of 2): "Which database should the service use?"
      1. "PostgreSQL (Recommended)": "it runs as a server"
      2. "SQLite"
    Answer 1-2, or in your own words (Enter: no answer): _
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO

from dsh_core.agent.approval import Answer, Question

from ..cells import rows as rows_of
from ..cells import width
from ..render import clip, coloured_diff, compact, neutralise, quote, shown
from ..tty import STDIN, discard_typed_ahead

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from dsh_core.tools.interaction.ask import UserAnswer, UserQuestion

__all__ = [
    "VIEW",
    "Layout",
    "TerminalQuestion",
    "UserLayout",
    "parse_answer",
    "parse_user_reply",
    "question_text",
    "undo_words",
    "user_question_text",
]

VIEW: Literal["view"] = "view"
"""What :func:`parse_answer` returns for ``v``: show all of the details, then ask again."""

MIN_DIFF_LINES = 10
"""Lines of a diff shown however small the terminal is."""
QUOTED_ROWS = 3
"""Rows each of the model's own lines (a justification), each line of a diff, and the list of
paths outside may take; the rest is cut, and counted."""
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
    """All of the details, when they show only part of them (``v`` shows it); else ""."""
    hint: str
    """What to say when an answer is none of the choices."""
    wider: str = ""
    """What ``s`` makes an "always" cover instead of the tool alone (``server files``); ""
    when ``s`` is no answer."""


def question_text(
    question: Question,
    *,
    colour: bool = False,
    rows: int = 24,
    columns: int = 80,
    undo: str | None = None,
) -> Layout:
    """How ``question`` is shown on a terminal of ``rows`` x ``columns``.

    Everything is measured by the rows it takes (:mod:`dsh_stdio.cells`), so that the question and
    the tool line above it fit the screen: nothing the model wrote can push dsh's words, or the
    start of what runs, out of sight (SPEC 10.10). A call too wide for the prompt line goes in the
    details. The model's own words (a justification) and the paths outside get a few rows each; the
    call what is left (half of it when a diff follows), the diff the rest, at least
    :data:`MIN_DIFF_LINES`. Whatever is cut says so, and ``v`` shows all of it.

    ``undo``: the directory checkpoints cover (None: they are off); a command or an MCP call
    says "undo covers files in <dir>", a write outside it "not covered by undo" (SPEC 14).
    """
    invocation = question.invocation
    access = invocation.access
    name = neutralise(question.call.name)
    summary = compact(shown(invocation.summary))
    lines = summary.split(NEWLINE)
    inline = len(lines) == 1 and width(f"Allow {name}? {summary}") <= columns
    call = summary if inline else f"the {len(lines)} lines above" if lines[1:] else "the call above"
    if invocation.arguments:  # laid out once, for reading: instead of one line of escapes
        lines = compact(neutralise(invocation.arguments)).split(NEWLINE)
        inline, call = False, "the arguments above"
    body = "" if inline else "\n  ".join(lines)  # indented: no line can pass for one of dsh's
    note = f" {neutralise(access.note)}" if access.note else ""
    note += undo_words(access.kind, bool(access.outside), undo)
    choices = ["[y]es", "[N]o"]
    wider = access.always_for if access.may_remember else ""
    if access.may_remember:
        scope = access.scope
        if access.scope_label:  # a host, a background command: it names itself
            choices.append(f"[a]lways for {neutralise(access.scope_label)}")
        else:
            choices.append(
                f'[a]lways for "{neutralise(scope)} ..."'
                if scope
                else "[a]lways for this tool"
                if wider
                else "[a]lways this session"
            )
    if wider:
        choices.append(f"[s] always for {neutralise(wider)}")
    words = [(f"the model's {neutralise(what)}: ", text) for what, text in invocation.quoted]
    unnamed = [path for path in access.outside if path not in invocation.summary]
    outside = [f"(outside the working directory: {', '.join(map(neutralise, unnamed))})"]
    outside = outside if unnamed else []  # the summary names most of them already
    diff = compact(neutralise(invocation.preview)) if invocation.preview else ""

    # The short parts first, then the call, then the diff, each in the rows still free.
    prompt_rows = rows_of(
        f"Allow {name}? {call}{note} {' / '.join(choices)} / [v]iew all: ", columns
    )
    room = rows - prompt_rows - 1  # the tool line above the question
    short = [prefix + quote(text, _quote_room(prefix, columns)) for prefix, text in words]
    short += [clip(line, rows=QUOTED_ROWS, columns=columns).shown for line in outside]
    room -= sum(rows_of(line, columns) for line in short)
    details: list[str] = []
    cut = False
    if body:
        kept, cut = _fit(body, max(2, room // 2 if diff else room), columns, "call")
        details += kept
        room -= sum(rows_of(line, columns) for line in NEWLINE.join(kept).split(NEWLINE))
    details += short
    if diff:
        rows_left = max(MIN_DIFF_LINES + 1, room)
        kept, diff_cut = _fit(diff, rows_left, columns, "diff", line_rows=QUOTED_ROWS)
        details += [coloured_diff(kept[0]) if colour else kept[0], *kept[1:]]
        cut = cut or diff_cut
    whole_words = [prefix + quote(text, None) for prefix, text in words]
    whole = ""
    if cut or short != [*whole_words, *outside]:
        whole_diff = coloured_diff(diff) if colour else diff
        whole = NEWLINE.join(part for part in (body, *whole_words, *outside, whole_diff) if part)
        choices.append("[v]iew all")
    prompt = f"Allow {name}? {call}{note} {' / '.join(choices)}: "
    hint = "please answer y or n (Enter is no; after n, what to do instead: n use uv)"
    hint += ", a for always" if access.may_remember else ""
    hint += f", s for always for {neutralise(wider)}" if wider else ""
    hint += ", v to see all of it" if whole else ""
    return Layout(NEWLINE.join(details), prompt, access.may_remember, whole, hint, wider)


def undo_words(kind: str, outside: bool, undo: str | None) -> str:
    """What the question says of undo for a call (SPEC 14): a command or an MCP call may change
    anything, and undo covers the files in the working directory; a write outside it is not
    covered. Empty when checkpoints are off, and for a write inside (it is covered)."""
    if undo is None:
        return ""
    if kind in ("shell", "mcp"):
        return f" (undo covers files in {neutralise(undo)})"
    if kind == "write" and outside:
        return " (not covered by undo)"
    return ""


def _fit(
    text: str, rows: int, columns: int, what: str, *, line_rows: int | None = None
) -> tuple[list[str], bool]:
    """``text`` in at most ``rows`` rows (each line in at most ``line_rows``): whole, or cut
    with the notice saying so (within the rows); and whether it was cut."""
    part = clip(text, rows=rows, columns=columns, line_rows=line_rows)
    if not (part.hidden or part.cut_short):
        return [part.shown], False
    part = clip(text, rows=max(1, rows - 1), columns=columns, line_rows=line_rows)
    return [part.shown, part.notice(what)], True


def _quote_room(prefix: str, columns: int) -> int:
    """Columns of the model's words that :data:`QUOTED_ROWS` rows hold after ``prefix``, room
    left for the count of what is cut."""
    return max(8, QUOTED_ROWS * columns - width(prefix) - 30)


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
    if word == "s" and layout.wider:
        return Answer("always", covers=layout.wider)
    if word in ("v", "view") and layout.whole:
        return VIEW
    because = _NO_BECAUSE.fullmatch(text)
    return Answer("no", because.group(1).strip()) if because else None


@dataclass(frozen=True, slots=True)
class UserLayout:
    """One of the model's questions as it is shown."""

    details: str
    """The question and its numbered options."""
    prompt: str
    hint: str
    """What to say when an answer is none of the numbers."""


def user_question_text(
    question: UserQuestion, number: int, total: int, *, columns: int = 80
) -> UserLayout:
    """How the model's ``question`` (``number`` of ``total``) is shown: its words quoted, each
    on its own line (they cannot pass for dsh's), a few rows each at most."""
    which = f" ({number} of {total})" if total > 1 else ""
    header = f" {quote(question.header, columns // 2)}" if question.header else ""
    lines = [
        f"the model asks{which}{header}: "
        + quote(question.question, _quote_room("the model asks (1 of 1): ", columns))
    ]
    for index, option in enumerate(question.options, 1):
        label = quote(option.label, max(8, columns // 2))
        said = f": {quote(option.description, max(8, columns // 2))}" if option.description else ""
        lines.append(f"  {index}. {label}{said}")
    count = len(question.options)
    if not count:
        prompt = "Your answer (Enter: no answer): "
        hint = ""
    elif question.multi_select:
        prompt = f"Answer with numbers 1-{count} (1,3), or in your own words (Enter: no answer): "
        hint = f"please answer with numbers from 1 to {count}, or in words that are not numbers"
    else:
        prompt = f"Answer 1-{count}, or in your own words (Enter: no answer): "
        hint = f"please answer with one number from 1 to {count}, or in words that are not numbers"
    return UserLayout(NEWLINE.join(lines), prompt, hint)


_NUMBERS = re.compile(r"\s*\d+(?:\s*[,\s]\s*\d+)*\s*")


def parse_user_reply(reply: str, question: UserQuestion) -> UserAnswer | None:
    """The answer ``reply`` gives; None when it is numbers that choose no option (ask again)."""
    from dsh_core.tools.interaction.ask import UserAnswer  # the model's questions are rare

    text = reply.strip()
    if not text:
        return UserAnswer(question.id)
    if question.options and _NUMBERS.fullmatch(text):
        numbers = [int(part) for part in re.split(r"[,\s]+", text) if part]
        count = len(question.options)
        if any(not 1 <= n <= count for n in numbers):
            return None
        if len(set(numbers)) > 1 and not question.multi_select:
            return None
        labels = tuple(question.options[n - 1].label for n in dict.fromkeys(numbers))
        return UserAnswer(question.id, labels)
    return UserAnswer(question.id, custom=text)


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
        stdin: int = STDIN,
        undo: str | None = None,
    ) -> None:
        """``before`` puts the turn's output on screen; ``after`` re-arms Ctrl-C for the turn
        (prompt_toolkit removes the loop's SIGINT handler when a prompt ends); ``colour``
        colours the diff; ``stdin`` is the terminal the answer is typed at; ``undo`` the
        directory checkpoints cover (None: off), which the question names."""
        self._out = out
        self._before = before
        self._after = after
        self._cancel_turn = cancel_turn
        self._colour = colour
        self._stdin = stdin
        self._undo = undo
        self._editor: PromptSession[str] | None = None
        """One prompt for every question (building one costs 10-30 ms); made at the first."""

    async def __call__(self, question: Question) -> Answer:
        import shutil  # with bz2 and lzma: only a question needs it

        with self._asking() as editor:
            size = shutil.get_terminal_size()
            layout = question_text(
                question,
                colour=self._colour,
                rows=size.lines,
                columns=size.columns,
                undo=self._undo,
            )
            self._say(layout.details)
            while True:
                try:
                    with _echo(self._stdin):
                        reply = await editor.prompt_async(layout.prompt)
                except EOFError:
                    return Answer("no")  # Ctrl-D
                answer = parse_answer(reply, layout)
                if isinstance(answer, Answer):
                    return answer
                self._say(layout.whole if answer == VIEW else layout.hint)

    async def ask_user(self, questions: Sequence[UserQuestion]) -> Sequence[UserAnswer]:
        """The model's questions, one after another (``ask_user_question``); Ctrl-D leaves the
        rest unanswered, Ctrl-C aborts the turn."""
        import shutil

        from dsh_core.tools.interaction.ask import UserAnswer

        answers: list[UserAnswer] = []
        with self._asking() as editor:
            columns = shutil.get_terminal_size().columns
            for number, question in enumerate(questions, 1):
                layout = user_question_text(question, number, len(questions), columns=columns)
                self._say(layout.details)
                answer: UserAnswer | None = None
                while answer is None:
                    try:
                        with _echo(self._stdin):
                            reply = await editor.prompt_async(layout.prompt)
                    except EOFError:
                        return [*answers, *(UserAnswer(q.id) for q in questions[number - 1 :])]
                    answer = parse_user_reply(reply, question)
                    if answer is None:
                        self._say(layout.hint)
                answers.append(answer)
        return answers

    @contextlib.contextmanager
    def _asking(self) -> Iterator[PromptSession[str]]:
        """The turn's output on screen, typed-ahead text gone; Ctrl-C aborts the turn."""
        if self._editor is None:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import DummyHistory

            # No history: Up at a question must not bring back an earlier "y".
            self._editor = PromptSession(history=DummyHistory())
        self._before()
        # What was typed during the turn must not answer the question.
        discard_typed_ahead(self._stdin)
        try:
            yield self._editor
        except KeyboardInterrupt:
            self._cancel_turn("user")
            raise asyncio.CancelledError from None
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
