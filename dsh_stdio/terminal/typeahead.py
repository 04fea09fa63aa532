"""Lines entered while a turn runs: queued, shown dim, sent as the next turns (SPEC 17).

    typed = TypeAhead(stdin, on_queued=lambda line: view.notice(f"queued: {line}"))
    typed.listen()        # the turn starts
    ...                   # a question: typed.pause() before it, typed.listen() after
    typed.pause()         # the turn ended
    line = typed.take()   # the next turn's text, before any prompt

While a turn runs the terminal stays in cooked mode without echo (``tty.quiet_terminal``): the
line discipline keeps what is typed, and a line becomes readable only when Enter ends it. So
this reads whole lines only: what is typed and not entered stays in the terminal for the next
prompt, as before. Ctrl-C cancels the turn, and the line discipline drops the unfinished line;
:meth:`TypeAhead.drop` forgets the queued ones.

A queued line never answers a question: reading stops before the question is asked
(:meth:`TypeAhead.pause`), and the question throws away whatever was typed after that and not
entered (``tty.discard_typed_ahead``), so only keys typed at the question answer it.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import deque
from collections.abc import Callable

__all__ = ["TypeAhead", "typed_line"]

_KEYS = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|O.|.)?|[\x00-\x08\x0a-\x1f\x7f]")
"""What a key other than a character leaves in a cooked line (arrows, Home, Ctrl-letters)."""


def typed_line(raw: bytes) -> str:
    """The text of one line read from the terminal: keys that are no text taken out."""
    return _KEYS.sub("", raw.decode("utf-8", "replace")).strip()


class TypeAhead:
    """The queue of lines entered during turns, read from the terminal ``fd``."""

    def __init__(self, fd: int, *, on_queued: Callable[[str], None]) -> None:
        """``on_queued`` shows a line as it is queued."""
        self._fd = fd
        self._on_queued = on_queued
        self._lines: deque[str] = deque()
        self._partial = b""
        """A line longer than one read returns: its start, until its end comes."""
        self._listening = False

    def __len__(self) -> int:
        return len(self._lines)

    def listen(self) -> None:
        """Read lines as they are entered (on a terminal only; a pipe's lines are turns)."""
        if self._listening or not os.isatty(self._fd):
            return
        asyncio.get_running_loop().add_reader(self._fd, self._readable)
        self._listening = True

    def pause(self) -> None:
        """Stop reading: a question, or the prompt, reads the terminal now."""
        if self._listening:
            asyncio.get_running_loop().remove_reader(self._fd)
            self._listening = False

    def take(self) -> str | None:
        """The oldest queued line, or None."""
        return self._lines.popleft() if self._lines else None

    def drop(self) -> int:
        """Forget the queued lines (Ctrl-C); how many there were."""
        count = len(self._lines)
        self._lines.clear()
        self._partial = b""
        return count

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.pause()  # the terminal went away: the turn's end says the rest
            return
        if not data:
            self.pause()
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            line = typed_line(raw)
            if line:
                self._lines.append(line)
                self._on_queued(line)
