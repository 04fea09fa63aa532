"""SPEC 16: the everyday tools are offered under the reference harness's names and schemas.

The fixture ``tests/fixtures/reference-tool-schemas.json`` is a verbatim copy of the JSON schemas
in the reference's ``docs/tool-catalog.md`` (deepseek-ai/deepseek-harness, the commit it names),
for the tools dsh takes from it. Names, the argument names, the required ones, and every nested
array's item shape (``todos``, ``questions``, ``options``) must agree; descriptions are dsh's.

``bash`` is the one known difference: dsh's ``bash`` (SPEC 7) is its own (``timeout_s`` in
seconds, no required ``description``, no ``workdir``), and takes only ``run_in_background``
from the reference, with the reference's meaning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core.tools import specs

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "reference-tool-schemas.json"
REFERENCE: dict[str, Any] = json.loads(FIXTURE.read_text())
OURS = {
    spec.name: spec
    for spec in (
        specs.TODO_WRITE,
        specs.ASK_USER_QUESTION,
        specs.WEB_FETCH,
        specs.WEB_SEARCH,
        specs.JOB_OUTPUT,
        specs.JOB_LIST,
        specs.JOB_KILL,
    )
}


def test_the_fixture_names_its_source() -> None:
    assert REFERENCE["repository"] == "deepseek-ai/deepseek-harness"
    assert REFERENCE["path"] == "docs/tool-catalog.md"
    assert len(REFERENCE["commit"]) == 40


def _shape(schema: dict[str, Any]) -> Any:
    """What must agree: the type, the property names (each shaped), what is required, enums."""
    shaped: dict[str, Any] = {"type": schema.get("type")}
    if "properties" in schema:
        shaped["properties"] = {
            name: _shape(inner) for name, inner in sorted(schema["properties"].items())
        }
        shaped["required"] = sorted(schema.get("required", []))
    if "items" in schema:
        shaped["items"] = _shape(schema["items"])
    if "enum" in schema:
        shaped["enum"] = sorted(schema["enum"])
    return shaped


@pytest.mark.parametrize("name", sorted(OURS))
def test_each_tool_has_the_reference_name_and_schema(name: str) -> None:
    assert name in REFERENCE["tools"]
    assert _shape(dict(OURS[name].parameters)) == _shape(REFERENCE["tools"][name])
    assert OURS[name].description  # ours, not the reference's
    assert OURS[name].description != REFERENCE["tools"][name].get("description")


def test_bash_takes_run_in_background_as_the_reference_does() -> None:
    theirs = REFERENCE["tools"]["bash"]["properties"]["run_in_background"]
    ours = specs.BASH.parameters["properties"]["run_in_background"]
    assert ours["type"] == theirs["type"] == "boolean"
    assert specs.BASH.parameters["required"] == ["command"]  # SPEC 7's bash, not theirs
