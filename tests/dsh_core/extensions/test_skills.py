"""Skills in-process: front matter, discovery order, the prompt's list, the ``skill`` tool."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_core.extensions.skills import (
    MAX_DESCRIPTION,
    SkillCatalog,
    SkillTool,
    _front_matter,
    discover_skills,
    skills_section,
)
from dsh_core.tools import ToolError, Workspace
from dsh_core.tools.read import ReadTool
from tests.dsh_core.agent.test_loop_tools import run


def skill(folder: Path, front: str, body: str = "Body.") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    return folder


@pytest.mark.parametrize(
    ("front", "fields"),
    [
        ("name: a\ndescription: plain words", {"name": "a", "description": "plain words"}),
        ('name: a\ndescription: "quoted: yes"', {"name": "a", "description": "quoted: yes"}),
        ("name: a\ndescription: 'it''s'", {"name": "a", "description": "it's"}),
        (
            "name: a\ndescription: >\n  folded\n  lines",
            {"name": "a", "description": "folded lines"},
        ),
        ("name: a\ndescription: |\n  kept\n  lines", {"name": "a", "description": "kept\nlines"}),
        ("name: a\ndescription: goes\n  on here", {"name": "a", "description": "goes on here"}),
        (
            "name: a\nmetadata:\n  x: 1\ndescription: d",
            {"name": "a", "metadata": {"x": 1}, "description": "d"},
        ),
        # What the hand-written subset got wrong (SPEC 13: YAML as YAML means it):
        ("name: a # a comment\ndescription: d", {"name": "a", "description": "d"}),
        ('name: a\ndescription: "tab\\there \\u00e9"', {"name": "a", "description": "tab\there é"}),
        ("name: a\ndescription: |-\n  one\n\n  two", {"name": "a", "description": "one\n\ntwo"}),
        ("", {}),
    ],
)
def test_front_matter(front: str, fields: dict[str, object]) -> None:
    assert _front_matter(f"---\n{front}\n---\nbody\n") == fields


def test_an_unquoted_colon_is_named_with_the_files_line_and_the_way_out() -> None:
    answer = _front_matter("---\nname: a\ndescription: Use it: often\n---\nbody\n")
    assert isinstance(answer, str)
    assert answer.startswith("its front matter is not valid YAML (mapping values are not allowed")
    assert answer.endswith(" at line 3, column 20; a value that holds ': ' needs quotes)")


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("name: [unclosed", "its front matter is not valid YAML"),
        ("name: a\n  bad: indent: here", "its front matter is not valid YAML"),
        ("- a\n- list", "its front matter is a YAML list, not a mapping of keys"),
        ("name: 2024\ndescription: d", "its name is a YAML int, not text (quote it)"),
        ("name: a\ndescription: [x]", "its description is a YAML list, not text (quote it)"),
        # A hostile skill: tags that would construct objects, nesting past any stack.
        ("name: !!python/object/apply:os.system [true]", "its front matter is not valid YAML"),
        ("name: a\ndescription: " + "[" * 5000 + "]" * 5000, "its front matter is not valid YAML"),
    ],
)
def test_front_matter_that_is_not_a_skills_names_what_is_wrong(front: str, problem: str) -> None:
    answer = _front_matter(f"---\n{front}\n---\nbody\n")
    assert isinstance(answer, str)
    assert answer.startswith(problem)


def test_discovery_order_first_of_a_name_wins_and_broken_files_are_named(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "deep" / "down"
    cwd.mkdir(parents=True)
    skill(repo / ".agents/skills/one", "name: one\ndescription: from the repository")
    skill(repo / ".dsh/skills/two", "name: two\ndescription: " + "y" * 900)
    skill(home / ".agents/skills/one", "name: one\ndescription: from home: loses")
    skill(home / ".dsh/skills/three", "name: three\ndescription: from ~/.dsh")
    skill(repo / ".agents/skills/nameless", "description: no name")
    skill(repo / ".agents/skills/shouty", "name: bad name!\ndescription: x")
    (repo / ".agents/skills/plain").mkdir()
    (repo / ".agents/skills/plain/SKILL.md").write_text("just text\n")
    outside = skill(tmp_path / "elsewhere", "name: sneaky\ndescription: leads out")
    os.symlink(outside, repo / ".agents/skills/sneaky")
    catalog = discover_skills(cwd, home=home)
    assert [(s.name, s.description[:20]) for s in catalog.skills] == [
        ("one", "from the repository"),
        ("two", "y" * 20),
        ("three", "from ~/.dsh"),
    ]
    assert len(catalog.skills[1].description) == MAX_DESCRIPTION
    warnings = "\n".join(catalog.warnings)
    assert f"skill {repo}/.agents/skills/nameless/SKILL.md left out: its name ''" in warnings
    assert "shouty/SKILL.md left out: its name 'bad name!'" in warnings
    assert "plain/SKILL.md left out: it does not begin with a front matter" in warnings
    assert "sneaky/SKILL.md left out: its folder leads outside" in warnings
    section = skills_section(catalog.skills)
    assert section.splitlines()[-3:] == [
        "- one: from the repository",
        f"- two: {'y' * (MAX_DESCRIPTION - 1)}…",
        "- three: from ~/.dsh",
    ]
    assert skills_section(()) == ""


def test_the_skill_tool_loads_a_skill_and_opens_its_folder_to_read(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    folder = skill(tmp_path / "home/.agents/skills/pdf", "name: pdf\ndescription: d", "Use it.")
    (folder / "forms.md").write_text("form help\n")
    (folder / "scripts").mkdir()
    (folder / "scripts/fill.py").write_text("print(1)\n")
    workspace = Workspace.at(work, tmp_path / "out")
    catalog = discover_skills(work, home=tmp_path / "home")
    tool = SkillTool(catalog, workspace)
    read = ReadTool(workspace)
    before = read.prepare({"file_path": str(folder / "forms.md")})
    assert not before.access.free  # outside the working directory: a question, before loading
    invocation = tool.prepare({"name": "pdf"})
    assert invocation.access.free and invocation.summary == "pdf"
    text = run(invocation.run()).content
    assert text.startswith("Use it.\n\n[skill pdf: its folder is ")
    assert text.endswith("\nSKILL.md\nforms.md\nscripts/fill.py")
    after = read.prepare({"file_path": str(folder / "forms.md")})
    assert after.access.free
    elsewhere = read.prepare({"file_path": str(tmp_path / "home/.agents/other.md")})
    assert not elsewhere.access.free
    with pytest.raises(ToolError, match="no skill 'nope'; the skills are: pdf"):
        tool.prepare({"name": "nope"})
    with pytest.raises(ToolError, match="no skill 'x'; the skills are: none"):
        SkillTool(SkillCatalog(), workspace).prepare({"name": "x"})
