"""How the stub server counts a request's prompt: tokens, the cached prefix, the previous request.

    counter = PromptCounter()
    count = counter.count(body)      # the raw request body, as it arrived
    count.tokens, count.cache_hit    # what the usage reports: prompt_tokens, cache hit tokens
    count.extends_previous           # its messages begin, byte for byte, with the last one's
    counter.remember(count)          # after answering it: its prefixes are cached from now on

**Tokens** are counted by :func:`count_tokens`, a stand-in for DeepSeek's tokenizer (which dsh
cannot ship): words of up to six letters with the space before them, numbers of up to three
digits, each other character, each run of other white space count one token each. It runs
about 20% above DeepSeek's rule of thumb (0.3 per ASCII character) on English prose and higher
on JSON and code, so dsh's own estimate meets a count that is not its own. Each message counts
as its raw JSON text as sent (keys and escapes included, as a chat template adds its own
markers), and the tools as theirs.

**The cache** works as DeepSeek's implicit prefix cache does: a request's prefix (the model and
tools, then its messages one by one) that an earlier answered request also began with is a hit,
counted in whole units of 64 tokens; the rest is a miss.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field

__all__ = ["CACHE_UNIT", "PromptCount", "PromptCounter", "count_tokens", "raw_fields", "raw_items"]

CACHE_UNIT = 64
"""Tokens: a cache hit is counted in whole units of this many (DeepSeek stores 64-token units)."""

_PIECES = re.compile(r" ?[A-Za-z]{1,6}| ?\d{1,3}|[^\S ]+| (?! ?[A-Za-z\d])|[^\sA-Za-z\d]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def count_tokens(text: str) -> int:
    """Tokens in ``text`` by the stub's stand-in rule (see the module)."""
    return len(_PIECES.findall(text))


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def raw_fields(body: str) -> dict[str, str]:
    """The raw JSON text of each top-level field of a JSON object, as it was written."""
    fields: dict[str, str] = {}
    try:
        index = _skip(body, 0)
        if body[index] != "{":
            return {}
        index = _skip(body, index + 1)
        while body[index] != "}":
            key, index = _DECODER.raw_decode(body, index)
            index = _skip(body, _skip(body, index) + 1)  # the colon
            _, end = _DECODER.raw_decode(body, index)
            fields[str(key)] = body[index:end]
            index = _skip(body, end)
            if body[index] == ",":
                index = _skip(body, index + 1)
    except (ValueError, IndexError):
        return fields
    return fields


def raw_items(array: str) -> list[str]:
    """The raw JSON text of each item of a JSON array, as it was written."""
    items: list[str] = []
    try:
        index = _skip(array, 0)
        if array[index] != "[":
            return []
        index = _skip(array, index + 1)
        while array[index] != "]":
            _, end = _DECODER.raw_decode(array, index)
            items.append(array[index:end])
            index = _skip(array, end)
            if array[index] == ",":
                index = _skip(array, index + 1)
    except (ValueError, IndexError):
        return items
    return items


@dataclass(frozen=True, slots=True)
class PromptCount:
    """One request's prompt, as the stub counted it."""

    tokens: int
    """``prompt_tokens``: the tools and every message."""
    cache_hit: int
    """Tokens of the longest prefix an earlier answered request began with (64-token units)."""
    extends_previous: bool | None
    """Its messages begin, byte for byte, with those of the last answered request; None for
    the first request."""
    messages: int
    digests: tuple[bytes, ...] = field(repr=False)
    """The digest of each prefix: the model and tools, then one more message each."""


class PromptCounter:
    """Counts prompts and remembers which prefixes are cached. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: set[bytes] = set()
        self._previous: tuple[bytes, ...] | None = None
        """The digests of the last answered request."""

    def count(self, body: bytes) -> PromptCount:
        """Count the raw request ``body`` (a JSON object)."""
        text = body.decode("utf-8", "replace")
        fields = raw_fields(text)
        tools = fields.get("tools", "")
        root = hashlib.sha256((fields.get("model", "") + tools).encode()).digest()
        digests = [root]
        sizes = [count_tokens(tools)]
        for message in raw_items(fields.get("messages", "[]")):
            digests.append(hashlib.sha256(digests[-1] + message.encode()).digest())
            sizes.append(count_tokens(message))
        with self._lock:
            hit = 0
            for digest, size in zip(digests, sizes, strict=True):
                if digest not in self._cached:
                    break
                hit += size
            previous = self._previous
        extends = None
        if previous is not None:
            extends = len(previous) <= len(digests) and digests[len(previous) - 1] == previous[-1]
        hit -= hit % CACHE_UNIT
        return PromptCount(sum(sizes), hit, extends, len(digests) - 1, tuple(digests))

    def remember(self, count: PromptCount) -> None:
        """``count``'s request was answered: its prefixes are cached, and it is the previous."""
        with self._lock:
            self._cached.update(count.digests)
            self._previous = count.digests
