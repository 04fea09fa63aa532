"""The system prompt (SPEC section 9): who dsh is and where it runs, then the AGENTS.md files.

    context = system_prompt(Path.cwd(), tools=toolbox.names, first_part=config.system)
    for warning in context.warnings:
        print(f"dsh: {warning}", file=sys.stderr)
    conversation = Conversation(..., system_prompt=context.text)

The first part says what dsh is, the working directory, the date, the platform and the tools;
``-s TEXT`` replaces it. Then come the ``AGENTS.md`` files from the repository root (the
nearest ancestor with a ``.git``; with none, the working directory alone) down to the working
directory, each headed by its path, :data:`AGENTS_LIMIT` bytes at most in all. A file that is
too large is cut (only what fits is read) and a file that cannot be used (binary, a symlink
loop, unreadable, not a regular file) is left out; both say so in the prompt, for the model,
and in ``warnings``, for the person. Nothing here raises for a bad file.

Pure apart from reading those files: ``now`` and ``platform`` are parameters.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..chain import error_chain
from ..fileio import read_up_to
from ..trust import AGENTS_FILE

__all__ = [
    "AGENTS_FILE",
    "AGENTS_LIMIT",
    "SystemContext",
    "agents_files",
    "first_part",
    "repository_root",
    "system_prompt",
]

AGENTS_LIMIT = 32 * 1024
"""Bytes of AGENTS.md text the prompt holds at most, all files together."""


@dataclass(frozen=True, slots=True)
class SystemContext:
    """The system prompt and what the person should hear about building it."""

    text: str
    files: tuple[Path, ...]
    """The AGENTS.md files whose text is in the prompt (whole or cut), root first."""
    warnings: tuple[str, ...]
    """One line each: a file cut or left out, and why. The front door prints them."""


def system_prompt(
    cwd: Path,
    *,
    tools: Sequence[str],
    first_part: str | None = None,
    now: datetime | None = None,
    platform: str | None = None,
    limit: int = AGENTS_LIMIT,
) -> SystemContext:
    """The system prompt for a session in ``cwd`` whose model may call ``tools``.

    ``first_part`` (``-s``) replaces the description of dsh and its surroundings; the AGENTS.md
    files stay. ``now`` (default: the local time now) gives the date; ``platform`` (default:
    this machine's system, release and architecture) the platform line.
    """
    cwd = Path(os.path.abspath(cwd))
    head = (
        first_part
        if first_part is not None
        else _first_part(cwd, tools=tools, now=now, platform=platform)
    )
    base = repository_root(cwd) or cwd
    included, warnings, sections = _agents_sections(agents_files(cwd), limit, base)
    parts = [head.rstrip("\n")] if head.strip() else []
    if sections:
        parts.append(
            "# Instructions from AGENTS.md files\n\n"
            "From the repository root down to the working directory; where they differ, the "
            "deeper file is the more specific."
        )
        parts.extend(sections)
    return SystemContext("\n\n".join(parts) + "\n" if parts else "", included, warnings)


def first_part(
    cwd: Path, *, tools: Sequence[str], now: datetime | None = None, platform: str | None = None
) -> str:
    """What dsh is, the working directory, the date, the platform and the tools."""
    return _first_part(Path(os.path.abspath(cwd)), tools=tools, now=now, platform=platform)


def _first_part(
    cwd: Path, *, tools: Sequence[str], now: datetime | None, platform: str | None
) -> str:
    moment = now if now is not None else datetime.now().astimezone()
    if tools:
        tool_line = (
            f"Tools: {', '.join(tools)}. Paths are relative to the working directory. A call "
            "that needs approval may be refused; a refusal comes back as an error result, "
            "so do not repeat the call unchanged."
        )
    else:
        tool_line = "Tools: none in this session; answer from the conversation alone."
    return (
        "You are dsh, a command-line assistant. A person talks to you from a terminal, or a "
        "script sends you lines through a pipe; your answers are shown as plain text, so do "
        "not rely on Markdown being rendered.\n"
        "\n"
        f"Working directory: {cwd}\n"
        f"Date: {moment:%Y-%m-%d (%A)}\n"
        f"Platform: {platform if platform is not None else _this_platform()}\n"
        f"{tool_line}\n"
    )


def _this_platform() -> str:
    # os.uname, not the platform module: that one costs a millisecond of every start.
    system = os.uname()
    return f"{system.sysname} {system.release} ({system.machine})"


def repository_root(cwd: Path) -> Path | None:
    """The nearest of ``cwd`` and its ancestors that holds a ``.git`` (directory or file)."""
    for directory in (cwd, *cwd.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    return None


def agents_files(cwd: Path) -> list[Path]:
    """Where AGENTS.md files may be, from the repository root down to ``cwd``.

    Without a repository, only ``cwd`` itself: a home directory's file is not everyone's.
    """
    cwd = Path(os.path.abspath(cwd))
    root = repository_root(cwd)
    if root is None:
        directories = [cwd]
    else:
        below = cwd.relative_to(root).parts
        directories = [root.joinpath(*below[:depth]) for depth in range(len(below) + 1)]
    return [directory / AGENTS_FILE for directory in directories]


@dataclass(slots=True)
class _Opened:
    path: Path
    fd: int
    size: int


def _agents_sections(
    candidates: Sequence[Path], limit: int, base: Path
) -> tuple[tuple[Path, ...], tuple[str, ...], list[str]]:
    """(files included, warnings, one prompt section per file) for the candidates that exist.

    A file is used only if it really lies under ``base`` (the repository root, else the working
    directory): an AGENTS.md that is a symbolic link to ``~/.ssh/id_rsa`` must not send that
    file to the provider without anyone being asked.
    """
    found: list[tuple[Path, _Opened | str]] = []
    inside = os.path.realpath(base)
    try:
        for path in candidates:
            result = _open(path, inside)
            if result is not None:
                found.append((path, result))
        opened = [result for _, result in found if isinstance(result, _Opened)]
        sizes = _shares([item.size for item in opened], limit)
        shares = {item.path: share for item, share in zip(opened, sizes, strict=True)}
        included: list[Path] = []
        warnings: list[str] = []
        sections: list[str] = []
        for path, result in found:
            if isinstance(result, _Opened):
                text, problem = _read(result, shares[path])
            else:
                text, problem = None, result
            if text is None:
                warnings.append(f"left out {path}: {problem}")
                sections.append(f"## {path}\n\n[left out: {problem}]")
                continue
            assert isinstance(result, _Opened)
            included.append(path)
            section = f"## {path}\n\n{text.rstrip() or '(empty)'}"
            kept = len(text.encode("utf-8", "surrogatepass"))
            if kept < result.size:
                why = f"the AGENTS.md files are limited to {limit:,} bytes in all"
                warnings.append(f"cut {path} to {kept:,} of its {result.size:,} bytes: {why}")
                section += f"\n\n[cut: {kept:,} of its {result.size:,} bytes are above; {why}]"
            sections.append(section)
    finally:
        for _, result in found:
            if isinstance(result, _Opened):
                os.close(result.fd)
    return tuple(included), tuple(warnings), sections


def _open(path: Path, inside: str) -> _Opened | str | None:
    """The file opened, or why it cannot be used, or None when there is none."""
    real = os.path.realpath(path)
    if os.path.lexists(path) and os.path.commonpath([real, inside]) != inside:
        return f"a symbolic link leading outside {inside} (to {real})"
    try:
        # O_NONBLOCK: a FIFO named AGENTS.md must not hang the start of a session.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return "a symbolic link to nothing" if os.path.islink(path) else None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"a symbolic link loop ({error_chain(exc)})"
        return f"cannot read it ({error_chain(exc)})"
    try:
        status = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return f"cannot read it ({error_chain(exc)})"
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        return "not a regular file"
    return _Opened(path, fd, status.st_size)


def _shares(sizes: Sequence[int], limit: int) -> list[int]:
    """Bytes each file may bring: small files whole, the rest share what is left equally.

    So one huge file cannot crowd out the others (the working directory's own file is the most
    specific, the root's the most general: both stay).
    """
    shares = [0] * len(sizes)
    left, count = limit, len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        share = min(sizes[index], left // count)
        shares[index] = share
        left -= share
        count -= 1
    return shares


def _read(item: _Opened, share: int) -> tuple[str | None, str | None]:
    """(text, None), or (None, why it is left out). Reads ``share`` bytes and one more at most."""
    try:
        data = read_up_to(item.fd, share + 1)
    except OSError as exc:
        return None, f"cannot read it ({error_chain(exc)})"
    cut = len(data) > share
    data = data[:share]
    if b"\x00" in data:
        return None, "not a text file (it holds NUL bytes)"
    try:
        # An incremental decoder leaves a character split by the cut out instead of failing.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
    except UnicodeDecodeError:
        return None, "not a text file (it is not UTF-8)"
    return text, None
