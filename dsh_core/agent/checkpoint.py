"""The checkpoint a compaction's summary is sent as (SPEC 11): a user-role message that opens
with dsh's heading, carries the latest user request and the todo list verbatim, then the
summary, and closes with an end line that nothing inside it can write.

    checkpoint_message(summary, request="fix the parser", todos=history.todos)
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.seam import UserMessage
from ..session.events import Todo

__all__ = [
    "CHECKPOINT_END",
    "CHECKPOINT_HEADING",
    "VERBATIM_LIMIT",
    "checkpoint_message",
    "reading_form",
]

CHECKPOINT_HEADING = (
    "[Checkpoint: the conversation before this point was compacted into the summary below, to "
    "free room in the context window. The messages after it are the most recent exchanges, "
    "kept as they were. Continue the work from here.]"
)


CHECKPOINT_END = (
    "[End of the checkpoint. The summary above was written by the assistant, not by the user; "
    "what follows it is the conversation as it was.]"
)
"""The line that closes the summary: a kept turn's user message is joined to the checkpoint,
and without it the summary's last words would read as the start of that message."""


_END_OPENING = "[End of the checkpoint"


VERBATIM_LIMIT = 16_000
"""Characters of the latest user request a checkpoint carries verbatim; a longer one is cut,
and the cut says so (a 256 KiB pasted file would otherwise undo what the compaction freed)."""


def checkpoint_message(
    summary: str, *, request: str | None = None, todos: Sequence[Todo] = ()
) -> UserMessage:
    """The user-role message a compaction's summary is sent as: heading, the latest user request
    (when the summary replaced it) and the todo list verbatim, the summary, the end line.

    dsh's verbatim parts come before the summary, so that nothing the summary says can pose as
    them. Any part that writes the end line itself has its bracket turned round (it cannot close
    early and go on as the user). Written as a reader would take it is enough (issue 31, class
    9): in upper case, with a no-break or zero-width space, in full-width brackets or letters,
    across a line break; the text is compared after NFKC, case folding and with invisible
    characters removed (:func:`reading_form`).
    """
    parts = [CHECKPOINT_HEADING]
    if request is not None:
        cut = ""
        if len(request) > VERBATIM_LIMIT:
            cut = (
                f"\n[cut: the first {VERBATIM_LIMIT:,} of its {len(request):,} characters are "
                "above; the whole of it is in the session log]"
            )
        parts.append(
            "[The user's latest request, verbatim:]\n" + _unclosing(request[:VERBATIM_LIMIT]) + cut
        )
    if todos:
        listed = "\n".join(f"- [{todo.status}] {todo.content}" for todo in todos)
        parts.append("[The todo list, as todo_write last set it:]\n" + _unclosing(listed))
    if request is not None or todos:
        parts.append("[The summary, written by the assistant:]")
    parts.append(_unclosing(summary))
    parts.append(CHECKPOINT_END)
    return UserMessage("\n\n".join(parts))


def _unclosing(text: str) -> str:
    """``text`` with every end line it writes (as a reader takes it) broken at its bracket."""
    # Removing the line would join the text around it into a new one; breaking its opening
    # cannot: its "[" occurs once in it and the replacement adds none, so one pass suffices.
    read, where = reading_form(text)
    opening = reading_form(_END_OPENING)[0]
    turned = list(text)
    start = read.find(opening)
    while start >= 0:
        turned[where[start]] = "]"  # the character a reader takes for the "["
        start = read.find(opening, start + 1)
    return "".join(turned)


def reading_form(text: str) -> tuple[str, list[int]]:
    """``text`` as a reader takes it: each character in its NFKC form, case folded, invisible
    ones (format characters, controls that are not spaces, variation selectors, fillers)
    left out and every run of spaces one space; with, for each character of that form, the
    index in ``text`` it came from."""
    import unicodedata

    read: list[str] = []
    where: list[int] = []
    spaced = False
    for index, char in enumerate(text):
        if _invisible(char):
            continue
        for part in unicodedata.normalize("NFKC", char).casefold():
            if part.isspace():
                if spaced:
                    continue
                part, spaced = " ", True
            else:
                spaced = False
            read.append(part)
            where.append(index)
    return "".join(read), where


def _invisible(char: str) -> bool:
    import unicodedata

    code = ord(char)
    category = unicodedata.category(char)
    return (
        category == "Cf"  # zero-width spaces and joiners, bidi controls, the BOM, tags
        or (category == "Cc" and not char.isspace())
        or code in _FILLERS
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0xE0100 <= code <= 0xE01EF
    )


_FILLERS = frozenset((0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x3164, 0xFFA0))
"""Default-ignorable characters that are not format characters: the combining grapheme
joiner, Hangul fillers, Khmer inherent vowels, the Mongolian vowel separator."""
