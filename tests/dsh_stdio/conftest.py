"""Fixtures for running the real ``dsh`` process against the stub server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsh_core.testing import StubServer
from dsh_stdio.commands.demo import DEMO_FILE_TEXT
from tests.support import DSH, assert_no_canary, child_env

if TYPE_CHECKING:
    from tests.dsh_stdio.test_agent_terminal import Terminal


@pytest.fixture(scope="session")
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_script(stub: StubServer) -> Iterator[None]:
    """The shared stub starts each test with nothing scripted: a test that ended before its
    requests took what it queued must not answer the next test's (seen as a hang in CI)."""
    stub.forget_script()
    yield
    stub.forget_script()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    return path


@pytest.fixture
def dsh_env(stub: StubServer, home: Path) -> dict[str, str]:
    """The environment for a child dsh: the canary key, the stub, a private home."""
    return child_env(stub.url, home, PROMPT_TOOLKIT_NO_CPR="1")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory holding ``demo.txt``, which the stub's tool triggers read and edit."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "demo.txt").write_text(DEMO_FILE_TEXT)
    return path


@pytest.fixture
def term(dsh_env: dict[str, str], home: Path, workdir: Path) -> Iterator[Terminal]:
    """dsh on a pseudo-terminal in ``workdir``; the key must appear nowhere it showed or wrote."""
    from tests.dsh_stdio.test_agent_terminal import spawn_terminal

    terminal = spawn_terminal(DSH, dsh_env, workdir, home)
    try:
        yield terminal
    finally:
        if terminal.child.isalive():
            terminal.child.close(force=True)
    assert_no_canary(home, terminal.screen.getvalue())
