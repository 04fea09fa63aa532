"""Fixtures the dsh_core tests share: a session store with an injected clock and ids, an open
log in it, and a scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.session import SessionLog, SessionStore
from dsh_core.testing import ScriptedModel
from tests.dsh_core.session.test_session import CWD, numbered, ticking


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "home", clock=ticking(), new_id=numbered())


@pytest.fixture
def log(store: SessionStore) -> Iterator[SessionLog]:
    with store.create(CWD) as log:
        yield log


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()
