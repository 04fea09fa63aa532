"""Fakes for tests and the demo, shipped with dsh as ``trio.testing`` ships with trio.

- :class:`ScriptedModel`: a :class:`~dsh_core.model.seam.ChatModel` that plays queued event scripts.
- :class:`ManualClock`: a :class:`~dsh_core.clock.Clock` that moves when a test says so.
- :mod:`.conformance`: the checks every ``ChatModel`` passes, the fake and the adapter alike.
- :class:`StubServer`: a real OpenAI-compatible server on loopback that fails on demand; the
  demo (``dsh --demo``) runs against it, and so do the end-to-end tests. Tests script it with
  the behaviours (:class:`Answer`, :class:`ToolCalls`, :class:`HttpError`, ...); it refuses a
  request that breaks DeepSeek's tool-call rules (:func:`validate_request`).

Nothing in the product imports this package except the demo.
"""

from __future__ import annotations

from .behaviours import Answer as Answer
from .behaviours import Behaviour as Behaviour
from .behaviours import Cut as Cut
from .behaviours import Disconnect as Disconnect
from .behaviours import Empty as Empty
from .behaviours import EndWithoutDone as EndWithoutDone
from .behaviours import Held as Held
from .behaviours import HttpError as HttpError
from .behaviours import InBandError as InBandError
from .behaviours import KeepAlives as KeepAlives
from .behaviours import LongStream as LongStream
from .behaviours import Malformed as Malformed
from .behaviours import RawStream as RawStream
from .behaviours import SlowStream as SlowStream
from .behaviours import Stall as Stall
from .behaviours import ToolCalls as ToolCalls
from .behaviours import WrongContentType as WrongContentType
from .clock import ManualClock as ManualClock
from .scripted import Hang as Hang
from .scripted import Script as Script
from .scripted import ScriptedModel as ScriptedModel
from .server import StubServer as StubServer
from .server import closed_port as closed_port
from .triggers import ESCAPE_TEXT as ESCAPE_TEXT
from .triggers import TRIGGERS as TRIGGERS
from .validation import REASONING_NOT_PASSED_BACK as REASONING_NOT_PASSED_BACK
from .validation import TOOL_MESSAGE_UNASKED as TOOL_MESSAGE_UNASKED
from .validation import TOOL_MESSAGES_MISSING as TOOL_MESSAGES_MISSING
from .validation import validate_request as validate_request

# The server comes from .server, not .stub_server, so that ``python -m
# dsh_core.testing.stub_server`` does not find its module already imported (a runpy warning).
__all__ = [
    "ESCAPE_TEXT",
    "REASONING_NOT_PASSED_BACK",
    "TOOL_MESSAGES_MISSING",
    "TOOL_MESSAGE_UNASKED",
    "TRIGGERS",
    "Answer",
    "Behaviour",
    "Cut",
    "Disconnect",
    "Empty",
    "EndWithoutDone",
    "Hang",
    "Held",
    "HttpError",
    "InBandError",
    "KeepAlives",
    "LongStream",
    "Malformed",
    "ManualClock",
    "RawStream",
    "Script",
    "ScriptedModel",
    "SlowStream",
    "Stall",
    "StubServer",
    "ToolCalls",
    "WrongContentType",
    "closed_port",
    "validate_request",
]
