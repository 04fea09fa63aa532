"""Secrets masked in every string dsh shows, stores or sends to the model (SPEC 10.5).

The API key is registered once, where it is read; from then on :func:`mask` replaces its value
with ``[DEEPSEEK_API_KEY]`` wherever text enters dsh (a server's error body, a tool's result, a
URL, the model's own words) and :func:`~dsh_core.chain.error_chain` masks every failure::

    hide("sk-...")                            # the config, the adapter
    mask("401: Authorization: Bearer sk-...")  # '401: Authorization: Bearer [DEEPSEEK_API_KEY]'

Text that arrives in pieces (a streamed answer, a command's output) goes through a
:class:`StreamMasker`, which holds back the end of a piece that could be the start of a secret
until the next piece says whether it is.

A value shorter than :data:`MIN_SECRET_CHARS` is not masked: a key like ``x`` or ``any`` (a
local server's placeholder) is no secret anyone could keep, and masking it would mangle every
sentence that holds those letters. Only the exact value is masked, not encodings of it (none
of dsh's own paths encode the key; a server that base64-encodes it is out of reach).
"""

from __future__ import annotations

import threading

__all__ = [
    "KEY_NAME",
    "MIN_SECRET_CHARS",
    "SECRETS",
    "Secrets",
    "StreamMasker",
    "hide",
    "mask",
    "maskable",
]

KEY_NAME = "DEEPSEEK_API_KEY"
"""The name the key is masked as: ``[DEEPSEEK_API_KEY]``."""

MIN_SECRET_CHARS = 8
"""Values shorter than this are not masked (see the module's docstring)."""


def maskable(value: str) -> bool:
    """Whether ``value`` is long enough to be masked (and to be hidden from children)."""
    return len(value.strip()) >= MIN_SECRET_CHARS


class Secrets:
    """The values to mask, each with the name it is shown as; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pairs: tuple[tuple[str, str], ...] = ()
        """``(value, [NAME])``, longest value first, so a secret inside another loses."""

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def hide(self, value: str, name: str = KEY_NAME) -> None:
        """Mask ``value`` from now on (no-op for a value too short to be a secret)."""
        value = value.strip()
        if not maskable(value):
            return
        with self._lock:
            pairs = {**dict(self._pairs), value: f"[{name}]"}
            self._pairs = tuple(sorted(pairs.items(), key=lambda pair: -len(pair[0])))

    def clear(self) -> None:
        """Forget every secret (for tests: one test's key must not mask the next one's text)."""
        with self._lock:
            self._pairs = ()

    def mask(self, text: str) -> str:
        """``text`` with every secret's value replaced by its name in brackets."""
        for value, shown in self._pairs:
            if value in text:
                text = text.replace(value, shown)
        return text

    def held(self, text: str) -> int:
        """How many characters at the end of ``text`` could be the start of a secret."""
        longest = 0
        for value, _ in self._pairs:
            # Only a suffix that starts with the secret's first character can begin it.
            start = text.find(value[0], max(0, len(text) - len(value) + 1))
            while start >= 0:
                if value.startswith(text[start:]):
                    longest = max(longest, len(text) - start)
                    break
                start = text.find(value[0], start + 1)
        return longest


SECRETS = Secrets()
"""The process's secrets: the API key, registered where it is read."""


def hide(value: str, name: str = KEY_NAME) -> None:
    """Mask ``value`` in every string from now on (:data:`SECRETS`)."""
    SECRETS.hide(value, name)


def mask(text: str) -> str:
    """``text`` with the API key (and any other hidden value) replaced by ``[NAME]``."""
    return SECRETS.mask(text) if SECRETS else text


class StreamMasker:
    """Masks text that arrives in pieces, where a secret may be split between two of them.

    ``feed`` returns what can be passed on now; the end of a piece that could begin a secret is
    kept until the next piece (or :meth:`flush`) shows whether it does. Without secrets every
    piece passes through as it is.
    """

    def __init__(self, secrets: Secrets = SECRETS) -> None:
        self._secrets = secrets
        self._kept = ""

    def feed(self, text: str) -> str:
        """The masked text that can be passed on now."""
        if self._kept:
            text, self._kept = self._kept + text, ""
        if not self._secrets:
            return text
        text = self._secrets.mask(text)
        keep = self._secrets.held(text)
        if keep:
            self._kept = text[-keep:]
            return text[:-keep]
        return text

    @property
    def holding(self) -> bool:
        """Whether some text is held back."""
        return bool(self._kept)

    def flush(self) -> str:
        """What was kept back: the text has ended, so it is no secret's start after all."""
        kept, self._kept = self._kept, ""
        return kept

    def reset(self) -> None:
        """Forget what was kept back (the text it belonged to starts over)."""
        self._kept = ""
