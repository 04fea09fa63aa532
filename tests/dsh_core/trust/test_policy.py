"""The policy both layers share (:mod:`dsh_core.trust.policy`): what is kept inside the working
directory and why, as ``write``/``edit`` see it (:meth:`Protection.reason`, a row a case) and as
the sandbox does (:func:`inventory`, which :func:`confine` mounts); and the files that hold the
key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dsh_core.masking import hide
from dsh_core.trust.credentials import key_files
from dsh_core.trust.policy import Protection, inventory
from dsh_core.trust.repositories import RepositoryScan
from tests.support import CANARY_KEY


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository (core.hooksPath and an include in its config), a bare one, dsh's venv."""
    path = (tmp_path / "root").resolve()
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "init", "-q", "--bare", str(path / "mirror.git")], check=True)
    with open(path / ".git" / "config", "a") as config:
        config.write(
            "[core]\n\thooksPath = .githooks\n\tfsmonitor = tools/watch.sh\n"
            "[include]\n\tpath = ../git.inc\n"
        )
    (path / ".venv" / "lib").mkdir(parents=True)
    return path


def protection(root: Path) -> Protection:
    venv = root / ".venv"
    return Protection(root, (venv,), scan=RepositoryScan(root, skip=(venv,)), home=root.parent)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (".venv/lib/x.pth", "dsh's own installation"),
        (".githooks/pre-commit", "core.hookspath in .git/config"),
        ("tools/watch.sh", "core.fsmonitor in .git/config"),
        ("git.inc", "include.path in .git/config"),
        ("mirror.git/config", "mirror.git/config"),
        ("mirror.git/hooks/update", "mirror.git/hooks/"),
        ("mirror.git/refs/heads/x", "the git directory mirror.git"),
        (".git/info/attributes", ".git/"),
        ("sub/.git", ".git"),
        ("AGENTS.md", "AGENTS.md"),
        ("docs/AGENTS.md", "AGENTS.md"),
        (".agents/skills/x/SKILL.md", ".agents/"),
        ("new/HEAD", None),  # HEAD alone makes no git directory
        ("src/app.py", None),
        ("tools/other.sh", None),
        (".github/workflows/ci.yml", None),
    ],
)
def test_what_write_and_edit_need_a_person_for(root: Path, path: str, reason: str | None) -> None:
    assert protection(root).reason(str(root / path)) == reason


def test_a_write_that_would_make_a_git_directory(root: Path) -> None:
    (root / "cache" / "objects").mkdir(parents=True)
    (root / "cache" / "refs").mkdir()
    guard = protection(root)
    assert guard.reason(str(root / "cache" / "config")) is None  # not one yet
    assert guard.reason(str(root / "cache" / "HEAD")) == "the git directory cache"
    (root / "cache" / "HEAD").write_text("ref: refs/heads/main\n")  # (a person said yes)
    assert guard.reason(str(root / "cache" / "config")) == "cache"  # no hooks/: kept whole


def test_the_working_directory_and_outside_are_not_judged_here(root: Path) -> None:
    guard = protection(root)
    assert guard.reason(str(root)) is None
    assert guard.reason("/etc/passwd") is None  # outside: asked about as outside


def test_what_the_sandbox_keeps_is_the_same_list(root: Path) -> None:
    kept = inventory(root, installation=(root / ".venv",), home=root.parent)
    shown = {str(item.path.relative_to(root)): (item.reason, item.missing) for item in kept.kept}
    assert shown[".venv"] == ("dsh's own installation", None)
    assert shown[".githooks"] == ("core.hookspath in .git/config", "directory")
    assert shown["tools/watch.sh"] == ("core.fsmonitor in .git/config", "tripwire")
    assert shown["git.inc"] == ("include.path in .git/config", "tripwire")
    assert shown["AGENTS.md"] == ("AGENTS.md", "file")
    assert shown[".git/config"] == (".git/config", None)
    assert [g.relative_to(root) for g in kept.git_directories] == [Path(".git")]


def test_git_s_global_configuration_in_a_home_working_directory(tmp_path: Path) -> None:
    home = tmp_path.resolve()
    (home / ".gitconfig").write_text("[core]\n\tpager = ~/bin/pager\n")
    guard = Protection(home, home=home)
    assert guard.reason(str(home / ".gitconfig")) == "git's global configuration"
    assert guard.reason(str(home / "bin" / "pager")) == "core.pager in .gitconfig"
    assert guard.reason(str(home / ".config" / "git" / "config")) == "git's global configuration"


def test_files_that_hold_the_key(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "work"
    (home / ".config" / "fish").mkdir(parents=True)
    root.mkdir()
    (home / ".bashrc").write_text(f"export DEEPSEEK_API_KEY={CANARY_KEY}\n")
    (home / ".profile").write_text("export PATH=$PATH:~/bin\n")
    (home / ".config" / "fish" / "config.fish").write_text(f"set -x K {CANARY_KEY}\n")
    (home / ".config" / "fish" / "fish_variables").write_text(f"SETUVAR --export K:{CANARY_KEY}\n")
    (root / ".env.local").write_text(f"DEEPSEEK_API_KEY={CANARY_KEY}\n")
    (root / ".envrc").write_text("layout python\n")
    (root / "notes.md").write_text(f"{CANARY_KEY}\n")  # not a file people keep keys in
    assert key_files(home, root) == ()  # no key registered (a local server): nothing to hide
    hide(CANARY_KEY)
    assert sorted(key_files(home, root)) == [
        home / ".bashrc",
        home / ".config" / "fish" / "config.fish",
        home / ".config" / "fish" / "fish_variables",
        root / ".env.local",
    ]
