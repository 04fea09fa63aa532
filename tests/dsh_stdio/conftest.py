"""Fixtures for running the real ``dsh`` process against the stub server."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.stub_server import StubServer
from tests.conftest import CANARY_KEY

DSH = [sys.executable, "-m", "dsh_stdio"]
"""The real front door, as ``dsh`` runs it."""


@pytest.fixture(scope="session")
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    return path


@pytest.fixture
def dsh_env(stub: StubServer, home: Path, tmp_path: Path) -> dict[str, str]:
    """The environment for a child dsh: the canary key, the stub, a private home."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DSH_", "DEEPSEEK_")) and "PROXY" not in key.upper()
    }
    env.update(
        DEEPSEEK_API_KEY=CANARY_KEY,
        DEEPSEEK_BASE_URL=stub.url,
        DSH_HOME=str(home),
        TERM="dumb",
        PROMPT_TOOLKIT_NO_CPR="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assert_no_canary(home: Path, *texts: str) -> None:
    """The API key is in no output and no file under the home directory."""
    for text in texts:
        assert CANARY_KEY not in text
    if home.exists():
        for path in home.rglob("*"):
            if path.is_file():
                assert CANARY_KEY.encode() not in path.read_bytes(), path
