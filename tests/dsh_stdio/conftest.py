"""Fixtures for running the real ``dsh`` process against the stub server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from tests.support import child_env


@pytest.fixture(scope="session")
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    return path


@pytest.fixture
def dsh_env(stub: StubServer, home: Path) -> dict[str, str]:
    """The environment for a child dsh: the canary key, the stub, a private home."""
    return child_env(stub.url, home, PROMPT_TOOLKIT_NO_CPR="1")
