"""The core's layers, as its folders show them: no subpackage imports one above it.

From the bottom: the leaves at the top of ``dsh_core`` (errors, ``error_chain``, masking, the
clock, file helpers), then ``model``, ``session``, ``trust``, ``tools``, ``checkpoints``, ``agent``,
``extensions``, and ``testing`` (the fakes, which may use everything). A module may import its
own layer and any below it; ``dsh_core/__init__.py`` (the public surface) may import all. Every
import counts: at module level, inside a function, or under ``TYPE_CHECKING``, since each is a
dependency somebody must understand. The rule and its reasons: docs/notes/2026-12-02-layers.md.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "dsh_core"

LAYERS = (
    "",
    "model",
    "session",
    "trust",
    "tools",
    "checkpoints",
    "agent",
    "extensions",
    "testing",
)
"""Bottom first; "" is the leaves at the top of dsh_core."""

MAX_TOP_MODULES = 8
MAX_MODULES_PER_FOLDER = 16
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imports(path: Path, name: str | None = None) -> frozenset[str]:
    """The dsh_core modules ``path`` (module ``name``, by default its own) imports, by
    absolute dotted name."""
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.update(f"{target}.{alias.name}" for alias in node.names)
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return frozenset(target for target in found if target.split(".")[0] == "dsh_core")


def _layer(module: str) -> str:
    """The layer of a dotted dsh_core name: its subpackage, or "" for a top-level leaf."""
    parts = module.split(".")
    if len(parts) == 1:
        return "dsh_core"  # the package itself: the public surface
    return parts[1] if (CORE / parts[1]).is_dir() else ""


def _core_modules() -> list[Path]:
    return sorted(path for path in CORE.rglob("*.py") if "__pycache__" not in path.parts)


def test_every_subpackage_is_a_known_layer() -> None:
    folders = {path.name for path in CORE.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders == set(LAYERS) - {""}


@pytest.mark.parametrize("path", _core_modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_imports_a_layer_above_its_own(path: Path) -> None:
    own = _layer(_module_name(path))
    if own == "dsh_core":
        return
    upward = sorted(
        target
        for target in _imports(path)
        if _layer(target) not in ("dsh_core", own)
        and LAYERS.index(_layer(target)) > LAYERS.index(own)
    )
    assert not upward, f"{own or 'a leaf'} imports a layer above it: {upward}"
    assert "dsh_core" not in {_layer(target) for target in _imports(path)}, (
        "a module imports the package's public surface; import the module that defines it"
    )


def test_the_subpackage_graph_has_no_cycle() -> None:
    edges: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for path in _core_modules():
        own = _layer(_module_name(path))
        if own == "dsh_core":
            continue
        edges[own].update(
            _layer(target) for target in _imports(path) if _layer(target) not in ("dsh_core", own)
        )
    done: set[str] = set()

    def visit(layer: str, trail: tuple[str, ...]) -> None:
        assert layer not in trail, f"import cycle: {' -> '.join((*trail, layer))}"
        if layer in done:
            return
        for target in sorted(edges[layer]):
            visit(target, (*trail, layer))
        done.add(layer)

    for layer in LAYERS:
        visit(layer, ())


def test_the_folders_stay_small_enough_to_read() -> None:
    top = list(CORE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, sorted(path.name for path in top)
    for package in (CORE, ROOT / "dsh_stdio"):
        for folder in [package, *(path for path in package.rglob("*") if path.is_dir())]:
            modules = list(folder.glob("*.py"))
            assert len(modules) <= MAX_MODULES_PER_FOLDER, (
                f"{folder.relative_to(ROOT)} holds {len(modules)} modules: give them a subfolder"
            )


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for package in (CORE, ROOT / "dsh_stdio")
        for path in package.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The walk sees a relative import inside a function: the kind a quick fix adds."""
    source = (
        CORE / "model" / "seam.py"
    ).read_text() + "\n\ndef _probe() -> None:\n    from ..agent import loop\n"
    probe = tmp_path / "seam.py"
    probe.write_text(source)
    names = _imports(probe, "dsh_core.model.seam")
    assert "dsh_core.agent.loop" in names
    assert any(LAYERS.index(_layer(name)) > LAYERS.index("model") for name in names)
