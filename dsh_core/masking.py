"""Secrets masked in every string dsh shows, stores or sends to the model (SPEC 10.5).

The API key is registered once, where it is read; from then on :func:`mask` replaces its value
with ``[DEEPSEEK_API_KEY]`` wherever text enters dsh (a server's error body, a tool's result, a
URL, the model's own words) and :func:`~dsh_core.chain.error_chain` masks every failure::

    hide("sk-...")                            # the config, the adapter
    mask("401: Authorization: Bearer sk-...")  # '401: Authorization: Bearer [DEEPSEEK_API_KEY]'

Text that arrives in pieces (a streamed answer, a command's output) goes through a
:class:`StreamMasker`, which holds back the end of a piece that could be the start of a secret
until the next piece says whether it is.

Matching ignores the case of ASCII letters (a command can print the key upper-cased, ``tr a-z
A-Z``; a server can echo it so): ``SK-...`` is masked as ``sk-...`` is, in a stream too.

A value shorter than :data:`MIN_SECRET_CHARS` is not masked: a key like ``x`` or ``any`` (a
local server's placeholder) is no secret anyone could keep, and masking it would mangle every
sentence that holds those letters.

The common encodings of a value are masked too, as ``[DEEPSEEK_API_KEY as base64]``: base64
(standard and URL-safe, at each of the three alignments the value can have in the encoded
bytes, so the key inside a longer text is found too: only the characters that hold bits of
the key alone), hex (either case), percent-encoding (every byte, either case) and the value
reversed. A command the model runs could print any of them (``... | base64``). Any other
transformation (pieces, rot13, a hex dump with spaces) gets through: masking is the last
line; the first is that the key is in nothing a command can read (SPEC 10.5). A stream holds
back only what could begin the exact value: an encoded form split between two pieces of a
stream is not found (the model is never sent the key, so only a server could stream it).
"""

from __future__ import annotations

import binascii
import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "KEY_NAME",
    "MIN_SECRET_CHARS",
    "SECRETS",
    "Secrets",
    "StreamMasker",
    "encodings",
    "hide",
    "mask",
    "maskable",
    "secrets_of",
]

KEY_NAME = "DEEPSEEK_API_KEY"
"""The name the key is masked as: ``[DEEPSEEK_API_KEY]``."""

MIN_SECRET_CHARS = 8
"""Values shorter than this are not masked (see the module's docstring)."""


def maskable(value: str) -> bool:
    """Whether ``value`` is long enough to be masked (and to be hidden from children)."""
    return len(value.strip()) >= MIN_SECRET_CHARS


@dataclass(frozen=True, slots=True)
class _Masks:
    """What :class:`Secrets` masks at one moment: built whole, swapped in one assignment, so a
    thread masking while another hides a secret sees the old masks or the new ones."""

    pairs: tuple[tuple[str, str], ...] = ()
    """``(value or an encoding of it, [NAME ...])``, longest first, so a secret inside another
    loses."""
    values: tuple[tuple[str, str, re.Pattern[str]], ...] = ()
    """``(value, [NAME], a non-empty start of it, in any case, that ends the text)``: what a
    stream holds back the start of."""
    shortest: int = 0
    """The length of the shortest string masked: a shorter text holds none."""
    shown: Mapping[str, str] = field(default_factory=dict)
    """``pairs`` by the lower-cased string: what a match in any case is shown as."""
    found: re.Pattern[str] | None = None
    """Any of ``pairs``' strings, in any case, longest first."""


class Secrets:
    """The values to mask, each with the name it is shown as; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # between two hide(): each builds on the other's masks
        self._masks = _Masks()

    def __bool__(self) -> bool:
        return bool(self._masks.pairs)

    def hide(self, value: str, name: str = KEY_NAME) -> None:
        """Mask ``value`` and its encodings from now on (no-op for a value too short to be a
        secret)."""
        value = value.strip()
        if not maskable(value):
            return
        with self._lock:
            now = self._masks
            values = {**{held: shown for held, shown, _ in now.values}, value: f"[{name}]"}
            pairs = dict(now.pairs)
            for form, how in encodings(value):
                pairs.setdefault(form, f"[{name} as {how}]")
            pairs.update(values)
            ordered = _longest_first(pairs)
            alternatives = "|".join(re.escape(form) for form, _ in ordered)
            self._masks = _Masks(  # one assignment: see _Masks
                pairs=ordered,
                values=tuple(
                    (held, shown, _start_of(held)) for held, shown in _longest_first(values)
                ),
                shortest=len(ordered[-1][0]),
                shown={form.lower(): shown for form, shown in reversed(ordered)},
                found=re.compile(alternatives, re.IGNORECASE | re.ASCII),
            )

    def clear(self) -> None:
        """Forget every secret (for tests: one test's key must not mask the next one's text)."""
        with self._lock:
            self._masks = _Masks()

    def mask(self, text: str) -> str:
        """``text`` with every secret's value (or an encoding of it), in any case, replaced by
        its name in brackets."""
        now = self._masks
        if now.found is None or len(text) < now.shortest:  # a streamed piece, mostly
            return text
        lowered = text.lower()  # a quick no first: the pattern is a hundred times slower
        if not any(form in lowered for form in now.shown):
            return text
        return now.found.sub(lambda match: now.shown[match.group().lower()], text)

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds a secret's value or an encoding of it, in any case: the one
        test of it (what :meth:`mask` would replace)."""
        return self.mask(text) != text

    def held(self, text: str) -> int:
        """How many characters at the end of ``text`` could be the start of a secret (in any
        case)."""
        longest = 0
        for value, _, start in self._masks.values:
            # The leftmost match is the longest end; the whole value was masked already.
            found = start.search(text, max(0, len(text) - len(value) + 1))
            if found:
                longest = max(longest, len(text) - found.start())
        return longest


def _longest_first(pairs: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs.items(), key=lambda pair: -len(pair[0])))


def _start_of(value: str) -> re.Pattern[str]:
    """A pattern for a non-empty start of ``value``, in any case, at the end of a text:
    ``a(?:b(?:c)?)?\\Z`` for ``abc``."""
    pattern = ""
    for char in reversed(value[1:]):
        pattern = f"(?:{re.escape(char)}{pattern})?"
    return re.compile(re.escape(value[0]) + pattern + r"\Z", re.IGNORECASE | re.ASCII)


def encodings(value: str) -> list[tuple[str, str]]:
    """The forms of ``value`` a command could print it in, each with the encoding's name;
    each at least as long as a secret must be (:data:`MIN_SECRET_CHARS`)."""
    data = value.encode()
    forms = [(value[::-1], "reversed"), (data.hex(), "hex"), (data.hex().upper(), "hex")]
    forms += [("".join(f"%{byte:02X}" for byte in data), "percent-encoding")]
    forms += [("".join(f"%{byte:02x}" for byte in data), "percent-encoding")]
    for offset in range(3):
        # The characters whose six bits all come from the value, when it starts `offset`
        # bytes into a group of three: the ones before and after depend on its neighbours.
        encoded = binascii.b2a_base64(bytes(offset) + data, newline=False).decode()
        core = encoded[-(-offset * 8 // 6) : (offset + len(data)) * 8 // 6]
        forms += [(core, "base64"), (core.replace("+", "-").replace("/", "_"), "base64")]
    return [(form, how) for form, how in forms if form != value and maskable(form)]


SECRETS = Secrets()
"""The process's secrets: the API key, registered where it is read."""


def hide(value: str, name: str = KEY_NAME) -> None:
    """Mask ``value`` in every string from now on (:data:`SECRETS`)."""
    SECRETS.hide(value, name)


def mask(text: str) -> str:
    """``text`` with the API key (and any other hidden value) replaced by ``[NAME]``."""
    return SECRETS.mask(text) if SECRETS else text


@functools.lru_cache(maxsize=4)
def secrets_of(*values: str) -> Secrets:
    """Secrets that mask ``values`` (those long enough to), built once per set of values: to
    ask :meth:`Secrets.holds` about values :data:`SECRETS` may not hold (an environment given
    to a child). Shared: hide nothing more in it."""
    secrets = Secrets()
    for value in values:
        secrets.hide(value)
    return secrets


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
