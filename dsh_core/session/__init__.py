"""The durable session log: one append-only JSONL file per session (SPEC section 6).

One module per job:

- :mod:`.events`: the records a session holds (turns, messages, tool calls, compactions).
- :mod:`.codec`: records to JSON-ready values and back, by their type annotations.
- :mod:`.lines`: the line format, and the one reader of every line (no I/O).
- :mod:`.log`: :class:`SessionLog`, one open log, appended to line by line.
- :mod:`.store`: :class:`SessionStore`, where sessions live; loading one repairs what a crash
  left, and says so.
- :mod:`.ids`: the id index, which finds a session's log in one look.
- :mod:`.catalogue`: reading logs without locking or repairing them (``--sessions``,
  ``--show``).

May import: the leaves and :mod:`dsh_core.model` (the messages a record carries).
"""

from __future__ import annotations

from .catalogue import SessionSummary as SessionSummary
from .catalogue import StoredSession as StoredSession
from .catalogue import read_log as read_log
from .catalogue import summarise_log as summarise_log
from .events import SessionEvent as SessionEvent
from .lines import FORMAT_VERSION as FORMAT_VERSION
from .lines import encode_line as encode_line
from .lines import format_time as format_time
from .log import SessionLog as SessionLog
from .store import LOG_NAME as LOG_NAME
from .store import SUBAGENTS_DIR as SUBAGENTS_DIR
from .store import TOOL_OUTPUT_DIR as TOOL_OUTPUT_DIR
from .store import LoadReport as LoadReport
from .store import SessionStore as SessionStore
from .store import cwd_key as cwd_key

__all__ = [
    "FORMAT_VERSION",
    "LOG_NAME",
    "SUBAGENTS_DIR",
    "TOOL_OUTPUT_DIR",
    "LoadReport",
    "SessionEvent",
    "SessionLog",
    "SessionStore",
    "SessionSummary",
    "StoredSession",
    "cwd_key",
    "encode_line",
    "format_time",
    "read_log",
    "summarise_log",
]
