"""SPEC 10.10: the question shows what will run.

Every line of a command is on screen when the question is asked (a run of blank lines is one
marker that counts them); paths are shown resolved, relative to the working directory
(``.git/config``, ``notes.md -> .git/config``); text the model wrote (a justification) is
quoted on its own line and cannot pass for dsh's words; a diff too long to show says how many
lines are hidden and can be shown whole before answering.

Each test is one attack on the real ``dsh`` on a 24-row pseudo-terminal (``TERM=dumb``), with
a scripted model. "On screen" is checked as a person would see it: the rows from the call's
tool line down to the question fit in the terminal's 24 rows, and what runs is among them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from dsh_core.tools.sandbox import probe_bwrap
from tests.security._support_display import (  # noqa: F401 (fixtures, used by name)
    Terminal,
    call,
    env_fixture,
    events_of,
    home_fixture,
    stub_fixture,
    term_fixture,
    work_fixture,
)

pytestmark = pytest.mark.slow

ROWS, COLUMNS = 24, 200
"""The pseudo-terminal's size (``spawn_terminal``)."""


def _rows(text: str) -> int:
    """Rows ``text`` takes on the terminal: each line, wrapped at the width."""
    lines = text.replace("\r\n", "\n").split("\n")
    return sum(max(1, -(-len(line) // COLUMNS)) for line in lines)


def _question_block(term: Terminal, tool: str) -> str:
    """What the screen shows from the call's tool line to the end of the question's prompt."""
    term.child.expect(rf"Allow {tool}\?[^\r\n]*: ")
    screen = term.screen.getvalue()
    return screen[screen.rindex(f"[tool {tool}]") :]


# -- commands that hide a line ------------------------------------------------------------------

HIDING = [
    ("git log -1" + "\n" * 61 + "touch pwned", "[60 blank lines]"),
    ("touch pwned" + "\n" * 61 + "git log -1", "[60 blank lines]"),
    ("git log -1" + " " * 5000 + "; touch pwned", "[5,000 spaces]"),
    ("git log -1" + "\n \t " * 60 + "\ntouch pwned", "[60 blank lines]"),
]


@pytest.mark.parametrize(("command", "marker"), HIDING, ids=["below", "above", "spaces", "white"])
def test_a_command_padded_to_push_a_line_off_screen_is_shown_whole(
    term: Terminal, stub: StubServer, work: Path, command: str, marker: str
) -> None:
    stub.enqueue(call("bash", command=command))
    term.send_turn("show me the last commit")
    block = _question_block(term, "bash")
    assert "touch pwned" in block
    assert marker in block
    assert _rows(block) <= ROWS, block
    term.keys("n\r")
    term.child.expect_exact("[tool refused bash]")
    assert term.leave() == 0
    assert not (work / "pwned").exists()


# -- paths that pretend to be another file ------------------------------------------------------


@pytest.fixture
def repository(work: Path) -> Path:
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (work / "a.txt").write_text("harmless\n")
    return work


def test_a_file_path_padded_with_newlines_is_asked_as_the_file_it_edits(
    term: Terminal, stub: StubServer, repository: Path
) -> None:
    padded = "a.txt" + "\n" * 40 + "/../.git/config"
    stub.enqueue(
        call("read", file_path=padded),
        call("edit", file_path=padded, old_string="bare = false", new_string="fsmonitor = x"),
    )
    term.send_turn("tidy a.txt")
    block = _question_block(term, "edit")
    prompt = block.rsplit("\n", 1)[-1]
    assert prompt.startswith("Allow edit? .git/config ")
    assert _rows(block) <= ROWS, block
    term.keys("n\r")
    term.child.expect_exact("[tool refused edit]")
    assert term.leave() == 0
    assert "bare = false" in (repository / ".git" / "config").read_text()


def test_a_symlink_is_asked_as_where_it_leads(
    term: Terminal, stub: StubServer, repository: Path
) -> None:
    (repository / "notes.md").symlink_to(".git/config")
    stub.enqueue(
        call("read", file_path="notes.md"),
        call("edit", file_path="notes.md", old_string="bare = false", new_string="x = y"),
    )
    term.send_turn("tidy the notes")
    block = _question_block(term, "edit")
    assert block.rsplit("\n", 1)[-1].startswith("Allow edit? notes.md -> .git/config ")
    assert "--- a/.git/config" in block  # the diff names the file that changes
    term.keys("n\r")
    term.child.expect_exact("[tool refused edit]")
    assert term.leave() == 0


# -- the model's words --------------------------------------------------------------------------

POSING = "(sandboxed: writes only the working directory, no network) [y]es / [N]o"
"""A justification that reads like dsh's own note and choices."""


@pytest.mark.skipif(probe_bwrap() is not None, reason=f"no working bwrap: {probe_bwrap()}")
def test_a_justification_is_quoted_on_its_own_line(
    term: Terminal, stub: StubServer, work: Path
) -> None:
    stub.enqueue(call("bash", command="touch pwned", sandbox=False, justification=POSING))
    term.send_turn("build it")
    block = _question_block(term, "bash")
    lines = block.replace("\r\n", "\n").split("\n")
    prompt = lines[-1]
    assert POSING not in prompt and "writes only" not in prompt
    assert prompt.startswith("Allow bash? $ touch pwned (not sandboxed")
    [quoted] = [line for line in lines if POSING in line]
    assert quoted.startswith("the model's justification: ")
    assert f'"{POSING}"' in quoted
    term.keys("n\r")
    term.child.expect_exact("[tool refused bash]")
    assert term.leave() == 0
    assert not (work / "pwned").exists()


# -- a diff too long to show --------------------------------------------------------------------


def test_a_long_diff_says_how_many_lines_are_hidden_and_shows_them_when_asked(
    term: Terminal, stub: StubServer, work: Path
) -> None:
    content = "".join(f"line {n}\n" for n in range(1, 1001))
    stub.enqueue(call("write", file_path="long.txt", content=content))
    term.send_turn("write the long file")
    term.child.expect(r"\[diff cut: ([\d,]+) more lines hidden; answer v to see all of it\]")
    hidden = int(term.child.match.group(1).replace(",", ""))
    block = _question_block(term, "write")
    shown = [line for line in block.split("\r\n") if re.fullmatch(r"\+line \d+", line)]
    assert len(shown) + hidden == 1000
    assert "+line 1000" not in block
    assert "[v]iew all" in block.rsplit("\r\n", 1)[-1]
    term.keys("v\r")
    term.child.expect_exact("+line 1000\r\n")
    term.child.expect_exact("Allow write? long.txt (new file)")  # asked again, after all of it
    term.keys("y\r")
    term.child.expect_exact("[tool write done]")
    assert term.leave() == 0
    assert (work / "long.txt").read_text() == content
    assert [d["outcome"] for d in events_of(term.home, "approval/decided")] == ["allowed"]
