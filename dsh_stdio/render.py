"""Turn what dsh_core reports into transcript text: outcome lines, notices, safe model text.

>>> outcome_line(TurnEnd(turn=0, kind="aborted", failure=None, reason="user"))
'[turn aborted] user'
"""

from __future__ import annotations

import re
from typing import assert_never

from dsh_core.chain import error_chain
from dsh_core.classify import MISDIRECTED_STATUSES
from dsh_core.errors import (
    AUTH,
    MISSING_CREDENTIAL,
    QUOTA,
    TIMEOUT,
    TOOL_REFUSED,
    TRANSPORT,
    FailureRecord,
)
from dsh_core.events import ToolResult, TurnEnd
from dsh_core.llm import RetryNotice, ToolCall, Usage
from dsh_core.tools.base import count_lines

__all__ = [
    "INTERRUPTED_LINE",
    "clip",
    "coloured_diff",
    "compact",
    "compacted_line",
    "neutralise",
    "next_step",
    "outcome_line",
    "output_tail",
    "quote",
    "retry_notice",
    "shown",
    "tool_call_line",
    "tool_result_line",
    "usage_line",
    "writable",
]

INTERRUPTED_LINE = "[turn interrupted by a previous process exit]"


def outcome_line(end: TurnEnd, *, steps: int | None = None) -> str | None:
    """The one line SPEC section 3 prints after a turn that did not simply complete.

    A failure a person can do something about ends with that one step (SPEC section 12), and
    the step limit names itself (``steps``: the limit the turn ran into) and its flag.
    """
    match end.kind:
        case "error":
            failure = end.failure or FailureRecord("UNKNOWN", "")
            line = f"[turn failed {failure.code}] {failure.message}"
            step = next_step(failure)
            return f"{line} (next: {step})" if step else line
        case "aborted":
            return f"[turn aborted] {end.reason or ''}".rstrip()
        case "rejected":
            return f"[turn rejected] {end.reason or ''}".rstrip()
        case "interrupted":
            return INTERRUPTED_LINE
        case "max-tokens":
            return "[turn stopped at the output token limit]"
        case "max-steps":
            limit = f"{steps} step{'' if steps == 1 else 's'} " if steps else ""
            step = "send a message to go on, or raise --max-steps"
            return f"[turn stopped at the step limit] {limit}(next: {step})"
        case "completed" | "other":
            return None  # a normal end, and so is a kind from a newer version
        case _:
            assert_never(end.kind)


_NEXT_STEPS = {
    AUTH: "check DEEPSEEK_API_KEY",
    QUOTA: "top up the account's balance",
    MISSING_CREDENTIAL: "export DEEPSEEK_API_KEY=..., or try dsh --demo",
    TRANSPORT: "check --base-url, the network and HTTPS_PROXY, then try again",
    TIMEOUT: "try again, or raise --timeout",
}


def next_step(failure: FailureRecord) -> str | None:
    """What a person can do about a failed turn, in a few words; None when nothing is short."""
    if failure.status in MISDIRECTED_STATUSES:
        return "check --base-url: dsh adds /chat/completions to it"
    if failure.code.startswith("HTTP_4"):
        return "check --base-url and --model"
    return _NEXT_STEPS.get(failure.code)


def tool_call_line(call: ToolCall, summary: str, note: str = "") -> str:
    """``[tool bash] $ pytest -q (not sandboxed)``: the call, before it runs, inert; further
    lines indented, and blank ones that could push a line out of sight counted instead."""
    line = f"[tool {neutralise(call.name)}] " + "\n  ".join(compact(shown(summary)).split("\n"))
    return f"{line} {note}" if note else line


def tool_result_line(call: ToolCall, result: ToolResult) -> str:
    """The result, after it ran: ``[tool bash exit 1] 34 lines``, ``[tool read done] 12 lines``,
    ``[tool failed read] <error_chain>``, ``[tool refused bash] <why and the way out>``."""
    if result.is_error:
        failure = result.error
        word = "refused" if failure is not None and failure.code == TOOL_REFUSED else "failed"
        message = failure.message if failure is not None else result.content
        return f"[tool {word} {call.name}] {message}"
    state = "done" if result.exit_code is None else f"exit {result.exit_code}"
    lines = 0 if result.content == "(no output)" else count_lines(result.content)
    line = f"[tool {call.name} {state}] {lines} line{'' if lines == 1 else 's'}"
    if result.truncated and result.output_file:
        line += f", cut short for the model (all of it in {result.output_file})"
    return line


OUTPUT_TAIL_LINES = 5
"""Lines of a command's output shown under its result line on a terminal."""
_TAIL_WIDTH = 200
"""Characters of one such line; the model got all of it."""
_EXIT_MARKER = re.compile(r"\[exit code: -?\d+\]")


def output_tail(result: ToolResult, limit: int = OUTPUT_TAIL_LINES) -> list[str]:
    """The last non-blank lines of a command's output, for under its result line.

    Without the failure line before the output and the ``[exit code: N]`` after it: the result
    line says both. Empty for tools that run no command.
    """
    if result.exit_code is None or result.content == "(no output)":
        return []
    text = result.content.partition("\n")[2] if result.is_error else result.content
    lines = [line for line in text.split("\n") if line.strip()]
    if lines and _EXIT_MARKER.fullmatch(lines[-1]):
        lines.pop()
    return [
        line if len(line) <= _TAIL_WIDTH else line[: _TAIL_WIDTH - 1] + "…"
        for line in lines[-limit:]
    ]


def retry_notice(notice: RetryNotice, *, same_as_before: bool = False) -> str:
    """``retrying in 1.2 s (retry 1 of 4): <error_chain>``; the chain is left out when it is
    the one the previous notice of this request already showed."""
    line = f"retrying in {notice.delay:.1f} s (retry {notice.attempt} of {notice.max_retries})"
    return line if same_as_before else f"{line}: {error_chain(notice.error)}"


def compacted_line(before: int, after: int) -> str:
    """``[context compacted: 812,004 -> 61,220 tokens]``."""
    return f"[context compacted: {before:,} -> {after:,} tokens]"


def usage_line(usage: Usage | None, seconds: float) -> str:
    """``tokens in 12 (cached 0) / out 30, 0.84 s``, the short line after each turn."""
    if usage is None:
        return f"{seconds:.2f} s"
    line = (
        f"tokens in {usage.prompt_tokens} (cached {usage.cached_tokens}) "
        f"/ out {usage.completion_tokens}"
    )
    if usage.reasoning_tokens:
        line += f" (reasoning {usage.reasoning_tokens})"
    return f"{line}, {seconds:.2f} s"


# What a terminal must never receive raw (SPEC 10.9): C0 controls but TAB and LF, DEL, C1
# controls; the invisible and format characters that hide, join or reorder what is shown
# (zero-width space and joiners, marks, bidi embeddings, overrides and isolates, word joiner
# and invisible operators, the BOM, the tag characters, the soft hyphen, Arabic letter mark,
# Mongolian vowel separator, deprecated format controls, interlinear annotation); the line and
# paragraph separators; and lone surrogates, which no UTF-8 stream can write.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
_SURROGATES = re.compile("[\ud800-\udfff]")
"""Halves of a UTF-16 pair, alone: a model can send one (``"\\ud800"``), and no UTF-8 stream
can write it."""


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation: ESC is ^[, BEL is ^G
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def writable(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD: what a pipe passes on as data."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def neutralise(text: str) -> str:
    """Make text inert for a person: control, invisible and format characters become visible
    (``^[``, ``<U+200B>``); newline and tab stay, and CRLF is a newline.

    Every byte dsh shows a person goes through it: model text on a terminal, notices, tool
    lines, questions and diffs, reasoning, ``--show`` and ``--sessions``."""
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def shown(command: str) -> str:
    """A command (or any call summary) made inert, its carriage returns kept visible: a CR is
    part of what runs (``ls\\r`` is not ``ls``), never folded into a line end."""
    return neutralise(command.replace("\r", "^M"))


_WIDE_SPACE = re.compile(r"[^\S\n]{80,}")
"""A run of blanks wider than a terminal line: it could push the rest of a line (and the lines
after it) out of sight."""


def compact(text: str) -> str:
    """``text`` (already neutralised) with nothing that could hide a line: each run of two or
    more blank lines becomes one ``[60 blank lines]``, a blank line is empty, and a run of 80
    or more blanks inside a line becomes ``[5,000 spaces]`` (SPEC 10.10)."""
    out: list[str] = []
    blank = 0
    for line in text.split("\n"):
        if not line.strip():
            blank += 1
            continue
        _blank_lines(out, blank)
        blank = 0
        out.append(_WIDE_SPACE.sub(_spaces, line))
    _blank_lines(out, blank)
    return "\n".join(out)


def _blank_lines(out: list[str], count: int) -> None:
    if count == 1:
        out.append("")
    elif count > 1:
        out.append(f"[{count:,} blank lines]")


def _spaces(match: re.Match[str]) -> str:
    return f"[{len(match.group()):,} spaces]"


def clip(text: str, *, lines: int, chars: int) -> tuple[str, int]:
    """The first lines of ``text`` that fit in ``lines`` lines and ``chars`` characters, and
    how many lines were left out."""
    parts = text.split("\n")
    size = 0
    for index, line in enumerate(parts):
        size += len(line) + 1
        if index >= lines or size > chars:
            return "\n".join(parts[:index]), len(parts) - index
    return text, 0


_QUOTE_LIMIT = 1_000
"""Characters of the model's words a question quotes; the rest is counted."""


def quote(text: str) -> str:
    """The model's words as one inert, quoted line: ``"..."`` with its quotes and line breaks
    escaped, so it can neither end the quote nor start a line of its own."""
    import json

    cut = len(text) - _QUOTE_LIMIT
    quoted = neutralise(json.dumps(text[:_QUOTE_LIMIT], ensure_ascii=False))
    return f"{quoted} [{cut:,} more characters]" if cut > 0 else quoted


_DIFF_COLOURS = (("+++ ", "1"), ("--- ", "1"), ("@@", "36"), ("+", "32"), ("-", "31"))


def coloured_diff(diff: str) -> str:
    """A unified diff (already inert) in colour: additions green, removals red, hunks cyan."""
    lines = []
    for line in diff.split("\n"):
        colour = next((code for start, code in _DIFF_COLOURS if line.startswith(start)), None)
        lines.append(f"\x1b[{colour}m{line}\x1b[0m" if colour else line)
    return "\n".join(lines)
