"""redact_url and without_user_info: a password in a base URL is never shown, never sent."""

from __future__ import annotations

import pytest

from dsh_core.urls import UNPARSABLE_URL, redact_url, without_user_info


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.deepseek.com", "https://api.deepseek.com"),
        ("https://u:p@h:1/v1", "https://***@h:1/v1"),
        ("https://token@h", "https://***@h"),
        ("http://a@b:c@127.0.0.1:8080", "http://***@127.0.0.1:8080"),  # the last @ ends it
        ("api.deepseek.com", "api.deepseek.com"),
        ("http://user:pw@[::1", UNPARSABLE_URL),  # the text holds a password: not shown
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("https://api.deepseek.com/v1", "https://api.deepseek.com/v1"),
        ("https://u:p@h:1/v1?x=1", "https://h:1/v1?x=1"),
        ("http://a@b:c@127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://user:pw@[::1", "http://user:pw@[::1"),  # left for httpx to refuse, and say why
    ],
)
def test_without_user_info(url: str, sent: str) -> None:
    assert without_user_info(url) == sent
