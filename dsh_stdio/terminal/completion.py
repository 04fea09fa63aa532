"""Tab at the prompt: ``/commands`` and their arguments, and ``@path`` (SPEC 17).

    completer = DshCompleter(COMMANDS, arguments={"/model NAME": models, "/resume ID": ids})

Commands come from the table ``/help`` lists (``repl.COMMANDS``), so a command added there
completes without more work. Each entry's words after the command say what follows it: a word
in lower case is completed as it is (``/mcp restart``), ``on|off`` offers each choice, and a
placeholder in capitals (``NAME``, ``ID``) offers what ``arguments`` gives for that entry
(model names for ``/model NAME``, this directory's session ids for ``/resume ID``), or nothing.
``@`` anywhere in a line completes the path after it, as a shell would, from the working
directory (``~`` is the home directory).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

__all__ = ["DshCompleter", "command_words"]

_PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")
_AT_PATH = re.compile(r"(?:^|(?<=\s))@(\S*)$")
"""An ``@path`` being typed: ``@`` at the start of the line or after a blank, up to the cursor."""


def command_words(entry: str) -> list[str]:
    """``"/mcp restart NAME"`` -> ``["/mcp", "restart", "NAME"]``; ``"//TEXT"`` is no command."""
    return [] if entry.startswith("//") else entry.split()


def _fits(words: list[str], done: list[str]) -> bool:
    """Whether the words typed so far fit an entry's and it has a word after them; a
    placeholder takes any word."""
    if len(words) <= len(done):
        return False
    return all(
        pattern == typed or _PLACEHOLDER.fullmatch(pattern) or typed in pattern.split("|")
        for pattern, typed in zip(words, done, strict=False)
    )


class DshCompleter(Completer):
    """Completes slash commands, their arguments and ``@`` paths."""

    def __init__(
        self,
        commands: Mapping[str, str],
        *,
        arguments: Mapping[str, Callable[[], Iterable[str]]] | None = None,
    ) -> None:
        """``commands``: the help table, read at each Tab (others may add to it); ``arguments``:
        what each entry's placeholder may be, by the entry (``"/model NAME"``)."""
        self._commands = commands
        self._arguments = arguments or {}
        self._paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        at_path = _AT_PATH.search(before)
        if at_path is not None:
            yield from self._path_completions(at_path.group(1), event)
        elif before.startswith("/") and "\n" not in before:
            yield from self._command_completions(before)

    def _command_completions(self, before: str) -> Iterator[Completion]:
        typed = before.split(" ")
        done, word = typed[:-1], typed[-1]
        offered: set[str] = set()
        for entry, what in list(self._commands.items()):
            words = command_words(entry)
            if not words:
                continue
            if not done:
                candidates = [(words[0], what)]
            elif _fits(words, done):
                candidates = [(c, "") for c in self._candidates(entry, words[len(done)])]
            else:
                continue
            for text, meta in candidates:
                if text.startswith(word) and text not in offered:
                    offered.add(text)
                    yield Completion(text, -len(word), display_meta=meta)

    def _candidates(self, entry: str, pattern: str) -> list[str]:
        if _PLACEHOLDER.fullmatch(pattern):
            source = self._arguments.get(entry)
            return sorted(set(source())) if source is not None else []
        return pattern.split("|")

    def _path_completions(self, typed: str, event: CompleteEvent) -> Iterator[Completion]:
        path = Document(typed, len(typed))
        for completion in self._paths.get_completions(path, event):
            text = completion.text
            whole = typed[: len(typed) + completion.start_position] + text
            if os.path.isdir(os.path.expanduser(whole)) and not text.endswith("/"):
                text += "/"  # a directory: go on into it
            yield Completion(
                text, completion.start_position, display=completion.display, display_meta=""
            )
