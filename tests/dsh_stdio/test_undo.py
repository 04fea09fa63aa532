"""Checkpoints and undo on pipes (SPEC 14), on the real ``dsh`` process.

A turn's changes on a pipe (``--allow write,shell``), then ``dsh --undo`` and ``dsh --changes``
as a person runs them; the log read independently (``tests.support``); what the model is sent
next read from the stub's requests. A SIGKILL while a command changes files, then the undo that
must restore the tree exactly. The terminal's ``/undo``, ``/redo`` and ``/rewind`` are in
``test_undo_terminal.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import StubServer, ToolCalls
from tests.dsh_stdio.test_agent_pipe import (
    HANG,
    Run,
    assert_log_whole,
    assert_requests_valid,
    data_of,
    read_events,
    run_dsh,
    start_dsh,
    stub,
    wait_for_event,
)
from tests.support import child_env, wait_until

__all__ = ["stub"]

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "dsh-home"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A small project: files with modes, a link, a nested directory, an empty one."""
    path = tmp_path / "work"
    (path / "src" / "pkg").mkdir(parents=True)
    (path / "src" / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (path / "run.sh").write_text("#!/bin/sh\necho run\n")
    (path / "run.sh").chmod(0o755)
    (path / "notes.md").write_text("# Notes\n")
    (path / "current").symlink_to("notes.md")
    (path / "empty").mkdir()
    return path


@pytest.fixture
def env(stub: StubServer, home: Path) -> dict[str, str]:
    return child_env(stub.url, home)


def tree(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every path below ``root`` (``.git`` aside): its kind, mode and bytes or link target."""
    found: dict[str, tuple[str, int, bytes]] = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = Path(directory, name)
            status = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISLNK(status.st_mode):
                found[relative] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(status.st_mode):
                found[relative] = ("dir", stat.S_IMODE(status.st_mode), b"")
            else:
                found[relative] = ("file", stat.S_IMODE(status.st_mode), path.read_bytes())
    return found


def calls(stub: StubServer, *calls: tuple[str, dict[str, Any]]) -> None:
    """The model's next answer: these calls in one step (then it quotes their results)."""
    stub.enqueue(ToolCalls(tuple((name, json.dumps(arguments)) for name, arguments in calls)))


HAVOC = (
    "echo broken > src/pkg/mod.py && chmod 600 run.sh && rm notes.md && "
    "ln -sf /etc/hostname current && rmdir empty && mkdir -p made/deep && "
    "echo new > made/deep/new.txt"
)
"""A command that changes every kind of thing a checkpoint holds."""


def changing_turn(stub: StubServer, env: dict[str, str], work: Path) -> Run:
    calls(
        stub,
        ("write", {"file_path": "added.txt", "content": "written by the model\n"}),
        ("bash", {"command": HAVOC}),
    )
    run = run_dsh(env, work, "--allow", "write,shell", stdin="change things\n")
    assert run.returncode == 0, run.stderr
    return run


def test_undo_on_a_pipe_restores_the_tree_exactly(
    stub: StubServer, env: dict[str, str], home: Path, work: Path
) -> None:
    original = tree(work)
    changing_turn(stub, env, work)
    assert tree(work) != original
    events = assert_log_whole(home)
    kinds = [event["type"] for event in events]
    # The checkpoint is on disk before the first call that changes anything runs...
    assert kinds.index("checkpoint") < kinds.index("tool/call")
    (checkpoint,) = data_of(events, "checkpoint")
    assert checkpoint["turn"] == 1 and checkpoint["files"] == 4 and checkpoint["skipped"] == []
    # ...and what the turn changed is recorded before its end.
    assert kinds.index("turn/changes") == kinds.index("turn/end") - 1
    (changes,) = data_of(events, "turn/changes")
    assert changes == {
        "turn": 1,
        "changed": [
            "added.txt",
            "current",
            "empty/",
            "made/",
            "made/deep/",
            "made/deep/new.txt",
            "notes.md",
            "run.sh",
            "src/pkg/mod.py",
        ],
    }

    run = run_dsh(env, work, "--undo")

    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("[undo turn 1] restored 9: added.txt (removed), current, ")
    assert "not covered by undo: what its commands did beyond these files" in run.stderr
    assert tree(work) == original
    (undo,) = data_of(assert_log_whole(home), "undo")
    assert undo["turns"] == [1] and undo["conflicts"] == [] and len(undo["restored"]) == 9


def test_a_file_changed_since_is_left_named_and_the_exit_status_is_1(
    stub: StubServer, env: dict[str, str], home: Path, work: Path
) -> None:
    changing_turn(stub, env, work)
    (work / "src" / "pkg" / "mod.py").write_text("the person's own edit\n")

    run = run_dsh(env, work, "--undo")

    assert run.returncode == 1
    assert "dsh:   src/pkg/mod.py: changed since the turn ended" in run.stderr
    assert (work / "src" / "pkg" / "mod.py").read_text() == "the person's own edit\n"
    assert (work / "notes.md").read_text() == "# Notes\n"  # the rest went back
    (undo,) = data_of(assert_log_whole(home), "undo")
    assert undo["conflicts"] == ["src/pkg/mod.py"]


def test_the_model_is_told_which_files_went_back(
    stub: StubServer, env: dict[str, str], work: Path
) -> None:
    calls(stub, ("write", {"file_path": "added.txt", "content": "x\n"}))
    run_dsh(env, work, "--allow", "write", stdin="add a file\n")
    assert run_dsh(env, work, "--undo").returncode == 0
    run = run_dsh(env, work, "-c", stdin="what now?\n")
    assert run.returncode == 0, run.stderr
    last = stub.requests[-1]["messages"][-1]
    assert last["role"] == "user"
    assert "/undo" in last["content"] and "added.txt" in last["content"]
    assert last["content"].endswith("what now?")
    assert_requests_valid(stub)


def test_changes_prints_each_turns_files_with_a_diff(
    stub: StubServer, env: dict[str, str], work: Path
) -> None:
    calls(
        stub,
        ("read", {"file_path": "notes.md"}),
        ("edit", {"file_path": "notes.md", "old_string": "# Notes", "new_string": "# Better"}),
    )
    run_dsh(env, work, "--allow", "write", stdin="improve the notes\n")

    run = run_dsh(env, work, "--changes")

    assert run.returncode == 0, run.stderr
    assert run.stdout == (
        "turn 1: 'improve the notes': 1 changed\n"
        "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-# Notes\n+# Better\n"
    )


def test_no_checkpoints_takes_none_and_says_undo_is_off(
    stub: StubServer, env: dict[str, str], home: Path, work: Path
) -> None:
    calls(stub, ("write", {"file_path": "added.txt", "content": "x\n"}))
    run_dsh(env, work, "--allow", "write", "--no-checkpoints", stdin="add\n")
    events = assert_log_whole(home)
    assert data_of(events, "checkpoint") == [] and data_of(events, "turn/changes") == []
    run = run_dsh(env, work, "--undo")
    assert run.returncode == 0
    assert "nothing to undo" in run.stderr
    assert (work / "added.txt").exists()


def test_the_configuration_file_turns_checkpoints_off(
    stub: StubServer, env: dict[str, str], home: Path, work: Path
) -> None:
    home.mkdir()
    (home / "config.toml").write_text("checkpoints = false\n")
    calls(stub, ("write", {"file_path": "added.txt", "content": "x\n"}))
    run_dsh(env, work, "--allow", "write", stdin="add\n")
    assert data_of(assert_log_whole(home), "checkpoint") == []
    (home / "config.toml").write_text('checkpoints = "no"\n')
    run = run_dsh(env, work, stdin="hi\n")
    assert run.returncode == 2
    assert "config.toml, line 1: checkpoints: must be true or false" in run.stderr


def test_show_shows_the_undo(stub: StubServer, env: dict[str, str], work: Path) -> None:
    calls(stub, ("write", {"file_path": "added.txt", "content": "x\n"}))
    run_dsh(env, work, "--allow", "write", stdin="add a file\n")
    run_dsh(env, work, "--undo")
    shown = run_dsh(env, work, "--show", "last")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.endswith("[undo turn 1] restored 1: added.txt\n")


def test_a_sigkill_during_a_changing_command_then_undo_restores_the_tree_exactly(
    stub: StubServer, env: dict[str, str], home: Path, work: Path
) -> None:
    original = tree(work)
    marker = f"{os.getpid()}{id(work)}"
    calls(stub, ("bash", {"command": f"{HAVOC} && sleep {marker}"}))
    proc = start_dsh(env, work, "--allow", "shell")
    assert proc.stdin is not None
    proc.stdin.write(b"change things, slowly\n")
    proc.stdin.flush()
    wait_for_event(proc, home, "tool/call")
    wait_until(lambda: (work / "made" / "deep" / "new.txt").exists(), "the command ran")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=HANG)
    _end_left_behind(marker)
    assert tree(work) != original

    run = run_dsh(env, work, "--undo")

    assert run.returncode == 0, run.stderr
    assert "closed it as interrupted" in run.stderr
    assert tree(work) == original
    events = read_events(next(home.rglob("session.jsonl")))
    kinds = [event["type"] for event in events]
    assert kinds[-4:] == ["tool/result", "turn/end", "turn/changes", "undo"]


def _end_left_behind(marker: str) -> None:
    """An unsandboxed command outlives a SIGKILL of dsh (README): end this test's own."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()]:
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)
