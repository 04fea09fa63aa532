"""redact_url and without_user_info: a password in a base URL is never shown, never sent."""

from __future__ import annotations

import pytest

from dsh_core.model.urls import UNPARSABLE_URL, is_local, redact_url, without_user_info


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


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://localhost:8000/v1", True),
        ("http://vllm.localhost", True),
        ("http://[::1]:8000", True),
        ("http://10.1.2.3", True),
        ("http://192.168.0.7:8000/v1", True),
        ("http://172.16.0.1", True),
        ("http://[fd00::1]", True),
        ("http://169.254.1.1", True),
        ("https://api.deepseek.com", False),
        ("http://8.8.8.8", False),
        ("http://localhost.example.com", False),  # a name is not looked up
        ("http://10.0.0.1.nip.io", False),
        ("http://[::1", False),  # unparsable
        ("not a url", False),
    ],
)
def test_is_local(url: str, local: bool) -> None:
    assert is_local(url) is local
