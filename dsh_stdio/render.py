"""Turn what dsh_core reports into transcript text: outcome lines, notices, safe model text.

>>> outcome_line(TurnEnd(turn=0, kind="aborted", failure=None, reason="user"))
'[turn aborted] user'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from dsh_core.chain import error_chain
from dsh_core.errors import (
    AUTH,
    MISSING_CREDENTIAL,
    QUOTA,
    TIMEOUT,
    TOOL_REFUSED,
    TRANSPORT,
    FailureRecord,
)
from dsh_core.model.classify import MISDIRECTED_STATUSES
from dsh_core.model.seam import RetryNotice, ToolCall, Usage
from dsh_core.session.events import ToolResult, TurnEnd
from dsh_core.tools.base import count_lines

from .cells import cut, width
from .cells import rows as rows_of

__all__ = [
    "INTERRUPTED_LINE",
    "WIDE_BLANKS",
    "Clipped",
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
    "todo_mark",
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
        case "max-cost":  # the reason names the limit and the spend (SPEC 15)
            return f"[turn stopped at the cost limit] {end.reason or ''}".rstrip()
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


_TODO_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def todo_mark(status: str) -> str:
    """``[x]`` done, ``[>]`` being worked on, ``[ ]`` not started: the checklist's boxes."""
    return _TODO_MARKS.get(status, "[?]")


OUTPUT_TAIL_LINES = 5
"""Lines of a command's output shown under its result line on a terminal."""
_TAIL_WIDTH = 200
"""Columns of one such line; the model got all of it."""
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
        line if width(line) <= _TAIL_WIDTH else cut(line, _TAIL_WIDTH - 1) + "…"
        for line in lines[-limit:]
    ]


def retry_notice(notice: RetryNotice, *, same_as_before: bool = False) -> str:
    """``retrying in 1.2 s (retry 1 of 4): <error_chain>``; the chain is left out when it is
    the one the previous notice of this request already showed."""
    line = f"retrying in {notice.delay:.1f} s (retry {notice.attempt} of {notice.max_retries})"
    return line if same_as_before else f"{line}: {error_chain(notice.error)}"


def compacted_line(before: int, after: int, pruned: int = 0) -> str:
    """``[context compacted: 812,004 -> 61,220 tokens]``; for a prune, ``[context pruned:
    16,020 -> 7,400 tokens (12 old tool results, whole in files)]``."""
    if pruned:
        results = "1 old tool result" if pruned == 1 else f"{pruned:,} old tool results"
        return f"[context pruned: {before:,} -> {after:,} tokens ({results}, whole in files)]"
    return f"[context compacted: {before:,} -> {after:,} tokens]"


def usage_line(usage: Usage | None, seconds: float, meter: Sequence[str] = ()) -> str:
    """``tokens in 12 (cached 0) / out 30, 0.84 s``, the short line after each turn; ``meter``
    goes before the time (``$0.0012 (cache saved $0.0003)``, ``ctx 34% of 1M``)."""
    if usage is None:
        return ", ".join([*meter, f"{seconds:.2f} s"])
    line = (
        f"tokens in {usage.prompt_tokens} (cached {usage.cached_tokens}) "
        f"/ out {usage.completion_tokens}"
    )
    if usage.reasoning_tokens:
        line += f" (reasoning {usage.reasoning_tokens})"
    return ", ".join([line, *meter, f"{seconds:.2f} s"])


# What a terminal must never receive raw (SPEC 10.9), by Unicode property: controls (Cc) but
# TAB and LF, format characters (Cf: zero-width, joiners, marks, bidi embeddings, overrides and
# isolates, the BOM, tags, the soft hyphen, Egyptian and shorthand format controls, ...),
# surrogates (Cs: no UTF-8 stream can write a lone one), private use (Co: no agreed glyph), the
# line and paragraph separators (Zl, Zp); the default-ignorable code points that are none of
# these (variation selectors, the combining grapheme joiner U+034F, the Khmer inherent vowels,
# the code points Unicode reserves as ignorable), among them the Hangul fillers, which render
# as blank columns; and the braille blank U+2800, which does too. Written out as ranges (for
# Unicode 14, Python 3.11's), so that nothing is computed at startup;
# tests/dsh_stdio/test_render.py derives the same set from ``unicodedata`` and fails when a
# newer Unicode adds to it.
_UNSAFE_BMP = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # Cc, but TAB and LF
    "\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"  # Cf
    "\u2028\u2029"  # Zl, Zp
    "\ud800-\udfff"  # Cs
    "\ue000-\uf8ff"  # Co
    "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u2065\u3164\ufe00-\ufe0f\uffa0"
    "\ufff0-\ufff8"  # Default_Ignorable_Code_Point, the rest of it
    "\u2800"  # braille pattern blank
)
_UNSAFE_ASTRAL = (
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"  # Cf
    "\U000e0000-\U000e0fff"  # tags (Cf) and the rest of Default_Ignorable_Code_Point
    "\U000f0000-\U000ffffd\U00100000-\U0010fffd"  # Co
)
_UNSAFE = re.compile(f"[{_UNSAFE_BMP}{_UNSAFE_ASTRAL}]")
_SCAN = re.compile(f"[{_UNSAFE_BMP}\U00010000-\U0010ffff]")
"""What :func:`neutralise` looks at: every character beyond the BMP is judged one by one
(emoji, mostly: rare), since a class with many ranges there is scanned three times slower."""
_SCAN_ASCII = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
"""The same for ASCII text, the common case."""
_SURROGATES = re.compile("[\ud800-\udfff]")
"""Halves of a UTF-16 pair, alone: a model can send one (``"\\ud800"``), and no UTF-8 stream
can write it."""


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code > 0xFFFF and not _UNSAFE.match(char):
        return char
    if code == 0xFE0F and _presents(match.string, match.start()):
        return char
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation: ESC is ^[, BEL is ^G
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def _presents(text: str, at: int) -> bool:
    """Whether the U+FE0F at ``at`` only asks for the emoji form of the visible character before
    it (``⚠️``), as models write daily: one selector, shown where nothing else is hidden. A run
    of selectors (which can carry a hidden message) or one after a blank is shown visibly."""
    if at == 0 or text[at - 1].isspace() or _UNSAFE.match(text, at - 1):
        return False
    return at + 1 == len(text) or not _UNSAFE.match(text, at + 1)


def writable(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD: what a pipe passes on as data."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def neutralise(text: str) -> str:
    """Make text inert for a person: control, invisible and format characters become visible
    (``^[``, ``<U+200B>``); newline and tab stay, and CRLF is a newline.

    Every byte dsh shows a person goes through it: model text on a terminal, notices, tool
    lines, questions and diffs, reasoning, ``--show`` and ``--sessions``."""
    scan = _SCAN_ASCII if text.isascii() else _SCAN
    return scan.sub(_visible, text.replace("\r\n", "\n"))


_NOT_A_SEPARATOR = re.compile("[\xa0\u1680\u2000-\u200a\u202f\u205f\u3000]")
"""Spaces that bash does not split words at: ``ls\u00a0/../run.sh`` is one word, a path."""


def shown(command: str) -> str:
    """A command (or any call summary) made inert, with what it is made of kept visible: a CR
    is part of what runs (``ls\\r`` is not ``ls``), never folded into a line end, and a space
    that is no space to bash (NBSP, U+2003, ...) is shown by its code (``ls<U+00A0>/x``)."""
    text = neutralise(command.replace("\r", "^M"))
    return _NOT_A_SEPARATOR.sub(_visible, text) if not text.isascii() else text


WIDE_BLANKS = 80
"""Columns from which a run of blanks inside a line is counted instead of shown: as wide as a
terminal line, it could push the rest of the line (and the lines after it) out of sight."""
_BLANKS = re.compile(r"[^\S\n]{2,}")
_REPEATED = re.compile(r"(<U\+[0-9A-F]{4,6}>|\^[@-_?])\1{3,}")
"""Four or more of the same neutralised character in a row (``<U+2800><U+2800>...``)."""


def compact(text: str) -> str:
    """``text`` (already neutralised) with nothing that could hide a line (SPEC 10.10): each run
    of two or more blank lines becomes one ``[60 blank lines]``, a blank line is empty, a run of
    blanks as wide as a line (:data:`WIDE_BLANKS` columns, wide spaces counting two) becomes
    ``[5,000 spaces]`` (``[70 blanks]`` when not all are spaces), and a run of the same
    invisible character, shown by its code, becomes ``[3,000 x <U+2800>]``."""
    out: list[str] = []
    blank = 0
    for line in text.split("\n"):
        if not line.strip():
            blank += 1
            continue
        _blank_lines(out, blank)
        blank = 0
        if "<U+" in line or "^" in line:
            line = _REPEATED.sub(_repeated, line)
        out.append(_BLANKS.sub(_blanks, line))
    _blank_lines(out, blank)
    return "\n".join(out)


def _blank_lines(out: list[str], count: int) -> None:
    if count == 1:
        out.append("")
    elif count > 1:
        out.append(f"[{count:,} blank lines]")


def _blanks(match: re.Match[str]) -> str:
    run = match.group()
    if width(run) < WIDE_BLANKS:
        return run
    return f"[{len(run):,} {'spaces' if run.count(' ') == len(run) else 'blanks'}]"


def _repeated(match: re.Match[str]) -> str:
    token = match.group(1)
    return f"[{len(match.group()) // len(token):,} x {token}]"


@dataclass(frozen=True, slots=True)
class Clipped:
    """What :func:`clip` kept of a text, and what it left out."""

    shown: str
    hidden: int
    """Lines not shown at all."""
    cut_short: int
    """Lines shown by their start only, each ending in "…": too long for the rows there were."""

    def notice(self, what: str) -> str:
        """``[diff cut: 12 more lines hidden; answer v to see all of it]``; "" if nothing is."""
        parts = []
        if self.cut_short:
            many = self.cut_short > 1
            parts.append(f"the end{'s' if many else ''} of {self.cut_short if many else 'a'} ")
            parts[-1] += f"long line{'s' if many else ''}"
        if self.hidden:
            parts.append(f"{self.hidden:,} more line{'' if self.hidden == 1 else 's'}")
        if not parts:
            return ""
        return f"[{what} cut: {' and '.join(parts)} hidden; answer v to see all of it]"


def clip(text: str, *, rows: int, columns: int, line_rows: int | None = None) -> Clipped:
    """The first lines of ``text`` that fit in ``rows`` rows of a terminal ``columns`` wide,
    each line taking the rows its display width needs. A line too long for the rows left, or
    for ``line_rows`` (when given), is shown by its start, ending in "…"."""
    lines = text.split("\n")
    out: list[str] = []
    used = short = 0
    for index, line in enumerate(lines):
        left = rows - used
        if left <= 0:
            return Clipped("\n".join(out), len(lines) - index, short)
        most = left if line_rows is None else min(left, line_rows)
        taken = rows_of(line, columns)
        if taken > most:
            line, taken, short = cut(line, most * columns - 1) + "…", most, short + 1
        out.append(line)
        used += taken
    return Clipped("\n".join(out), 0, short)


_QUOTE_LIMIT = 1_000
"""Columns of the model's words a question quotes by default; the rest is counted."""


def quote(text: str, limit: int | None = _QUOTE_LIMIT) -> str:
    """The model's words as one inert, quoted line: ``"..."`` with its quotes and line breaks
    escaped, so it can neither end the quote nor start a line of its own; cut at ``limit``
    columns (None: whole), with a count of what was left out."""
    import json

    kept = text if limit is None else cut(text, limit)
    quoted = neutralise(json.dumps(kept, ensure_ascii=False))
    left = len(text) - len(kept)
    return f"{quoted} [{left:,} more characters]" if left > 0 else quoted


_DIFF_COLOURS = (("+++ ", "1"), ("--- ", "1"), ("@@", "36"), ("+", "32"), ("-", "31"))


def coloured_diff(diff: str) -> str:
    """A unified diff (already inert) in colour: additions green, removals red, hunks cyan."""
    lines = []
    for line in diff.split("\n"):
        colour = next((code for start, code in _DIFF_COLOURS if line.startswith(start)), None)
        lines.append(f"\x1b[{colour}m{line}\x1b[0m" if colour else line)
    return "\n".join(lines)
