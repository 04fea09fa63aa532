"""SPEC 10.8: a command's saved whole output stops at 64 MiB, and its result says so.

The attack is a ``bash`` call a prompt-injected model asks for under ``--allow shell``, the
issue's own: ``yes | head -c 300000000``. On dsh 0.2.0 it left a 286 MiB file beside the
session log (at the 600 s limit, ``yes`` alone would leave about 175 GB).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security._support_sandbox import Scene, scene_fixture  # noqa: F401 (by name)

pytestmark = pytest.mark.slow

SIZE = 300_000_000
SAVED = 64 * 1024 * 1024


def test_endless_output_fills_at_most_64_mib_of_disk(scene: Scene) -> None:
    # Sandboxed or not (the limit is dsh's, not bwrap's): wherever the machine puts it.
    (result,), _ = scene.attack(f"yes | head -c {SIZE}")
    saved = Path(result["output_file"])
    assert os.path.getsize(saved) == SAVED
    assert result["truncated"] is True
    assert (
        f"\n[... {SIZE - 30_000:,} of {SIZE:,} characters cut here; the first 64 MiB of the "
        f"output are in {saved}; the rest was not saved]\n"
    ) in result["content"]
    with open(saved, "rb") as file:
        assert file.read(4096) == b"y\n" * 2048
        file.seek(SAVED - 2)
        assert file.read() == b"y\n"  # it stops on a whole line here: a character's boundary
