"""``planted``: which programs a command would take from the working directory, as the shell
looks them up (the first ``PATH`` entry with an executable of that name, builtins first)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dsh_core.trust.planted import planted


def program(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = Path(os.path.realpath(tmp_path)) / "work"
    work.mkdir()
    return work


def test_a_program_in_an_activated_venv_is_named(root: Path) -> None:
    program(root / ".venv" / "bin", "git")
    path = f"{root}/.venv/bin:/usr/bin:/bin"
    expected = ["git is ./.venv/bin/git, a file in the working directory"]
    assert planted("git status", path, root) == expected
    assert planted("true && git status", path, root) == expected  # not only the first word


def test_a_program_found_first_outside_is_not_named(root: Path, tmp_path: Path) -> None:
    program(root / "bin", "tool")
    program(tmp_path / "outside", "tool")
    assert planted("tool", f"{tmp_path / 'outside'}:{root / 'bin'}", root) == []


def test_a_program_linked_from_outside_into_the_working_directory_is_named(
    root: Path, tmp_path: Path
) -> None:
    # ln -s, npm link, pipx: a PATH directory outside holds a link to a file a sandboxed
    # command can rewrite (the third attack review's t9).
    target = program(root / "tools", "fmt-all")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "fmt-all").symlink_to(target)
    path = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    assert planted("fmt-all --check", path, root) == [
        "fmt-all is ./tools/fmt-all, a file in the working directory"
    ]


def test_a_relative_or_empty_path_entry_is_the_working_directory(root: Path) -> None:
    program(root / "bin", "tool")
    program(root, "run")
    assert planted("tool", "bin:/usr/bin", root) == [
        "tool is ./bin/tool, a file in the working directory"
    ]
    assert planted("run", ":/usr/bin", root) == ["run is ./run, a file in the working directory"]


def test_a_builtin_is_not_named_whatever_path_holds(root: Path) -> None:
    program(root / "bin", "echo")
    assert planted("echo hi", f"{root / 'bin'}:/usr/bin", root) == []


def test_a_path_as_the_first_word_is_named_when_it_leads_inside(root: Path) -> None:
    program(root, "run.sh")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)  # a venv's python: a link
    assert planted("./run.sh", "/usr/bin", root) == [
        "./run.sh is ./run.sh, a file in the working directory"
    ]
    assert planted(".venv/bin/python -c 1", "/usr/bin", root) == [
        ".venv/bin/python is ./.venv/bin/python, a file in the working directory"
    ]
    assert planted("/usr/bin/env true", "/usr/bin", root) == []


def test_nothing_is_named_when_the_working_directory_is_the_root() -> None:
    assert planted("./run.sh", "/usr/bin:/bin", Path("/")) == []


def test_a_command_whose_words_the_shell_changes_names_the_directory(root: Path) -> None:
    program(root / ".venv" / "bin", "git")
    path = f"{root}/.venv/bin:/usr/bin:/bin"
    said = "PATH holds ./.venv/bin, in the working directory"
    for command in ['g""it status', "g?t", "echo {a,b}", "cd sub && git", ". ./env.sh"]:
        assert said in planted(command, path, root), command
    assert planted("git status # a comment, --opt=1 a:b", path, root) == [
        "git is ./.venv/bin/git, a file in the working directory"
    ]
    assert planted("g''it", "/usr/bin:/bin", root) == []  # no directory inside: nothing to say
    words = " ".join(f"w{n}" for n in range(1001))
    assert said in planted(f"{words} git", path, root)  # more than are looked up


def test_a_relative_path_entry_is_named_as_written(root: Path) -> None:
    assert planted("cd sub && tool", "bin:/usr/bin", root) == [
        "PATH holds bin, relative to the working directory"
    ]


def test_a_command_that_mentions_path_says_so(root: Path) -> None:
    assert planted("PATH=./x:/usr/bin git", "/usr/bin:/bin", root) == ["the command sets PATH"]
    assert planted("read PATH < f; git", "/usr/bin:/bin", root) == ["the command sets PATH"]


def test_a_path_anywhere_in_the_command_is_named(root: Path) -> None:
    program(root, "run.sh")
    (root / "notes.txt").write_text("not a program")
    line = "./run.sh is ./run.sh, a file in the working directory"
    for command in ["FOO=1 ./run.sh", "sudo ./run.sh", "rg --pre=./run.sh x", "hash -p ./run.sh g"]:
        assert planted(command, "/usr/bin", root) == [line], command
    assert planted("cat ./notes.txt", "/usr/bin", root) == []  # not executable: not a program
