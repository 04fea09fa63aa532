"""Shared fixtures: a clean environment for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

# CI runs the same examples every time (HYPOTHESIS_PROFILE=ci in .ci/run): a new counterexample
# is found by a developer's run, which explores (the default), not by chance in a landing.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Its asserts (assert_no_canary) show their values as a conftest's do; before the import.
pytest.register_assert_rewrite("tests.support")

from dsh_core.masking import SECRETS  # noqa: E402
from tests.support import CANARY_KEY  # noqa: E402

# CANARY_KEY lives in tests.support (the benches use it too); tests import it from here.
__all__ = ["CANARY_KEY", "clean_environ", "no_secrets_from_earlier_tests"]

_OUR_VARIABLES = (
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "DSH_MODEL",
    "DSH_HOME",
    "DSH_MAX_TOKENS",
    "DSH_TIMEOUT",
    "DSH_CONTEXT_WINDOW",
    "DSH_THINKING",
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


@pytest.fixture(autouse=True)
def no_secrets_from_earlier_tests() -> None:
    """A key hidden by an earlier test (an adapter made with the canary) masks nothing here."""
    SECRETS.clear()
