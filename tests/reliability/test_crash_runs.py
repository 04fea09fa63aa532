"""The crash runs of ``bench/crash_runs.py``, short: 20 SIGKILLs and 4 mid-turn signals.

The bench script is the real thing (``--kills 200 --signals 20`` and an early-signal probe);
this runs it small enough for CI and asserts its verdict and figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.reliability.conftest import REPO

pytestmark = pytest.mark.slow


def test_kills_and_signals_lose_nothing() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "crash_runs.py"),
            "--kills",
            "20",
            "--signals",
            "4",
            "--early",
            "0",
            "--max-delay",
            "0.4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    summary = json.loads(result.stdout.splitlines()[-1])
    print(summary)
    assert result.returncode == 0, summary
    assert summary["kills"] == 20
    assert summary["turns"] >= 20
    assert summary["completed_observed"] > 0
    assert (summary["lost"], summary["changed"]) == (0, 0)
    assert summary["problems"] == [] and summary["startup_failures"] == []
    assert summary["signals"]["ok"] == summary["signals"]["runs"] == 4
    assert "Traceback" not in result.stderr
