"""Fakes for tests and the demo, shipped with dsh as ``trio.testing`` ships with trio.

- :class:`ScriptedModel`: a :class:`~dsh_core.llm.ChatModel` that plays queued event scripts.
- :class:`StubServer`: a real OpenAI-compatible server on loopback that fails on demand; the
  demo (``dsh --demo``) runs against it, and so do the end-to-end tests.

Nothing in the product imports this package except the demo.
"""

from __future__ import annotations

from .scripted import Script as Script
from .scripted import ScriptedModel as ScriptedModel
from .stub_server import StubServer as StubServer
from .stub_server import closed_port as closed_port

__all__ = ["Script", "ScriptedModel", "StubServer", "closed_port"]
