"""Trigger words to behaviours, without a server: which word wins, which step, what is quoted."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core.testing import Answer, HttpError, LongStream, ToolCalls
from dsh_core.testing.triggers import _TOOL_SCRIPTS, TRIGGERS, TriggerPicker, tool_results_summary

READ = ("read", '{"file_path": "demo.txt"}')


@pytest.fixture
def picker() -> TriggerPicker:
    return TriggerPicker(LongStream(10))


def request(*messages: dict[str, Any], text: str = "") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}, *messages]}


def calling(*names: str, step: int = 1) -> dict[str, Any]:
    calls = [
        {"id": f"call_{step}_{k}", "type": "function", "function": {"name": name}}
        for k, name in enumerate(names)
    ]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def result(call_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_every_tool_word_is_a_listed_trigger() -> None:
    listed = {word for word in TRIGGERS if word.startswith("tool")}
    assert set(_TOOL_SCRIPTS) | {"toolfiles"} == listed  # toolfiles takes its files from the line


def test_toolfiles_reads_each_file_of_its_line_then_answers(picker: TriggerPicker) -> None:
    line = "turn 3 toolfiles a.txt b.txt"
    first = picker.pick(request(text=line), b"1")
    assert first == ToolCalls((("read", '{"file_path": "a.txt"}'),))
    second = picker.pick(request(calling("read"), result("call_1_0"), text=line), b"2")
    assert second == ToolCalls((("read", '{"file_path": "b.txt"}'),))
    # After a compaction the request ends with the checkpoint: the turn goes on where it was.
    checkpoint = {"role": "user", "content": "[Checkpoint: ...]"}
    third = picker.pick({"messages": [checkpoint]}, b"3")
    assert third == Answer("Read 2 files.")
    assert picker.pick(request(text="hello"), b"4") == Answer("You said: hello")


def test_a_longer_word_is_not_read_as_a_shorter_one(picker: TriggerPicker) -> None:
    assert isinstance(picker.pick(request(text="toolthink"), b"1"), ToolCalls)
    assert isinstance(picker.pick(request(text="TOOLREAD please"), b"2"), ToolCalls)
    assert picker.pick(request(text="tool read"), b"3") == Answer("You said: tool read")


def test_the_step_is_the_number_of_calling_messages_since_the_user(picker: TriggerPicker) -> None:
    step1 = calling("read", step=1)
    step2 = calling("glob", step=2)
    step3 = calling("grep", step=3)
    answered = [step1, result("call_1_0"), step2, result("call_2_0")]
    third = picker.pick(request(*answered, text="toolchain"), b"")
    assert isinstance(third, ToolCalls)
    assert third.calls == (("grep", '{"pattern": "Hello"}'),)
    done = picker.pick(request(*answered, step3, result("call_3_0"), text="toolchain"), b"")
    assert done == Answer("Tool results: [read] ok; [glob] ok; [grep] ok")


def test_an_earlier_turn_does_not_count(picker: TriggerPicker) -> None:
    earlier = [{"role": "user", "content": "toolread"}, calling("read"), result("call_1_0")]
    payload = {
        "messages": [
            *earlier,
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "toolread"},
        ]
    }
    picked = picker.pick(payload, b"")
    assert isinstance(picked, ToolCalls) and picked.calls == (READ,)


def test_toolthink_reasons_before_its_calls_and_its_answer(picker: TriggerPicker) -> None:
    first = picker.pick(request(text="toolthink"), b"")
    assert isinstance(first, ToolCalls) and first.reasoning
    answer = picker.pick(request(calling("read"), result("call_1_0"), text="toolthink"), b"")
    assert isinstance(answer, Answer) and answer.reasoning


def test_toolloop_never_answers(picker: TriggerPicker) -> None:
    steps = [m for n in range(1, 60) for m in (calling("read", step=n), result(f"call_{n}_0"))]
    picked = picker.pick(request(*steps, text="toolloop"), b"")
    assert isinstance(picked, ToolCalls) and picked.calls == (READ,)


def test_a_plain_message_ending_with_results_is_answered_with_them(picker: TriggerPicker) -> None:
    picked = picker.pick(request(calling("echo"), result("call_1_0", "hi"), text="go"), b"")
    assert picked == Answer("Tool results: [echo] hi")
    # A non-tool trigger still wins.
    picked = picker.pick(request(calling("echo"), result("call_1_0"), text="quota"), b"")
    assert isinstance(picked, HttpError)


def test_the_summary_quotes_the_first_line_cut_at_80() -> None:
    long = "x" * 100
    messages = [
        {"role": "user", "content": "go"},
        calling("read", "bash", "grep"),
        result("call_1_0", "1\tHello demo\n2\tsecond line\n"),
        result("call_1_1", long),
        result("call_1_2", [{"type": "text", "text": "a:1:Hello"}]),
        result("unknown", "one line\n"),
    ]
    assert tool_results_summary(messages) == (
        "Tool results: [read] 1\tHello demo...; "
        f"[bash] {'x' * 80}...; [grep] a:1:Hello; [?] one line"
    )


def test_the_summary_without_results() -> None:
    assert tool_results_summary([{"role": "user", "content": "go"}]) == "Tool results: none"
