"""The system prompt (SPEC section 9): the first part, AGENTS.md files root to cwd, bad files."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest

from dsh_core.agent.context import AGENTS_LIMIT, agents_files, repository_root, system_prompt

NOW = datetime(2026, 12, 1, 9, 30)
PLATFORM = "Linux 6.8.0 (x86_64)"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """``repo/`` with a ``.git``, and ``repo/src/app/`` below it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "app").mkdir(parents=True)
    return root


def prompt(cwd: Path, first_part: str | None = None) -> tuple[str, tuple[str, ...]]:
    context = system_prompt(
        cwd, tools=["read", "bash"], first_part=first_part, now=NOW, platform=PLATFORM
    )
    return context.text, context.warnings


def test_the_first_part_says_what_where_when_and_which_tools(tmp_path: Path) -> None:
    text, warnings = prompt(tmp_path)
    assert warnings == ()
    assert text.startswith("You are dsh, a command-line assistant.")
    assert f"\nWorking directory: {tmp_path}\n" in text
    assert "\nDate: 2026-12-01 (Tuesday)\n" in text
    assert f"\nPlatform: {PLATFORM}\n" in text
    assert "\nTools: read, bash. Paths are relative to the working directory." in text
    assert "AGENTS.md" not in text  # no files: no section
    bare = system_prompt(tmp_path, tools=[], now=NOW, platform=PLATFORM).text
    assert "Tools: none in this session" in bare


def test_agents_files_from_the_repository_root_down_to_the_working_directory(
    repo: Path,
) -> None:
    cwd = repo / "src" / "app"
    (repo / "AGENTS.md").write_text("Root rules.\n")
    (cwd / "AGENTS.md").write_text("App rules.\n")
    (repo.parent / "AGENTS.md").write_text("Above the repository: not ours.\n")
    assert repository_root(cwd) == repo
    assert agents_files(cwd) == [
        repo / "AGENTS.md",
        repo / "src" / "AGENTS.md",
        cwd / "AGENTS.md",
    ]
    context = system_prompt(cwd, tools=[], now=NOW, platform=PLATFORM)
    assert context.files == (repo / "AGENTS.md", cwd / "AGENTS.md")
    assert context.warnings == ()
    files_part = context.text.split("# Instructions from AGENTS.md files\n\n", 1)[1]
    assert files_part.endswith(
        f"## {repo / 'AGENTS.md'}\n\nRoot rules.\n\n## {cwd / 'AGENTS.md'}\n\nApp rules.\n"
    )
    assert "not ours" not in context.text


def test_without_a_repository_only_the_working_directory_counts(tmp_path: Path) -> None:
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("Parent.\n")
    (cwd / "AGENTS.md").write_text("Here.\n")
    if repository_root(cwd) is not None:
        pytest.skip("the temporary directory is inside a git repository")
    context = system_prompt(cwd, tools=[], now=NOW, platform=PLATFORM)
    assert context.files == (cwd / "AGENTS.md",)
    assert "Parent." not in context.text


def test_system_replaces_the_first_part_and_the_files_stay(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("Root rules.\n")
    text, _ = prompt(repo, first_part="You are a pirate.")
    assert text.startswith("You are a pirate.\n\n# Instructions from AGENTS.md files\n")
    assert "Working directory" not in text
    assert text.endswith("Root rules.\n")
    assert prompt(repo / "src", first_part="")[0].startswith("# Instructions")
    (repo / "AGENTS.md").unlink()
    assert prompt(repo, first_part="")[0] == ""


def test_a_10_mb_file_is_cut_reading_only_what_fits(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = repo / "src" / "app"
    (repo / "AGENTS.md").write_bytes(b"a" * (10 * 1024 * 1024))
    (cwd / "AGENTS.md").write_text("App rules.\n")
    read: list[int] = []
    real_read = os.read

    def counting(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting)
    context = system_prompt(cwd, tools=[], now=NOW, platform=PLATFORM)
    assert sum(read) <= AGENTS_LIMIT + 2  # each file's share and one byte more
    kept = AGENTS_LIMIT - len("App rules.\n")
    assert context.text.count("a") >= kept  # the huge file fills what the small one leaves
    assert f"[cut: {kept:,} of its 10,485,760 bytes are above; the AGENTS.md files" in context.text
    assert context.text.endswith("App rules.\n")  # the nearest file is whole
    assert context.warnings == (
        f"cut {repo / 'AGENTS.md'} to {kept:,} of its 10,485,760 bytes: the AGENTS.md files "
        f"are limited to {AGENTS_LIMIT:,} bytes in all",
    )


def test_a_cut_never_splits_a_character(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("é" * 20, encoding="utf-8")  # 40 bytes, 2 each
    context = system_prompt(repo, tools=[], now=NOW, platform=PLATFORM, limit=7)
    assert f"## {repo / 'AGENTS.md'}\n\nééé\n\n[cut: 6 of its 40 bytes are above" in context.text


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (
            lambda p: p.write_bytes(b"\x7fELF\x02\x01\x00\x00binary"),
            "not a text file (it holds NUL",
        ),
        (lambda p: p.write_bytes(b"caf\xe9\n"), "not a text file (it is not UTF-8)"),
        (lambda p: p.symlink_to(p.name), "a symbolic link loop ([Errno 40]"),
        (lambda p: p.symlink_to("missing.md"), "a symbolic link to nothing"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: os.mkfifo(p), "not a regular file"),  # must not hang the start
    ],
    ids=["binary", "not-utf8", "symlink-loop", "dangling", "directory", "fifo"],
)
def test_a_file_that_cannot_be_used_is_left_out_saying_why(
    repo: Path, make: object, why: str
) -> None:
    assert callable(make)
    make(repo / "AGENTS.md")
    (repo / "src" / "AGENTS.md").write_text("Still here.\n")
    context = system_prompt(repo / "src", tools=[], now=NOW, platform=PLATFORM)
    assert context.files == (repo / "src" / "AGENTS.md",)
    assert f"## {repo / 'AGENTS.md'}\n\n[left out: {why}" in context.text
    assert context.text.endswith("Still here.\n")
    (warning,) = context.warnings
    assert warning.startswith(f"left out {repo / 'AGENTS.md'}: {why}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_an_unreadable_file_is_left_out(repo: Path) -> None:
    path = repo / "AGENTS.md"
    path.write_text("secret\n")
    path.chmod(0)
    context = system_prompt(repo, tools=[], now=NOW, platform=PLATFORM)
    assert context.files == ()
    assert "secret" not in context.text
    assert context.warnings[0].startswith(f"left out {path}: cannot read it ([Errno 13]")


def test_a_git_file_marks_a_repository_root_too(tmp_path: Path) -> None:
    # Worktrees and submodules have a .git file, not a directory.
    (tmp_path / "wt" / "sub").mkdir(parents=True)
    (tmp_path / "wt" / ".git").write_text("gitdir: /elsewhere\n")
    assert repository_root(tmp_path / "wt" / "sub") == tmp_path / "wt"


def test_an_agents_file_leading_outside_the_repository_is_left_out(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the private key\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").symlink_to(secret)
    (repo / "inner.md").write_text("Inner rules.\n")
    work = repo / "src"
    work.mkdir()
    (work / "AGENTS.md").symlink_to(repo / "inner.md")  # inside: followed
    context = system_prompt(work, tools=[], now=NOW, platform="Linux")
    assert "the private key" not in context.text
    assert "Inner rules." in context.text
    assert any("leading outside" in warning for warning in context.warnings)
