"""``ask_user_question {questions}``: the model asks the person, and waits (SPEC 16).

    tool = AskUserTool(lambda: runtime.user_asker, nobody="stdin is not a terminal")
    invocation = tool.prepare({"questions": [{"id": "db", "question": "Which database?",
                                              "options": [{"label": "SQLite"}]}]})
    output = await invocation.run()     # {"answers": [{"id": "db", "selected": ["SQLite"]}]}

The questions are checked here (:func:`parse_questions`) and asked by the front door's
:data:`UserAsker`, the same machinery as an approval question: options numbered, an answer in
the person's own words allowed, Ctrl-C aborts the turn. The result is the answers as JSON, in
the shape of the reference harness: ``{"answers": [{"id", "selected": [labels], "custom"?}]}``
(``custom`` is what the person wrote instead of choosing; a skipped question has neither).

Where nobody can be asked (a pipe, a one-shot run fed by one, a subagent) the call is an
``Error:`` result saying so and telling the model to decide and say what it assumed: a question
must never wait for an answer that cannot come. The call needs no approval (the question is the
person's own), and runs alone: two questions never share the screen.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...model.seam import ToolSpec
from .. import specs
from ..base import Access, Invocation, ToolError, ToolOutput

__all__ = [
    "MAX_OPTIONS",
    "MAX_QUESTIONS",
    "MAX_QUESTION_CHARS",
    "AskUserTool",
    "Option",
    "UserAnswer",
    "UserAsker",
    "UserQuestion",
    "answers_text",
    "parse_questions",
]

MAX_QUESTIONS = 8
"""Questions one call asks at most."""
MAX_OPTIONS = 10
"""Options one question offers at most: they are shown numbered, on one screen."""
MAX_QUESTION_CHARS = 2000
"""Characters of a question, a header, an option's label or description."""


@dataclass(frozen=True, slots=True)
class Option:
    """One choice a question offers."""

    label: str
    """What the person sees, and what the answer names when they choose it."""
    description: str = ""


@dataclass(frozen=True, slots=True)
class UserQuestion:
    """One question of a call, checked."""

    id: str
    question: str
    header: str = ""
    options: tuple[Option, ...] = ()
    multi_select: bool = False


@dataclass(frozen=True, slots=True)
class UserAnswer:
    """What the person answered to one question."""

    id: str
    selected: tuple[str, ...] = ()
    """The labels of the options chosen."""
    custom: str | None = None
    """What the person wrote instead of choosing; None when they chose, or skipped."""


UserAsker = Callable[[Sequence[UserQuestion]], Awaitable[Sequence[UserAnswer]]]
"""Asks the person on a terminal, one question after another; cancelling the turn cancels it."""


def _text(item: Mapping[str, Any], key: str, where: str, *, required: bool) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        need = "a non-empty string" if required else "a string"
        raise ToolError(f"invalid arguments: {where} {key} must be {need}")
    if len(value) > MAX_QUESTION_CHARS:
        raise ToolError(
            f"invalid arguments: {where} {key} is {len(value):,} characters; at most "
            f"{MAX_QUESTION_CHARS:,}"
        )
    return value.strip()


def parse_questions(arguments: Mapping[str, Any]) -> tuple[UserQuestion, ...]:
    """The questions of an ``ask_user_question`` call; ToolError says what is wrong."""
    raw = arguments.get("questions")
    if not isinstance(raw, list) or not raw:
        raise ToolError("invalid arguments: questions must be a non-empty list")
    if len(raw) > MAX_QUESTIONS:
        raise ToolError(f"invalid arguments: at most {MAX_QUESTIONS} questions, not {len(raw)}")
    questions = []
    seen: set[str] = set()
    for number, item in enumerate(raw, 1):
        where = f"question {number}"
        if not isinstance(item, dict):
            raise ToolError(f"invalid arguments: {where} is not an object")
        ident = _text(item, "id", where, required=True)
        if ident in seen:
            raise ToolError(f"invalid arguments: two questions have the id {ident!r}")
        seen.add(ident)
        raw_options = item.get("options") or []
        if not isinstance(raw_options, list):
            raise ToolError(f"invalid arguments: {where} options must be a list")
        if len(raw_options) > MAX_OPTIONS:
            raise ToolError(f"invalid arguments: {where} has over {MAX_OPTIONS} options")
        options = []
        for index, option in enumerate(raw_options, 1):
            place = f"{where} option {index}"
            if not isinstance(option, dict):
                raise ToolError(f"invalid arguments: {place} is not a {{label}} object")
            label = _text(option, "label", place, required=True)
            options.append(Option(label, _text(option, "description", place, required=False)))
        multi = item.get("multi_select", False)
        if not isinstance(multi, bool):
            raise ToolError(f"invalid arguments: {where} multi_select must be true or false")
        questions.append(
            UserQuestion(
                ident,
                _text(item, "question", where, required=True),
                _text(item, "header", where, required=False),
                tuple(options),
                multi and bool(options),
            )
        )
    return tuple(questions)


def answers_text(answers: Sequence[UserAnswer]) -> str:
    """The result the model reads: ``{"answers": [{"id", "selected", "custom"?}]}``."""
    shaped: list[dict[str, Any]] = []
    for answer in answers:
        entry: dict[str, Any] = {"id": answer.id, "selected": list(answer.selected)}
        if answer.custom is not None:
            entry["custom"] = answer.custom
        shaped.append(entry)
    return json.dumps({"answers": shaped}, ensure_ascii=False)


class AskUserTool:
    """``ask_user_question {questions}``, asked through whatever ``asker`` gives now."""

    def __init__(self, asker: Callable[[], UserAsker | None], *, nobody: str) -> None:
        """``asker``: the front door's, looked up at each call (None: nobody can be asked);
        ``nobody``: why, as the result says it (``stdin is not a terminal``)."""
        self._asker = asker
        self._nobody = nobody

    @property
    def spec(self) -> ToolSpec:
        return specs.ASK_USER_QUESTION

    def describe(self, arguments: Mapping[str, Any]) -> str:
        questions = arguments.get("questions")
        first = questions[0] if isinstance(questions, list) and questions else None
        text = first.get("question") if isinstance(first, dict) else None
        return " ".join(text.split()) if isinstance(text, str) else "a question"

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        unknown = sorted(set(arguments) - {"questions"})
        if unknown:
            raise ToolError(
                f"invalid arguments: ask_user_question takes questions, not {unknown[0]!r}"
            )
        questions = parse_questions(arguments)
        more = f" (and {len(questions) - 1} more)" if len(questions) > 1 else ""

        async def run() -> ToolOutput:
            asker = self._asker()
            if asker is None:
                raise ToolError(
                    f"nobody can be asked: {self._nobody}. Decide yourself, go on, and say in "
                    "your answer what you assumed"
                )
            answers = await asker(questions)
            return ToolOutput(answers_text(answers))

        summary = " ".join(questions[0].question.split()) + more
        return Invocation(Access("read", person=True), summary, run)
