"""The crash runs of ``bench/crash_runs.py``, short: 20 SIGKILLs and 4 mid-turn signals.

The bench script is the real thing (``--kills 200 --signals 20`` and an early-signal probe);
this runs it small enough for CI and asserts its verdict and figures. Every figure asserted is
fixed by construction, not by how many turns fit into a moment on this machine: the bench deals
the kill phases and the signal cases out evenly, and each phase kills after an event it saw.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.reliability.conftest import REPO

pytestmark = pytest.mark.slow

KILLS = 20
SIGNALS = 4


def test_kills_and_signals_lose_nothing() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "crash_runs.py"),
            "--kills",
            str(KILLS),
            "--signals",
            str(SIGNALS),
            "--early",
            "0",
            "--max-delay",
            "0.4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        cwd=REPO,
    )
    assert result.stdout, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])
    print(summary)
    assert result.returncode == 0, summary
    assert "Traceback" not in result.stderr
    assert (summary["lost"], summary["changed"]) == (0, 0)
    assert summary["problems"] == [] and summary["startup_failures"] == []

    # Every phase got its share of the kills, whatever the machine's speed.
    phases = summary["kills_per_phase"]
    assert summary["kills"] == KILLS
    assert phases == dict.fromkeys(("startup", "turn_start", "mid_answer", "between_turns"), 5)
    # Each kill at a turn's start or between turns came after at least one answer seen whole.
    assert summary["completed_observed"] >= phases["turn_start"] + phases["between_turns"]
    # Each mid-answer kill left its own turn open (the bench checked the log after each), and
    # every open turn was closed as interrupted by the end.
    assert summary["turns_left_open"] >= phases["mid_answer"]
    assert summary["turns"] >= summary["completed_observed"] + phases["mid_answer"]

    signals = summary["signals"]
    assert signals["failures"] == []
    assert signals["ok"] == signals["runs"] == SIGNALS
    assert signals["while_text_streamed"] == signals["before_any_text"] == SIGNALS // 2
