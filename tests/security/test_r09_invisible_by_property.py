"""SPEC 10.9: nothing raw reaches a person, judged by what a character is, not by a list.

The attack review found invisible characters that ``neutralise`` let through because they were
on no list: the combining grapheme joiner, the Hangul fillers, Khmer inherent vowels,
Mongolian and other variation selectors, the braille blank, the shorthand, musical and
Egyptian format controls. Text holding them reads as something it is not (a Trojan-Source
diff, a file name with a hidden part, a message smuggled in selectors). Each test is one such
attack on the one helper every byte for a person goes through, and on the question that
shows a diff; the paths to it on the real process are ``test_r09_nothing_raw.py``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_stdio.render import neutralise
from tests.security._support_fixshow import question_screen

HIDDEN = {
    "\u034f": "combining grapheme joiner",
    "\u115f": "Hangul choseong filler",
    "\u1160": "Hangul jungseong filler",
    "\u3164": "Hangul filler",
    "\uffa0": "halfwidth Hangul filler",
    "\u17b4": "Khmer vowel inherent AQ",
    "\u17b5": "Khmer vowel inherent AA",
    "\u180b": "Mongolian free variation selector one",
    "\u180f": "Mongolian free variation selector four",
    "\ufe00": "variation selector 1",
    "\ufe0e": "variation selector 15",
    "\U000e0100": "variation selector 17",
    "\U000e01ef": "variation selector 256",
    "\u2800": "braille pattern blank",
    "\U0001bca0": "shorthand format letter overlap",
    "\U0001bca3": "shorthand format up step",
    "\U0001d173": "musical symbol begin beam",
    "\U0001d17a": "musical symbol end phrase",
    "\U00013430": "Egyptian hieroglyph vertical joiner",
    "\u0600": "Arabic number sign",
    "\u2065": "reserved default-ignorable",
    "\ue000": "private use",
    "\U000e0fff": "reserved tag-plane code point",
}


@pytest.mark.parametrize("char", HIDDEN, ids=lambda c: f"U+{ord(c):04X}")
def test_an_invisible_character_in_a_file_name_is_shown_by_its_code(char: str) -> None:
    name = f"report{char}.txt"
    assert neutralise(name) == f"report<U+{ord(char):04X}>.txt", HIDDEN[char]


def test_a_message_smuggled_in_variation_selectors_after_an_emoji_is_shown() -> None:
    # Each byte of "rm" as a selector after one visible character: the text reads as the emoji.
    smuggled = "\U0001f600" + "".join(chr(0xE0100 + byte - 16) for byte in b"rm")
    assert neutralise(smuggled) == "\U0001f600<U+E0162><U+E015D>"
    assert neutralise("\u26a0\ufe0f\ufe0f") == "\u26a0<U+FE0F><U+FE0F>"


def test_one_emoji_presentation_selector_after_a_visible_character_stays() -> None:
    assert neutralise("\u26a0\ufe0f careful") == "\u26a0\ufe0f careful"
    assert neutralise(" \ufe0f") == " <U+FE0F>"  # after a blank it dresses nothing


def test_a_trojan_source_diff_shows_what_the_invisible_characters_hide(tmp_path: Path) -> None:
    # "is_admin" with a combining grapheme joiner: a second variable that reads as the first.
    content = "is_admin = False\nis\u034f_admin = True  # unused\u3164\u3164\u2800\n"
    asked = question_screen(tmp_path, "write", file_path="auth.py", content=content)
    assert asked.shows("+is<U+034F>_admin = True  # unused<U+3164><U+3164><U+2800>"), asked
    assert not any(char in asked.layout.details for char in HIDDEN)
