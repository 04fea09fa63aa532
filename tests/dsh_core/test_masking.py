"""The key's value masked wherever it enters (SPEC 10.5): the helper, and the loop that uses it.

The attacks on the real process are in ``tests/security/test_r05_key_masked.py``; here, the
rules in process: what is masked, what a short key leaves alone, a key split between pieces.
"""

from __future__ import annotations

import asyncio

import pytest

from dsh_core.agent.loop import Conversation, LoopEvent
from dsh_core.chain import error_chain
from dsh_core.masking import SECRETS, Secrets, StreamMasker, hide, mask
from dsh_core.model.seam import Finish, ReasoningDelta, TextDelta, ToolCall, ToolCallRequest
from dsh_core.model.urls import redact_url
from dsh_core.session import SessionLog
from dsh_core.session.events import AssistantStep, SystemPrompt, ToolResult, UserText
from dsh_core.testing import ScriptedModel
from dsh_core.trust.workspace import child_environment
from tests.dsh_core.agent.test_loop_tools import FakeTool, conversation_with, records

KEY = "sk-dsh-canary-0123456789abcdef"
MASKED = "[DEEPSEEK_API_KEY]"


def secrets(*values: str) -> Secrets:
    made = Secrets()
    for value in values:
        made.hide(value)
    return made


def test_the_key_is_masked_wherever_it_is_in_a_string() -> None:
    found = secrets(KEY)
    assert found.mask(f"Authorization: Bearer {KEY}, again {KEY}.") == (
        f"Authorization: Bearer {MASKED}, again {MASKED}."
    )
    assert found.mask("nothing here") == "nothing here"


@pytest.mark.parametrize("short", ["x", "any", "sk-1234"])
def test_a_short_key_is_not_masked_it_would_mangle_text(short: str) -> None:
    found = secrets(short)
    assert not found
    assert found.mask("any box of sk-1234 examples") == "any box of sk-1234 examples"


def test_the_longest_secret_is_masked_first() -> None:
    found = Secrets()
    found.hide("abcdefgh", "SHORT")
    found.hide("abcdefgh-and-more", "LONG")
    assert found.mask("abcdefgh-and-more abcdefgh") == "[LONG] [SHORT]"


def test_a_key_split_between_pieces_is_masked_at_every_split() -> None:
    text = f"the key is {KEY}, really"
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1, 7):
            stream = StreamMasker(secrets(KEY))
            pieces = [text[:first], text[first:second], text[second:]]
            out = "".join(stream.feed(piece) for piece in pieces) + stream.flush()
            assert out == f"the key is {MASKED}, really", pieces


def test_a_key_in_another_case_is_masked_at_every_split() -> None:
    """``tr a-z A-Z`` or a server's echo changes nothing: the key in any case is the key."""
    for key in (KEY.upper(), KEY.title(), KEY.swapcase()):
        text = f"the key is {key}, really"
        for first in range(len(text) + 1):
            stream = StreamMasker(secrets(KEY))
            out = stream.feed(text[:first]) + stream.feed(text[first:]) + stream.flush()
            assert out == f"the key is {MASKED}, really", (key, first)
    assert secrets(KEY).mask(KEY.encode().hex().upper()) == "[DEEPSEEK_API_KEY as hex]"


def test_a_stream_holds_back_only_what_could_begin_the_key() -> None:
    stream = StreamMasker(secrets(KEY))
    assert stream.feed("this is ") == "this is "
    assert stream.feed("sk-d") == ""  # could be the key
    assert stream.feed("og") == "sk-dog"  # it was not
    assert stream.feed("s") == ""
    assert stream.flush() == "s"  # the text ended: no secret
    assert stream.feed("SK-DSH") == ""  # in another case too
    assert stream.feed("!") == "SK-DSH!"
    without = StreamMasker(Secrets())
    assert without.feed("sk-d") == "sk-d"


def test_error_chain_and_redact_url_mask_the_key() -> None:
    hide(KEY)
    try:
        raise RuntimeError(f"401: Bearer {KEY}") from OSError(f"GET /?key={KEY}")
    except RuntimeError as exc:
        assert error_chain(exc) == f"401: Bearer {MASKED}: GET /?key={MASKED}"
    assert redact_url(f"https://u:p@api.example/?key={KEY}") == (
        f"https://***@api.example/?key={MASKED}"
    )
    assert mask(KEY) == MASKED


def test_a_short_key_keeps_every_other_variable_for_commands() -> None:
    environ = {"DEEPSEEK_API_KEY": "x", "BOX": "box of xylophones", "PATH": "/bin"}
    assert child_environment(environ) == {"BOX": "box of xylophones", "PATH": "/bin"}
    environ = {"DEEPSEEK_API_KEY": KEY, "COPY": f"key={KEY}", "UP": KEY.upper(), "PATH": "/bin"}
    assert child_environment(environ) == {"PATH": "/bin"}


def test_a_variable_holding_the_key_in_a_form_masking_finds_is_not_passed_to_commands() -> None:
    # Second review (D7): the environment had its own test (the value in any Unicode case)
    # while masking finds the encodings too: `export TOKEN=$(printf %s "$KEY" | base64)`.
    import base64

    environ = {
        "DEEPSEEK_API_KEY": KEY,
        "B64": base64.b64encode(KEY.encode()).decode(),
        "HEX": f"0x{KEY.encode().hex().upper()}",
        "REVERSED": KEY[::-1],
        "PATH": "/bin",
    }
    assert child_environment(environ) == {"PATH": "/bin"}
    assert not secrets().holds(KEY) and secrets(KEY).holds(f"x{environ['B64']}")


# -- the loop masks what enters it ----------------------------------------------------------------


def test_the_loop_masks_the_model_the_user_and_the_tools(
    model: ScriptedModel, log: SessionLog
) -> None:
    hide(KEY)
    leaky = FakeTool("leaky")  # answers "echo <text>": the key, if the call holds it
    model.enqueue(
        [
            ReasoningDelta("the header said sk-dsh-"),
            ReasoningDelta(KEY[7:]),
            TextDelta("let me check sk"),
            TextDelta("-dsh-canary-0123456789abcdef"),
            ToolCallRequest(ToolCall("c1", "leaky", f'{{"text": "{KEY}"}}')),
            Finish("tool-calls"),
        ],
        [TextDelta("done"), Finish("stop")],
    )
    seen: list[LoopEvent] = []
    conversation = conversation_with(model, log, leaky, system_prompt=f"AGENTS.md says {KEY}")
    asyncio.run(conversation.run_turn(f"my key is {KEY}", on_event=seen.append))
    assert SECRETS and KEY not in log.path.read_text()
    assert records(log, SystemPrompt) == [SystemPrompt(f"AGENTS.md says {MASKED}")]
    assert records(log, UserText)[0].text == f"my key is {MASKED}"
    step = records(log, AssistantStep)[0]
    assert (step.reasoning, step.text) == (f"the header said {MASKED}", f"let me check {MASKED}")
    assert step.tool_calls == (ToolCall("c1", "leaky", f'{{"text": "{MASKED}"}}'),)
    assert leaky.ran == [{"text": MASKED}]  # what runs is what was shown and asked about
    assert records(log, ToolResult)[0].content == f"echo {MASKED}"
    shown = "".join(e.text for e in seen if isinstance(e, TextDelta | ReasoningDelta))
    assert KEY not in shown and shown.count(MASKED) == 2
    assert KEY not in repr(model.requests[-1])  # what the model was sent next


def test_text_held_back_when_a_stream_is_cut_is_shown_and_kept(
    model: ScriptedModel, log: SessionLog
) -> None:
    """A piece that could have begun the key, then the stream breaks: it was no key."""
    from dsh_core.errors import LlmError

    hide(KEY)
    model.enqueue([TextDelta("this is"), TextDelta(" sk"), LlmError("cut", "STREAM_CLOSED")])
    seen: list[LoopEvent] = []
    conversation: Conversation = conversation_with(model, log)
    end = asyncio.run(conversation.run_turn("q", on_event=seen.append))
    assert end.kind == "error"
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "this is sk"
    assert records(log, AssistantStep)[0].text == "this is sk"


# -- encoded forms ------------------------------------------------------------------------------


def test_the_keys_common_encodings_are_masked_wherever_it_starts() -> None:
    import base64

    found = secrets(KEY)
    data = KEY.encode()
    for before in (b"", b"x", b"xy", b"KEY=", b"export DEEPSEEK_API_KEY="):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(before + data + b"\n").decode()
            masked = found.mask(f"out: {encoded} end")
            assert "[DEEPSEEK_API_KEY as base64]" in masked, (before, encoded)
    for form, how in [
        (KEY[::-1], "reversed"),
        (data.hex(), "hex"),
        (data.hex().upper(), "hex"),
        ("".join(f"%{byte:02X}" for byte in data), "percent-encoding"),
        ("".join(f"%{byte:02x}" for byte in data), "percent-encoding"),
    ]:
        assert found.mask(f"[{form}]") == f"[[DEEPSEEK_API_KEY as {how}]]", how


def test_a_short_text_is_not_searched_and_a_stream_holds_back_only_the_key() -> None:
    found = secrets(KEY)
    assert found.mask("sk-dsh") == "sk-dsh"
    stream = StreamMasker(found)
    assert stream.feed("fedcba") == "fedcba"  # the start of the key reversed: not held back
    assert stream.feed(f"{KEY[::-1]} ") == "[DEEPSEEK_API_KEY as reversed] "  # whole: masked


def test_a_stream_masked_at_every_line_of_a_hide_in_another_thread_never_fails() -> None:
    # Second review (D5): hide() assigned its fields one by one, so a stream read between two
    # assignments saw one secret's value and another's start (`zip(strict=True)` raised). Here
    # hide() stops at each of its lines (a trace in its thread) while this thread masks.
    import queue
    import sys
    import threading
    from types import FrameType
    from typing import Any

    found = secrets(KEY)
    other = "another-secret-" + "z" * 20
    stopped: queue.Queue[int | None] = queue.Queue()
    resume: queue.Queue[None] = queue.Queue()

    def line(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            stopped.put(frame.f_lineno)
            resume.get()
        return line

    def hiding() -> None:
        sys.settrace(lambda frame, _e, _a: line if frame.f_code is Secrets.hide.__code__ else None)
        try:
            found.hide(other)
        finally:
            sys.settrace(None)
            stopped.put(None)

    thread = threading.Thread(target=hiding, daemon=True)  # left stopped if this fails
    thread.start()
    steps = 0
    while stopped.get() is not None:
        stream = StreamMasker(found)
        shown = stream.feed(f"{KEY} and {other[:10]}") + stream.feed(other[10:]) + stream.flush()
        assert shown.startswith(f"{MASKED} and "), shown
        steps += 1
        resume.put(None)
    thread.join()
    assert steps > 3
    assert found.mask(other) == MASKED
