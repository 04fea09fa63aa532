"""Skills (SPEC 13): folders with a ``SKILL.md``, listed to the model and loaded on demand.

    catalog = discover_skills(Path.cwd(), home=Path.home())
    for warning in catalog.warnings:       # a SKILL.md that cannot be used, named
        print(f"dsh: {warning}")
    prompt += skills_section(catalog.skills)
    toolbox = Toolbox([..., SkillTool(catalog, workspace)])

A skill is a folder holding ``SKILL.md``, whose YAML front matter gives its ``name`` and
``description``; the rest of the file is its body. Folders are looked for in
``<repository root>/.agents/skills``, ``<repository root>/.dsh/skills``, ``~/.agents/skills``
and ``~/.dsh/skills``, in that order; the first skill of a name wins. The system prompt lists
each name with its description (500 characters at most), at most :data:`MAX_LISTED` skills and
:data:`MAX_LISTING_BYTES` of them, the rest named by count: 10,000 skills in a repository must
not make every request too long (SPEC 13). ``skill {name}`` returns the body and the files of the
folder, which ``read`` then opens without a question (:class:`Workspace` remembers the folders
loaded). A skill only reads: it needs no approval, and runs beside other reads. A project's
skill folder that leads outside the repository is left out: a link to ``~`` must not make a
home directory readable without a question. One whose folder is, or holds, the repository root,
or leads out of the skills folder it was found in (``.agents/skills/x -> ../..``), is offered,
but grants no reads without a question (:attr:`Skill.grants`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent.context import repository_root
from ..chain import error_chain
from ..fileio import read_up_to
from ..model.seam import ToolSpec
from ..tools.base import Access, Invocation, ToolError, ToolOutput

if TYPE_CHECKING:
    from ..trust.workspace import Workspace

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_LISTED",
    "MAX_LISTING_BYTES",
    "SKILL",
    "SKILL_FILE",
    "Skill",
    "SkillCatalog",
    "SkillTool",
    "discover_skills",
    "skill_places",
    "skills_section",
]

SKILL_FILE = "SKILL.md"
MAX_DESCRIPTION = 500
"""Characters of a skill's description the system prompt holds."""
MAX_SKILL_BYTES = 256 * 1024
"""A ``SKILL.md`` larger than this is left out (it would not fit a tool result anyway)."""
MAX_FILES = 200
"""Files of a skill's folder the ``skill`` tool lists; the rest are counted."""
MAX_LISTED = 100
"""Skills loaded and listed in the system prompt at most; the folders past them are counted."""
MAX_LISTING_BYTES = 8 * 1024
"""Bytes of the system prompt's list of skills at most; the skills past them are counted."""
MAX_READ = 2 * MAX_LISTED
"""``SKILL.md`` files read at most (10,000 broken or same-named ones cost no more)."""
MAX_WARNINGS = 10
"""Warnings about broken ``SKILL.md`` files, at most; the rest are counted in one more."""
MAX_COUNTED = 100_000
"""Folders looked at, at most, to count the skills not listed (a count, not a walk of all)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

SKILL = ToolSpec(
    "skill",
    "Load a skill listed in the system prompt: returns its instructions (the body of its "
    "SKILL.md) and the files of its folder, which you may then open with `read` using the "
    "paths given. Load a skill when a task matches its description, before doing the task.",
    {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name."}},
        "required": ["name"],
        "additionalProperties": False,
    },
)


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    folder: str
    """The folder, resolved (symlinks followed)."""
    file: Path
    """Its ``SKILL.md``, as found."""
    grants: bool = True
    """Whether loading it lets ``read`` open its folder's files without a question: not for a
    folder that is, or holds, the repository root, or that leads out of its skills folder."""


@dataclass(frozen=True, slots=True)
class SkillCatalog:
    skills: tuple[Skill, ...] = ()
    warnings: tuple[str, ...] = ()
    """One line per ``SKILL.md`` left out, naming it and why (the first few, then a count)."""
    unlisted: int = 0
    """Folders holding a ``SKILL.md`` past :data:`MAX_LISTED`: neither loaded nor listed."""

    def find(self, name: str) -> Skill | None:
        return next((skill for skill in self.skills if skill.name == name), None)


def skill_places(cwd: Path, home: Path) -> list[tuple[Path, Path | None]]:
    """Where skills are looked for, first first: each folder, and the directory its skills must
    stay in (the repository's folders: the repository; the user's own: anywhere)."""
    root = repository_root(Path(os.path.abspath(cwd))) or Path(os.path.abspath(cwd))
    return [
        (root / ".agents" / "skills", root),
        (root / ".dsh" / "skills", root),
        (home / ".agents" / "skills", None),
        (home / ".dsh" / "skills", None),
    ]


def discover_skills(cwd: Path, *, home: Path | None = None) -> SkillCatalog:
    """Every usable skill, first of a name winning, up to :data:`MAX_LISTED` (the folders past
    them counted); a warning for each ``SKILL.md`` left out."""
    skills: dict[str, Skill] = {}
    warnings: list[str] = []
    left_out = unlisted = looked = read = 0
    top = repository_root(Path(os.path.abspath(cwd))) or Path(os.path.abspath(cwd))
    for place, within in skill_places(cwd, home if home is not None else Path.home()):
        try:
            entries = sorted(os.scandir(place), key=lambda entry: entry.name)
        except OSError:
            continue  # no such folder: no skills there
        for entry in entries:
            looked += 1
            if looked > MAX_COUNTED:
                break
            file = Path(entry.path) / SKILL_FILE
            if not os.path.lexists(file):
                continue
            if len(skills) >= MAX_LISTED or read >= MAX_READ:
                unlisted += 1
                continue
            read += 1
            found = _load(file, within, place, top)
            if isinstance(found, str):
                if len(warnings) < MAX_WARNINGS:
                    warnings.append(f"skill {file} left out: {found}")
                else:
                    left_out += 1
            elif found.name not in skills:
                skills[found.name] = found
    if left_out:
        warnings.append(f"and {left_out:,} more skills left out, for reasons like these")
    return SkillCatalog(tuple(skills.values()), tuple(warnings), unlisted)


def skills_section(skills: SkillCatalog | Sequence[Skill]) -> str:
    """The system prompt's list of skills (empty when there are none): at most
    :data:`MAX_LISTING_BYTES` of them, the rest counted."""
    catalog = skills if isinstance(skills, SkillCatalog) else SkillCatalog(tuple(skills))
    if not catalog.skills:
        return ""
    lines = [
        "# Skills",
        "",
        "Load a skill with the `skill` tool when the task matches its description.",
        "",
    ]
    size = 0
    listed = 0
    for skill in catalog.skills:
        line = f"- {skill.name}: {skill.description}"
        size += len(line.encode("utf-8")) + 1
        if size > MAX_LISTING_BYTES:
            break
        lines.append(line)
        listed += 1
    more = len(catalog.skills) - listed + catalog.unlisted
    if more:
        lines.append(
            f"[and {more:,} more skills, not listed: the list holds at most {MAX_LISTED} skills "
            f"and {MAX_LISTING_BYTES // 1024} KiB]"
        )
    return "\n".join(lines) + "\n"


def _load(file: Path, within: Path | None, place: Path, top: Path) -> Skill | str:
    """The skill ``file`` describes, or why it cannot be used. ``within``: where a project's
    skill must stay; ``place``: the skills folder it was found in; ``top``: the repository."""
    folder = os.path.realpath(file.parent)
    if within is not None:
        root = os.path.realpath(within)
        if os.path.commonpath([folder, root]) != root:
            return f"its folder leads outside {within} (to {folder})"
    try:
        text = _read(file, folder)
    except (OSError, ValueError) as exc:
        return error_chain(exc)
    fields = _front_matter(text)
    if isinstance(fields, str):
        return fields
    name, description = fields.get("name", ""), " ".join(fields.get("description", "").split())
    if not _NAME.fullmatch(name):
        return f"its name {name!r} is not 1-64 letters, digits, '.', '_' or '-'"
    if not description:
        return "it has no description in its front matter"
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1] + "…"
    return Skill(name, description, folder, file, _grants(folder, place, top))


def _grants(folder: str, place: Path, top: Path) -> bool:
    """Whether ``folder`` may be read without a question once loaded: strictly inside the
    skills folder it was found in, and not holding the repository's top (SPEC 13)."""
    home = os.path.realpath(place)
    inside = folder != home and os.path.commonpath([folder, home]) == home
    holds_top = os.path.commonpath([os.path.realpath(top), folder]) == folder
    return inside and not holds_top


def _read(file: Path, folder: str) -> str:
    """The text of a ``SKILL.md`` that is a regular file inside its folder."""
    real = os.path.realpath(file)
    if os.path.commonpath([real, folder]) != folder:
        raise ValueError(f"it is a link leading out of its folder (to {real})")
    fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("it is not a regular file")
        if status.st_size > MAX_SKILL_BYTES:
            raise ValueError(f"it is over {MAX_SKILL_BYTES // 1024} KiB")
        data = read_up_to(fd, MAX_SKILL_BYTES)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None


def _front_matter(text: str) -> dict[str, Any] | str:
    """The YAML front matter's top-level mapping, or what is wrong with it.

    Parsed by PyYAML's safe loader (libyaml's where built, which also caps nesting at 1,000
    levels): comments, quoting, block scalars and escapes as YAML means them (SPEC 13), and no
    tags that construct objects. The file is capped at ``MAX_SKILL_BYTES`` before this runs.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return "it does not begin with a front matter (a line ---)"
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return "its front matter has no closing line ---"
    import yaml  # 19 ms: only once a skill is found

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        fields = yaml.load("\n".join(lines[1:end]), Loader=loader)  # a safe loader
    except yaml.MarkedYAMLError as exc:
        where = exc.problem_mark or exc.context_mark
        problem = " ".join(f"{exc.problem or exc.context or 'unreadable'}".split())[:200]
        if where is not None:  # the file's line: the front matter begins on its second
            problem += f" at line {where.line + 2}, column {where.column + 1}"
        if "mapping values are not allowed" in problem:
            problem += "; a value that holds ': ' needs quotes"
        return f"its front matter is not valid YAML ({problem})"
    except (yaml.YAMLError, RecursionError) as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        return f"its front matter is not valid YAML ({problem[:200]})"
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        return f"its front matter is a YAML {type(fields).__name__}, not a mapping of keys"
    for key in ("name", "description"):
        if key in fields and not isinstance(fields[key], str):
            return f"its {key} is a YAML {type(fields[key]).__name__}, not text (quote it)"
    return fields


class SkillTool:
    """``skill {name}``: a skill's body and the files of its folder."""

    spec = SKILL

    def __init__(self, catalog: SkillCatalog, workspace: Workspace) -> None:
        self.catalog = catalog
        self.workspace = workspace

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("name", ""))

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        from ..tools.paths import check_arguments, string_argument  # at the first call

        check_arguments("skill", arguments, ("name",))
        name = string_argument(arguments, "name")
        assert name is not None
        skill = self.catalog.find(name)
        if skill is None:
            known = ", ".join(s.name for s in self.catalog.skills) or "none"
            raise ToolError(f"no skill {name!r}; the skills are: {known}")

        async def run() -> ToolOutput:
            return ToolOutput(self._load(skill))

        return Invocation(Access("read"), skill.name, run)

    def _load(self, skill: Skill) -> str:
        try:
            text = _read(skill.file, skill.folder)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read {skill.file}") from exc
        lines = text.lstrip("\ufeff").splitlines(keepends=True)
        closing = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), 0)
        body = "".join(lines[closing + 1 :]).strip("\n")
        from ..tools.paths import list_name

        files, more = _files(skill.folder)
        listing = "\n".join(list_name(name) for name in files)
        if more:
            listing += f"\n[and {more:,} more files]"
        if not skill.grants:  # the repository root, or a folder elsewhere: asked as any path
            return (
                f"{body}\n\n[skill {skill.name}: its folder is {skill.folder}, which is or holds "
                "the repository's top, or leads out of its skills folder: its files are read "
                "as any others are (paths relative to it):]\n" + listing
            )
        self.workspace.skill_folders.add(skill.folder)
        return (
            f"{body}\n\n[skill {skill.name}: its folder is {skill.folder}; read may open these "
            f"files there (paths relative to it):]\n{listing}"
        )


def _files(folder: str) -> tuple[list[str], int]:
    """The files under ``folder``, relative, sorted, at most :data:`MAX_FILES` (and how many
    more, counted up to :data:`MAX_COUNTED`); hidden folders and links to folders are not
    entered."""
    found: list[str] = []
    more = 0
    for directory, folders, names in os.walk(folder):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in sorted(names):
            if len(found) < MAX_FILES:
                found.append(os.path.relpath(os.path.join(directory, name), folder))
            else:
                more += 1
        if more >= MAX_COUNTED:  # a folder that is a whole tree: counted no further
            break
    return found, more
