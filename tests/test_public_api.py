"""The public surface: complete, sorted re-exports, and the one-way dependency direction."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import dsh_core

ROOT = Path(__file__).parent.parent


def test_all_is_sorted_and_every_name_exists() -> None:
    names = [name for name in dsh_core.__all__ if name != "__version__"]
    assert names == sorted(names, key=lambda n: (n[0].islower(), n))
    for name in dsh_core.__all__:
        assert hasattr(dsh_core, name), name


def test_version_matches_the_distribution() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert dsh_core.__version__ == project["version"]


def _modules_after(code: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(result.stdout.split())


def test_dsh_core_never_imports_the_front_door_or_prompt_toolkit() -> None:
    modules = _modules_after(
        "import dsh_core, dsh_core.model.deepseek, dsh_core.agent.loop, dsh_core.session,"
        " dsh_core.testing"
    )
    assert not {m for m in modules if m.startswith(("prompt_toolkit", "dsh_stdio"))}


def test_pipe_and_one_shot_modes_do_not_import_prompt_toolkit() -> None:
    modules = _modules_after("import dsh_stdio.__main__, dsh_stdio.run.runtime, dsh_stdio.pipe")
    assert not {m for m in modules if m.startswith("prompt_toolkit")}
