"""A battery every :class:`~dsh_core.model.seam.ChatModel` passes, as trio's
``check_one_way_stream``.

    await check_chat_model(scripted_model)   # the fake
    await check_chat_model(stub_adapter)     # the real adapter, over the stub server

A factory turns neutral :data:`Scenario` values (one per request) into a model that plays them;
each check then asks what the agent loop relies on: an answer ends with ``Finish``; a failure is
an ``LlmError``; cancelling the consuming task at any moment ends it with ``CancelledError`` (never
an error in its place); a stream closed early or cancelled leaves the model usable. A fake that
passed while the adapter failed (or the other way round) is how tests come to prove nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from ..errors import AUTH, LlmError
from ..model.seam import ChatModel, ChatRequest, Event, Finish, TextDelta, UserMessage
from .clock import ManualClock
from .scripted import Hang, Script, ScriptedModel

__all__ = [
    "CHECKS",
    "Check",
    "ModelFactory",
    "Refused",
    "Reply",
    "Scenario",
    "Stuck",
    "check_chat_model",
    "scripted_model",
    "stub_adapter",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole answer: ``text``, then ``Finish("stop")``."""

    text: str


@dataclass(frozen=True, slots=True)
class Stuck:
    """``after_text`` (if any), then nothing more until the request is cancelled or closed."""

    after_text: str = ""


@dataclass(frozen=True, slots=True)
class Refused:
    """The key is refused before any answer: ``LlmError`` with code ``AUTH``."""


Scenario = Reply | Stuck | Refused
ModelFactory = Callable[[Sequence[Scenario]], AbstractAsyncContextManager[ChatModel]]
"""Makes a model that plays one scenario per request, in order; closes it at the end."""

_REQUEST = ChatRequest(model="deepseek-v4-flash", messages=(UserMessage("hello"),))


@contextlib.asynccontextmanager
async def scripted_model(scenarios: Sequence[Scenario]) -> AsyncIterator[ChatModel]:
    """The scenarios as :class:`ScriptedModel` scripts."""
    model = ScriptedModel()
    for scenario in scenarios:
        script: Script
        match scenario:
            case Reply(text=text):
                script = [TextDelta(text), Finish("stop")]
            case Stuck(after_text=text):
                script = [TextDelta(text), Hang()] if text else [Hang()]
            case Refused():
                script = LlmError("DeepSeek API returned HTTP 401 Unauthorized", AUTH)
        model.enqueue(script)
    yield model
    await model.close()


@contextlib.asynccontextmanager
async def stub_adapter(scenarios: Sequence[Scenario]) -> AsyncIterator[ChatModel]:
    """The scenarios played by the stub server, to a :class:`DeepSeekAdapter` on a clock of
    its own (no timer fires on its own: a stuck answer stays stuck)."""
    from ..model.deepseek import DeepSeekAdapter
    from .behaviours import Answer, Behaviour, HttpError, Stall
    from .server import StubServer

    behaviours: list[Behaviour] = []
    for scenario in scenarios:
        match scenario:
            case Reply(text=text):
                behaviours.append(Answer(text))
            case Stuck(after_text=text):
                behaviours.append(Stall(3600, after_text=text or None))
            case Refused():
                behaviours.append(HttpError(401, "Authentication Fails"))
    with StubServer() as server:
        server.enqueue(*behaviours)
        adapter = DeepSeekAdapter(
            base_url=server.url, api_key="sk-conformance", clock=ManualClock()
        )
        try:
            yield adapter
        finally:
            await adapter.close()


# -- the checks ------------------------------------------------------------------------------


async def check_answers(factory: ModelFactory) -> None:
    """An answer's text arrives in order, and ``Finish`` is the last event."""
    async with factory([Reply("Hello there, friend")]) as model:
        events = [event async for event in model.stream(_REQUEST)]
    _expect(_text(events) == "Hello there, friend", f"the text of {events}")
    _expect(events[-1] == Finish("stop"), f"{events} do not end with Finish('stop')")


async def check_failure_is_an_llm_error(factory: ModelFactory) -> None:
    """A refused request raises ``LlmError`` with its code, before any text."""
    async with factory([Refused()]) as model:
        events: list[Event] = []
        try:
            async for event in model.stream(_REQUEST):
                events.append(event)
        except LlmError as exc:
            _expect(exc.code == AUTH, f"{exc!r} should have code AUTH")
            _expect(not _text(events), f"text before the failure: {events}")
            return
    raise AssertionError(f"a refused request ended without an LlmError: {events}")


async def check_cancel_mid_stream(factory: ModelFactory) -> None:
    """Cancelling the consumer mid-answer ends it with ``CancelledError``."""
    async with factory([Stuck("Partial")]) as model:
        first_text = asyncio.Event()
        task = asyncio.create_task(_consume(model, first_text))
        await _until(first_text, task)
        await _cancelled(task)


async def check_cancel_before_any_event(factory: ModelFactory) -> None:
    """Cancelling the consumer as soon as it started ends it with ``CancelledError``."""
    async with factory([Stuck()]) as model:
        task = asyncio.create_task(_consume(model, asyncio.Event()))
        await asyncio.sleep(0)  # the request has started; whatever it waits on, cancel it
        await _cancelled(task)


async def check_closing_early(factory: ModelFactory) -> None:
    """A stream closed before its end closes quietly, and the model answers the next request."""
    async with factory([Stuck("Partial"), Reply("again")]) as model:
        stream = model.stream(_REQUEST)
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
        events = [event async for event in model.stream(_REQUEST)]
        _expect(_text(events) == "again", f"after closing early, the next answer was {events}")


async def check_usable_after_cancel(factory: ModelFactory) -> None:
    """After a cancelled request, the model answers the next one."""
    async with factory([Stuck("Partial"), Reply("again")]) as model:
        first_text = asyncio.Event()
        task = asyncio.create_task(_consume(model, first_text))
        await _until(first_text, task)
        await _cancelled(task)
        events = [event async for event in model.stream(_REQUEST)]
        _expect(_text(events) == "again", f"after a cancel, the next answer was {events}")


Check = Callable[[ModelFactory], Coroutine[object, object, None]]
"""One check: run it with a factory; AssertionError says what failed."""

CHECKS: tuple[Check, ...] = (
    check_answers,
    check_failure_is_an_llm_error,
    check_cancel_mid_stream,
    check_cancel_before_any_event,
    check_closing_early,
    check_usable_after_cancel,
)
"""Every check, for test suites that run them one by one."""


async def check_chat_model(factory: ModelFactory) -> None:
    """Run every check against the models ``factory`` makes; AssertionError says what failed."""
    for check in CHECKS:
        await check(factory)


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def _text(events: Sequence[Event]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def _consume(model: ChatModel, first_text: asyncio.Event) -> None:
    async for event in model.stream(_REQUEST):
        if isinstance(event, TextDelta):
            first_text.set()


async def _until(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait for ``event``; a task that ends first (it failed) fails the check."""
    waiter = asyncio.create_task(event.wait())
    await asyncio.wait((waiter, task), return_when=asyncio.FIRST_COMPLETED)
    if not event.is_set():
        waiter.cancel()
        await task  # raises what the stream raised
        raise AssertionError("the stream ended before its first text")


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        _expect(task.cancelled(), "the stream caught the cancellation")
        return
    except BaseException as exc:
        raise AssertionError(f"a cancelled request raised {exc!r}, not CancelledError") from exc
    raise AssertionError("a cancelled request ended normally")
