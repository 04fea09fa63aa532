"""A scripted :class:`~dsh_core.model.seam.ChatModel`: tests and fixtures queue what each request
yields.

model = ScriptedModel()
model.enqueue([TextDelta("Hello"), Finish("stop")], LlmError("overloaded", "SERVER"))
model.enqueue([TextDelta("Partial"), Hang()])    # then nothing, until the request is cancelled

It behaves as :class:`~dsh_core.model.deepseek.DeepSeekAdapter` does where the loop can tell (the
conformance kit, :mod:`.conformance`, checks both): failures are ``LlmError``, and a cancelled
request lets ``CancelledError`` through.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

from ..model.seam import ChatRequest, Event

__all__ = ["Hang", "Script", "ScriptedModel"]


@dataclass(frozen=True, slots=True)
class Hang:
    """A script item: the stream waits here until the request is cancelled (a stalled server)."""


Script = Sequence[Event | BaseException | Hang] | BaseException


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
            if isinstance(item, Hang):
                await asyncio.Event().wait()  # set by nobody: only a cancel ends it
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item

    async def close(self) -> None:
        return None
