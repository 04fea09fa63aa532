"""A scripted :class:`~dsh_core.llm.ChatModel`: tests and fixtures queue what each request yields.

model = ScriptedModel()
model.enqueue([TextDelta("Hello"), Finish("stop")], LlmError("overloaded", "SERVER"))
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from ..llm import ChatRequest, Event

__all__ = ["Script", "ScriptedModel"]

Script = list[Event | BaseException] | BaseException


@dataclass
class ScriptedModel:
    """A ChatModel that plays queued scripts, one per request (tests and fixtures).

    Each script is a list of events, optionally ending with an exception to raise after them,
    or an exception alone. ``requests`` records every request received.
    """

    scripts: deque[Script] = field(default_factory=deque)
    requests: list[ChatRequest] = field(default_factory=list)
    delay: float = 0.0
    """Seconds to sleep before each event, so tests can cancel mid-stream."""

    def enqueue(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    def extend(self, scripts: Iterable[Script]) -> None:
        self.scripts.extend(scripts)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        self.requests.append(request)
        if not self.scripts:
            raise AssertionError("ScriptedModel: no script queued for this request")
        script = self.scripts.popleft()
        if isinstance(script, BaseException):
            raise script
        for item in script:
            if self.delay:
                await asyncio.sleep(self.delay)
            if isinstance(item, BaseException):
                raise item
            yield item

    async def close(self) -> None:
        return None
