"""SPEC 10.2 inside the sandbox: ``.git/config``, ``.git/hooks/`` (of the repository and any
nested one), ``.dsh/`` and ``.agents/`` are read-only to commands.

Each attack is a ``bash`` call a prompt-injected model asks for under ``--allow shell``; the
consequence is the user's own next ``git`` in that directory (with the key in its environment,
as a shell has it), which would run the planted code outside the sandbox. On dsh 0.2.0 every
one of them ran the payload and the marker held the canary key, except where a test says
otherwise.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security._support_sandbox import (  # noqa: F401 (the fixture is found by name)
    Scene,
    needs_bwrap,
    payload,
    scene_fixture,
)

pytestmark = [pytest.mark.slow, needs_bwrap]


def git(directory: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The user's own ``git`` in ``directory``, after the session: the key in its environment."""
    return subprocess.run(
        ["git", "-c", "user.email=user@example.com", "-c", "user.name=user", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def repository(path: Path, env: dict[str, str]) -> Path:
    """A repository with one commit at ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    assert git(path, env, "init", "-q").returncode == 0
    assert git(path, env, "commit", "-q", "--allow-empty", "-m", "first").returncode == 0
    return path


def evil(marker: Path) -> str:
    """A shell script that runs the payload: a hook, or an fsmonitor command."""
    return f"#!/bin/sh\n{sys.executable} -c {shlex.quote(payload(marker))}\n"


def write_script(path: str, marker: Path) -> str:
    """The shell words that write :func:`evil` to ``path`` and make it executable."""
    return f"printf %s {shlex.quote(evil(marker))} > {path} && chmod +x {path}"


@pytest.mark.parametrize("nested", ["", "vendor/lib/"], ids=["repository", "nested-repository"])
def test_hook_planted_in_git_hooks_does_not_run_at_next_commit(scene: Scene, nested: str) -> None:
    repository(scene.work, scene.env)
    target = repository(scene.work / nested, scene.env)
    hook = f"{nested}.git/hooks/pre-commit"
    result = scene.content(write_script(hook, scene.marker))
    assert git(target, scene.env, "commit", "-q", "--allow-empty", "-m", "user's").returncode == 0
    assert not scene.marker.exists()
    assert f"{hook}: Read-only file system" in result


def test_fsmonitor_written_to_git_config_does_not_run_at_git_status(scene: Scene) -> None:
    repository(scene.work, scene.env)
    script = write_script("evil.sh", scene.marker)
    result = scene.content(f'{script} && git config core.fsmonitor "$PWD/evil.sh"')
    assert git(scene.work, scene.env, "status").returncode == 0
    assert not scene.marker.exists()
    # git writes a lock file, then renames it over .git/config: a mount point stays.
    assert "could not write config file .git/config: Device or resource busy" in result
    assert "fsmonitor" not in (scene.work / ".git" / "config").read_text()


def test_git_directory_swapped_for_a_planted_one_does_not_run_at_git_status(scene: Scene) -> None:
    # What a read-only .git/config alone would allow: move the repository away, make another.
    repository(scene.work, scene.env)
    result = scene.content(
        f"{write_script('evil.sh', scene.marker)} && mv .git .git-moved && git init -q && "
        'git config core.fsmonitor "$PWD/evil.sh"'
    )
    assert git(scene.work, scene.env, "status").returncode == 0
    assert not scene.marker.exists()
    assert "mv: cannot move '.git' to '.git-moved': Device or resource busy" in result
    assert not (scene.work / ".git-moved").exists()


def test_commondir_pointing_at_a_planted_repository_does_not_run_at_git_status(
    scene: Scene,
) -> None:
    # .git/commondir names the directory git takes config and hooks from; it cannot be a
    # placeholder (git reads whatever is there), so dsh sets aside one the command made.
    repository(scene.work, scene.env)
    result = scene.content(
        f"{write_script('evil.sh', scene.marker)} && git init -q --bare planted.git && "
        'git -C planted.git config core.fsmonitor "$PWD/evil.sh" && '
        'echo "$PWD/planted.git" > .git/commondir && echo planted'
    )
    assert git(scene.work, scene.env, "status").returncode == 0
    assert not scene.marker.exists()
    assert result == (
        "planted\n[sandbox: set aside .git/commondir as commondir.disabled-by-dsh: the command "
        "created it, and git would take its configuration and hooks from it, outside the "
        "sandbox]\n"
        "[sandbox: set aside planted.git/config as config.disabled-by-dsh: the command made the "
        "git directory planted.git, and it sets core.fsmonitor, which git would run outside the "
        "sandbox]"
    )
    assert not (scene.work / ".git" / "commondir").exists()


def test_new_repository_with_fsmonitor_made_in_the_working_directory_does_not_run(
    scene: Scene,
) -> None:
    # Not a repository: the user's prompt (or next `git status`) in it would run a new one's.
    # No placeholder stands there while the command runs (it would be a mount point in the
    # person's tree): the new repository is looked at afterwards, as a nested one is.
    result = scene.content(
        f"{write_script('evil.sh', scene.marker)} && git init -q && "
        'git config core.fsmonitor "$PWD/evil.sh"'
    )
    assert git(scene.work, scene.env, "status").returncode == 0
    assert not scene.marker.exists()
    assert result == (
        "[sandbox: set aside .git/config as config.disabled-by-dsh: the command made the git "
        "directory .git, and it sets core.fsmonitor, which git would run outside the sandbox]"
    )


def test_worktree_pointer_redirected_to_a_planted_repository_does_not_run(scene: Scene) -> None:
    # A linked worktree's .git is a file, "gitdir: <where its git directory is>".
    main = repository(scene.work / "main", scene.env)
    assert git(main, scene.env, "worktree", "add", "-q", "../wt").returncode == 0
    result = scene.content(
        f"{write_script('evil.sh', scene.marker)} && git init -q planted && "
        'git -C planted config core.fsmonitor "$PWD/evil.sh" && '
        'echo "gitdir: $PWD/planted/.git" > wt/.git'
    )
    assert git(scene.work / "wt", scene.env, "status").returncode == 0
    assert not scene.marker.exists()
    assert "wt/.git: Read-only file system" in result


def test_skill_planted_in_agents_or_dsh_is_refused(scene: Scene) -> None:
    # A skill steers every later session in this repository (SPEC 13). 0.2.0 wrote both. An
    # existing .dsh is read-only; a missing .agents, made by the command, is set aside.
    (scene.work / ".dsh").mkdir()
    result = scene.content(
        "mkdir -p .agents/skills/helper; echo planted > .agents/skills/helper/SKILL.md; "
        "mkdir -p .dsh/skills/helper; echo planted > .dsh/skills/helper/SKILL.md"
    )
    assert not (scene.work / ".agents").exists()
    assert list((scene.work / ".dsh").iterdir()) == []
    assert result.count("mkdir: cannot create directory") == 1
    assert result.count(": Read-only file system\n") == 1
    assert "[sandbox: set aside .agents as .agents.disabled-by-dsh: " in result, result
