"""What the libraries dsh imports log (the MCP SDK, httpx, anyio, ...), shown as dsh's notices.

Without a handler, Python's last-resort handler writes a library's warnings to stderr as they
are: the MCP SDK logs ``Unknown SSE event: <name>`` and ``Tool <name> not listed`` with a
server's words in them, escape sequences and all (SPEC 10.15). One handler on the root logger
takes every record from a library (dsh's own loggers keep their records: the transcript already
says what they say) and makes it one line: the logger's name, the message, the exception's
chain instead of a traceback, masked and neutralised like any notice, through the same sink::

    show_library_logs(runtime.notice)      # from now on; again with None at the end

Warnings (:mod:`warnings`) go the same way (``logging.captureWarnings``).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable

from dsh_core.chain import error_chain
from dsh_core.masking import mask

from ..render import neutralise, writable

__all__ = ["MAX_LOG_LINE", "LibraryLog", "show_library_logs"]

MAX_LOG_LINE = 500
"""Characters of one library record shown; a server can make a message as long as it likes."""
_OURS = ("dsh_core", "dsh_stdio")


class LibraryLog(logging.Handler):
    """Shows a library's records at WARNING and above as one masked, neutralised line each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.sink: Callable[[str], None] | None = None
        """Where a line goes (the runtime's notices); None: a ``dsh:`` line on stderr."""
        self.thread = threading.get_ident()
        """The event loop's thread: only there may the sink be called."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".", 1)[0] in _OURS:
            return
        try:
            text = record.getMessage()
        except Exception:  # a library's own bad format string: its words, as they are
            text = str(record.msg)
        if record.exc_info is not None and record.exc_info[1] is not None:
            text += f": {error_chain(record.exc_info[1])}"
        text = " ".join(f"{record.name}: {text}".split())  # one line, whatever it holds
        if len(text) > MAX_LOG_LINE:
            text = text[: MAX_LOG_LINE - 1] + "…"
        text = mask(text)
        sink = self.sink
        if sink is not None and threading.get_ident() == self.thread:
            sink(text)
            return
        try:
            sys.stderr.write(writable(f"dsh: {neutralise(text)}\n"))
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass  # stderr is only a side channel


_HANDLER = LibraryLog()


def show_library_logs(sink: Callable[[str], None] | None) -> None:
    """Route every library's log records (and warnings) to ``sink`` from now on; ``None``:
    to stderr, still masked and neutralised. Installed once per process."""
    root = logging.getLogger()
    if _HANDLER not in root.handlers:
        root.addHandler(_HANDLER)
        logging.captureWarnings(True)
    _HANDLER.sink = sink
    _HANDLER.thread = threading.get_ident()
