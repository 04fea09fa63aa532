"""Model facts: the windows dsh knows, and the window a server's refusal states."""

from __future__ import annotations

import pytest

from dsh_core.model.models import UNKNOWN_MODEL, model_facts, stated_window
from dsh_core.testing.server import context_length_message

V4 = (1_048_576, 393_216)


@pytest.mark.parametrize(
    "name",
    [
        "deepseek-v4-flash",
        "deepseek-v4-pro",
        "DeepSeek-V4-Flash",
        "deepseek-v4-flash-0415",
        "deepseek-v4-pro-20260415",
        "deepseek-v4-pro-2026-04-15",
        "deepseek-chat",
        "deepseek-reasoner",
    ],
)
def test_the_v4_family_and_its_aliases_take_a_million_tokens(name: str) -> None:
    facts = model_facts(name)
    assert (facts.context_window, facts.max_output) == V4


@pytest.mark.parametrize(
    "name",
    [
        "qwen3-32b",
        "deepseek-v3",
        "deepseek-v4-flashy",
        "my-deepseek-v4-flash",
        "deepseek-coder",
        "",
    ],
)
def test_any_other_model_has_no_window_assumed(name: str) -> None:
    assert model_facts(name) == UNKNOWN_MODEL


@pytest.mark.parametrize(
    ("message", "window"),
    [
        (context_length_message(65_536, 70_000, 4_096), 65_536),  # DeepSeek, as the stub says it
        (
            "DeepSeek API returned HTTP 400 Bad Request: This model's maximum context length is "
            "131,072 tokens. However, your messages resulted in 140,000 tokens.",
            131_072,
        ),
        (
            "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
            32_768,
        ),  # SGLang
        ("prompt is too long", None),
        ("maximum context length is 0 tokens", None),
    ],
)
def test_the_window_a_refusal_states(message: str, window: int | None) -> None:
    assert stated_window(message) == window
