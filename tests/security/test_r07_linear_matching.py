"""SPEC 10.7: ``grep``, ``glob`` and ``.gitignore`` patterns are matched in linear time, and
Ctrl-C ends a running tool.

A hostile model (or a repository it was asked to look at) hands dsh a pattern that backtracks:
``(a+)+$`` against 41 bytes, a ``.gitignore`` line or a glob of many stars against a long name.
With a backtracking engine each pinned a core until SIGKILL, and Ctrl-C did nothing, since the
search held the GIL. Each attack here ends by itself; the run's own timeout is the only bound,
nothing is timed.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from dsh_core.tools.read import SNIFF_BYTES
from tests.security._support_toolrules import (
    attack,
    data_of,
    dsh_env,
    home,
    log_path,
    read_events,
    results,
    run_dsh,
    running_dsh,
    stub,
    user_home,
    work,
)
from tests.support import wait_until

__all__ = ["dsh_env", "home", "stub", "user_home", "work"]

pytestmark = pytest.mark.slow

HANG = 60.0
"""Seconds after which a run is a hang: a bound, not a measure of speed."""

STARS = "a*" * 14 + "b"
"""A glob or ignore line that a backtracking engine takes exponential time on, for a name of
a's without the b."""


def test_grep_with_nested_quantifiers_on_41_bytes_does_not_pin_a_core(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    (work / "victim.txt").write_text("a" * 40 + "!")
    attack(stub, ("grep", {"pattern": "(a+)+$", "path": "victim.txt"}))
    run = run_dsh(dsh_env, work, stdin="search\n")
    assert run.returncode == 0, run.stderr
    (result,) = results(home)
    assert result["content"] == "no matches for /(a+)+$/ in victim.txt"


def test_a_gitignore_line_of_many_stars_does_not_pin_a_core(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    (work / ".gitignore").write_text(STARS + "\n")
    (work / ("a" * 40)).write_text("needle\n")
    attack(stub, ("grep", {"pattern": "needle"}), ("glob", {"pattern": "**/*"}))
    run = run_dsh(dsh_env, work, stdin="search\n")
    assert run.returncode == 0, run.stderr
    grep, glob = results(home)
    assert grep["content"] == f"{'a' * 40}:1:needle"
    assert ("a" * 40) in glob["content"].split("\n")


def test_a_glob_of_many_stars_does_not_pin_a_core(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    (work / ("a" * 40)).write_text("x\n")
    attack(stub, ("glob", {"pattern": STARS}), ("grep", {"pattern": "x", "glob": STARS}))
    run = run_dsh(dsh_env, work, stdin="find\n")
    assert run.returncode == 0, run.stderr
    glob, grep = results(home)
    assert glob["content"].startswith(f"no files match {STARS}")
    assert grep["content"].startswith("no matches for /x/")


def test_ctrl_c_ends_a_grep_that_runs_through_a_huge_file(
    dsh_env: dict[str, str], home: Path, work: Path, stub: StubServer
) -> None:
    """SIGINT on a pipe while ``grep`` runs: the turn ends ``aborted`` and dsh leaves (130).

    The tree holds the 41-byte victim (a backtracking engine never gets past it) and a file of
    a terabyte, lines of text and then holes (no disk used), which a linear engine is still
    reading when the signal comes: so the grep is running, whichever engine it is. The text is
    longer than the 8 KiB that decide whether a file is binary: with one line, the holes made
    it binary, it was skipped at once, and the signal could come after the grep had ended.
    """
    tree = work / "tree"
    tree.mkdir()
    (tree / "a-victim.txt").write_text("a" * 40 + "!")
    with open(tree / "b-huge.txt", "wb") as huge:
        huge.write(b"text first, then a terabyte of holes\n" * (2 * SNIFF_BYTES // 37))
        os.truncate(huge.fileno(), 1 << 40)
    attack(stub, ("grep", {"pattern": "(a+)+$", "path": "tree"}))
    with running_dsh(dsh_env, work) as proc:
        assert proc.stdin is not None
        proc.stdin.write(b"search the tree\n")
        proc.stdin.flush()

        def grep_started() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"dsh exited ({proc.returncode}) before the grep ran")
            logs = list(home.rglob("session.jsonl"))
            return bool(logs) and any(e["type"] == "tool/call" for e in read_events(logs[0]))

        wait_until(grep_started, "the grep's tool/call in the log", timeout=HANG)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 130, err
    assert out.decode().endswith("[turn aborted] user\n")
    events = read_events(log_path(home))
    (result,) = data_of(events, "tool/result")
    assert result["is_error"] and result["error"]["code"] == "ABORTED", result
    assert data_of(events, "turn/end")[-1]["reason"] == {"kind": "aborted", "reason": "user"}
    assert json.dumps(result).count("b-huge") == 0  # cancelled mid-search: no partial list
