"""What dsh knows about models: their context windows, and the window a server states.

    model_facts("deepseek-v4-flash").context_window   # 1_048_576
    model_facts("qwen3-32b").context_window           # None: the server's answer decides
    stated_window("This model's maximum context length is 32768 tokens. However, ...")  # 32768

SPEC section 11: the DeepSeek V4 family (``deepseek-v4-flash``, ``deepseek-v4-pro`` and their
dated variants) and the retired aliases ``deepseek-chat`` and ``deepseek-reasoner`` take
1,048,576 tokens, and answer with up to 393,216. For any other name no window is assumed: a
vLLM or SGLang server may serve any model with any limit, and a wrong guess either refuses a
conversation that fits or sends one that does not. There the server's context-window 400 says
the limit (:func:`stated_window`), and dsh holds to it for the rest of the session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["UNKNOWN_MODEL", "ModelFacts", "model_facts", "stated_window"]


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What is known of one model; None where nothing is."""

    context_window: int | None
    """Tokens a request (the conversation and the answer) may hold."""
    max_output: int | None
    """Tokens one answer may hold at most."""


UNKNOWN_MODEL = ModelFacts(None, None)
"""A model dsh has no facts about: no window assumed."""

_DEEPSEEK_V4 = ModelFacts(context_window=1_048_576, max_output=393_216)

_KNOWN = (
    # The V4 family, with a dated variant's suffix: -0324, -20260415, -2026-04-15.
    (re.compile(r"deepseek-v4-(?:flash|pro)(?:-\d{4}(?:-?\d{2}-?\d{2})?)?"), _DEEPSEEK_V4),
    # Retired aliases (2026-07-24) of V4 flash; servers that still take them serve V4.
    (re.compile(r"deepseek-(?:chat|reasoner)"), _DEEPSEEK_V4),
)


def model_facts(name: str) -> ModelFacts:
    """The facts for the model ``name`` (matched whole, case-insensitively)."""
    lowered = name.strip().lower()
    for pattern, facts in _KNOWN:
        if pattern.fullmatch(lowered):
            return facts
    return UNKNOWN_MODEL


# DeepSeek, OpenAI and vLLM word it alike: "This model's maximum context length is 131072
# tokens. However, you requested 140000 tokens (...)". SGLang: "... is longer than the model's
# context length (32768 tokens)".
_STATED = re.compile(
    r"maximum context length is (\d[\d,]*) tokens|model's context length \((\d[\d,]*) tokens\)",
    re.IGNORECASE,
)


def stated_window(message: str) -> int | None:
    """The context window a server's refusal states, or None when it states none."""
    found = _STATED.search(message)
    if found is None:
        return None
    tokens = int((found.group(1) or found.group(2)).replace(",", ""))
    return tokens if tokens > 0 else None
