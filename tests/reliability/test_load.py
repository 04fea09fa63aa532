"""The load run of ``bench/load.py``, short: one pipe session of 100 turns against the stub.

The bench runs 1,000 turns and reports; this asserts what must hold at any length: one
connection for the whole session, no descriptor leaked, and memory that grows with the
conversation and no faster. Time per turn is the bench's to report, not a test's to assert.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.reliability.conftest import REPO

pytestmark = pytest.mark.slow


def test_hundred_turns_one_connection_flat_resources() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--turns", "100", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    figures = json.loads(result.stdout.splitlines()[-1])
    print(figures)
    assert result.returncode == 0, figures
    assert figures["turns"] == 100 and figures["failures"] == []
    assert figures["connections_opened"] == 1  # keep-alive across every turn
    assert figures["fds_at_end"] == figures["fds_at_10"]
    growth_kb = figures["rss_kb_at_end"] - figures["rss_kb_at_10"]
    # The conversation is ~70 KB on disk; allow interpreter noise, not a leak per turn.
    assert growth_kb < 4096, figures
    # Time per turn is reported by bench/load.py; a test never asserts wall-clock time.
