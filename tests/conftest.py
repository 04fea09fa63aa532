"""Shared fixtures: a clean environment for every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

CANARY_KEY = "sk-dsh-canary-0123456789abcdef"
"""A fake API key; tests assert it never appears in any output, file or log."""

_OUR_VARIABLES = (
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "DSH_MODEL",
    "DSH_HOME",
    "DSH_MAX_TOKENS",
    "DSH_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's key, proxy or dsh settings."""
    for name in _OUR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield
