"""SPEC 10.10: the question shows what will run.

Every line of a command is on screen when the question is asked (a run of blank lines is one
marker that counts them); paths are shown resolved, relative to the working directory
(``.git/config``, ``notes.md -> .git/config``); text the model wrote (a justification) is
quoted on its own line and cannot pass for dsh's words; a diff too long to show says how many
lines are hidden and can be shown whole before answering.

Each test is one attack on dsh's REPL on a 24-row terminal (``TERM=dumb``), with a scripted
model. What the question shows needs no process: the REPL runs in-process
(``tests/harness.py``), its screen the text dsh and prompt_toolkit wrote, laid out for 24 x 200
as on the pseudo-terminal these attacks first ran on. "On screen" is checked as a person would
see it: the rows from the call's tool line down to the question fit in the terminal's 24 rows,
and what runs is among them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from dsh_core.tools import Workspace
from dsh_core.tools.base import Access
from dsh_core.tools.shell import BashTool
from dsh_core.trust.sandbox import probe_bwrap
from tests.dsh_core.tools.test_shell import bash_run
from tests.harness import Terminal, on_terminal
from tests.security._support_display import (  # noqa: F401 (fixtures, used by name)
    call,
    env_fixture,
    events_of,
    home_fixture,
    stub_fixture,
    work_fixture,
)
from tests.support import assert_no_canary

ROWS, COLUMNS = 24, 200
"""The terminal's size (``repl_in_process``'s default, as ``spawn_terminal``'s)."""


def _rows(text: str) -> int:
    """Rows ``text`` takes on the terminal: each line, wrapped at the width."""
    lines = text.replace("\r\n", "\n").split("\n")
    return sum(max(1, -(-len(line) // COLUMNS)) for line in lines)


async def _question_block(term: Terminal, tool: str) -> str:
    """What the screen shows from the call's tool line to the end of the question's prompt."""
    await term.expect(re.compile(rf"Allow {tool}\?[^\n]*: "))
    screen = term.text[: term.seen]
    return screen[screen.rindex(f"[tool {tool}]") :]


def _attack(
    env: dict[str, str],
    home: Path,
    work: Path,
    script: Callable[[Terminal], Awaitable[None]],
    *args: str,
) -> Terminal:
    """The REPL in ``work`` under ``script`` (and dsh's ``args``); the key is nowhere on screen
    or on disk after."""
    term = on_terminal(env, work, script, *args)
    assert_no_canary(home, term.text)
    return term


# -- commands that hide a line ------------------------------------------------------------------

HIDING = [
    ("git log -1" + "\n" * 61 + "touch pwned", "[60 blank lines]"),
    ("touch pwned" + "\n" * 61 + "git log -1", "[60 blank lines]"),
    ("git log -1" + " " * 5000 + "; touch pwned", "[5,000 spaces]"),
    ("git log -1" + "\n \t " * 60 + "\ntouch pwned", "[60 blank lines]"),
]


@pytest.mark.parametrize(("command", "marker"), HIDING, ids=["below", "above", "spaces", "white"])
def test_a_command_padded_to_push_a_line_off_screen_is_shown_whole(
    env: dict[str, str], home: Path, stub: StubServer, work: Path, command: str, marker: str
) -> None:
    stub.enqueue(call("bash", command=command))

    async def script(term: Terminal) -> None:
        await term.turn("show me the last commit")
        block = await _question_block(term, "bash")
        assert "touch pwned" in block
        assert marker in block
        assert _rows(block) <= ROWS, block
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    _attack(env, home, work, script)
    assert not (work / "pwned").exists()


# -- paths that pretend to be another file ------------------------------------------------------


@pytest.fixture
def repository(work: Path) -> Path:
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (work / "a.txt").write_text("harmless\n")
    return work


def test_a_file_path_padded_with_newlines_is_asked_as_the_file_it_edits(
    env: dict[str, str], home: Path, stub: StubServer, repository: Path
) -> None:
    padded = "a.txt" + "\n" * 40 + "/../.git/config"
    stub.enqueue(
        call("read", file_path=padded),
        call("edit", file_path=padded, old_string="bare = false", new_string="fsmonitor = x"),
    )

    async def script(term: Terminal) -> None:
        await term.turn("tidy a.txt")
        block = await _question_block(term, "edit")
        prompt = block.rsplit("\n", 1)[-1]
        assert prompt.startswith("Allow edit? .git/config ")
        assert _rows(block) <= ROWS, block
        term.keys("n\r")
        await term.expect("[tool refused edit]")
        assert await term.leave() == 0

    _attack(env, home, repository, script)
    assert "bare = false" in (repository / ".git" / "config").read_text()


def test_a_symlink_is_asked_as_where_it_leads(
    env: dict[str, str], home: Path, stub: StubServer, repository: Path
) -> None:
    (repository / "notes.md").symlink_to(".git/config")
    stub.enqueue(
        call("read", file_path="notes.md"),
        call("edit", file_path="notes.md", old_string="bare = false", new_string="x = y"),
    )

    async def script(term: Terminal) -> None:
        await term.turn("tidy the notes")
        block = await _question_block(term, "edit")
        assert block.rsplit("\n", 1)[-1].startswith("Allow edit? notes.md -> .git/config ")
        assert "--- a/.git/config" in block  # the diff names the file that changes
        term.keys("n\r")
        await term.expect("[tool refused edit]")
        assert await term.leave() == 0

    _attack(env, home, repository, script)


# -- the model's words --------------------------------------------------------------------------

POSING = "(sandboxed: writes only the working directory, no network) [y]es / [N]o"
"""A justification that reads like dsh's own note and choices."""


@pytest.mark.skipif(probe_bwrap() is not None, reason=f"no working bwrap: {probe_bwrap()}")
def test_a_justification_is_quoted_on_its_own_line(
    env: dict[str, str], home: Path, stub: StubServer, work: Path
) -> None:
    stub.enqueue(call("bash", command="touch pwned", sandbox=False, justification=POSING))

    async def script(term: Terminal) -> None:
        await term.turn("build it")
        block = await _question_block(term, "bash")
        lines = block.split("\n")
        prompt = lines[-1]
        assert POSING not in prompt and "writes only" not in prompt
        assert prompt.startswith("Allow bash? $ touch pwned (not sandboxed")
        [quoted] = [line for line in lines if POSING in line]
        assert quoted.startswith("the model's justification: ")
        assert f'"{POSING}"' in quoted
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    _attack(env, home, work, script)
    assert not (work / "pwned").exists()


# -- a diff too long to show --------------------------------------------------------------------


def test_a_long_diff_says_how_many_lines_are_hidden_and_shows_them_when_asked(
    env: dict[str, str], home: Path, stub: StubServer, work: Path
) -> None:
    content = "".join(f"line {n}\n" for n in range(1, 1001))
    stub.enqueue(call("write", file_path="long.txt", content=content))

    async def script(term: Terminal) -> None:
        await term.turn("write the long file")
        cut = await term.expect(
            re.compile(r"\[diff cut: ([\d,]+) more lines hidden; answer v to see all of it\]")
        )
        assert isinstance(cut, re.Match)
        hidden = int(cut.group(1).replace(",", ""))
        block = await _question_block(term, "write")
        shown = [line for line in block.split("\n") if re.fullmatch(r"\+line \d+", line)]
        assert len(shown) + hidden == 1000
        assert "+line 1000" not in block
        assert "[v]iew all" in block.rsplit("\n", 1)[-1]
        term.keys("v\r")
        await term.expect("+line 1000\n")
        await term.expect("Allow write? long.txt (new file)")  # asked again, after all of it
        term.keys("y\r")
        await term.expect("[tool write done]")
        assert await term.leave() == 0

    term = _attack(env, home, work, script)
    assert (work / "long.txt").read_text() == content
    assert [d["outcome"] for d in events_of(term.home, "approval/decided")] == ["allowed"]


# -- a program the model planted on PATH ---------------------------------------------------------


@pytest.fixture
def planted_git(work: Path, env: dict[str, str]) -> Path:
    """An activated ``.venv/bin`` holding a ``git`` the model wrote (in a sandboxed command, the
    review's first call): it touches ``pwned``, then runs the real git."""
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    git = bin_dir / "git"
    real = shutil.which("git", path=env["PATH"]) or "true"  # not itself: no loop
    git.write_text(f'#!/bin/sh\ntouch {work / "pwned"}\nexec {real} "$@"\n')
    git.chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return git


PLANTED_NOTE = "git is ./.venv/bin/git, a file in the working directory"


@pytest.mark.skipif(probe_bwrap() is not None, reason=f"no working bwrap: {probe_bwrap()}")
def test_leaving_the_sandbox_for_git_status_says_which_git_runs(
    env: dict[str, str], home: Path, stub: StubServer, work: Path, planted_git: Path
) -> None:
    # The second review (t28): the question showed "$ git status (not sandboxed ...)", the
    # person answered y, and the model's .venv/bin/git ran outside the sandbox.
    stub.enqueue(
        call("bash", command="git status", sandbox=False, justification="git needs the repo")
    )

    async def script(term: Terminal) -> None:
        await term.turn("what changed?")
        block = await _question_block(term, "bash")
        prompt = block.rsplit("\n", 1)[-1]
        assert prompt.startswith("Allow bash? $ git status (not sandboxed"), prompt
        assert PLANTED_NOTE in prompt, prompt
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    _attack(env, home, work, script)
    assert not (work / "pwned").exists()


def test_always_is_not_offered_for_a_planted_program_without_a_sandbox(
    env: dict[str, str], home: Path, stub: StubServer, work: Path, planted_git: Path
) -> None:
    # Without a sandbox, [a] for "git ..." would cover whatever the model writes to that file.
    stub.enqueue(call("bash", command="git status"))

    async def script(term: Terminal) -> None:
        await term.turn("what changed?")
        block = await _question_block(term, "bash")
        prompt = block.rsplit("\n", 1)[-1]
        assert PLANTED_NOTE in prompt, prompt
        assert "[a]lways" not in prompt, prompt
        term.keys("n\r")
        await term.expect("[tool refused bash]")
        assert await term.leave() == 0

    _attack(env, home, work, script, "--sandbox", "off")


# -- a planted program the lookup must not miss (the second review's F1) -------------------------
# What the question says is decided by the bash tool, in process: each attack asks for a command
# outside any sandbox and reads the question's note; then the control runs the command in the
# real bash, which does run the planted program.


def _outside_sandbox(work: Path, env: dict[str, str], command: str) -> Access:
    workspace = Workspace.at(work, work / ".out")
    workspace.environment["PATH"] = env["PATH"]
    return BashTool(workspace).prepare({"command": command}).access


HIDDEN_NAMES = [
    'g""it status',
    "g''it status",
    "g\\it status",
    "$(printf gi)t status",
    "`printf git` status",
    "${X:-git} status",
    "g?t status",
    "g[i]t status",
    "{git,status}",
]


@pytest.mark.parametrize("command", HIDDEN_NAMES)
def test_a_planted_git_whose_name_is_quoted_or_expanded_is_said(
    env: dict[str, str], work: Path, planted_git: Path, command: str
) -> None:
    (work / "git").touch()  # what g?t matches: bash then looks git up on PATH
    access = _outside_sandbox(work, env, command)
    assert "PATH holds ./.venv/bin, in the working directory" in access.note, access.note
    assert access.scope is None
    # What it would have done: bash runs ./.venv/bin/git (the control).
    _control(work, env, command)


def test_a_command_that_sets_path_to_a_planted_directory_is_said(
    env: dict[str, str], work: Path, planted_git: Path
) -> None:
    env["PATH"] = env["PATH"].split(":", 1)[1]  # ./.venv/bin is not on dsh's PATH
    command = "PATH=.venv/bin:/usr/bin:/bin git status"
    access = _outside_sandbox(work, env, command)
    assert "the command sets PATH" in access.note, access.note
    assert access.scope is None
    _control(work, env, command)


@pytest.mark.parametrize("command", ["FOO=1 ./run.sh", "cd . && ./run.sh", "nohup ./run.sh"])
def test_a_planted_script_run_after_the_first_word_is_named(
    env: dict[str, str], work: Path, command: str
) -> None:
    script = work / "run.sh"
    script.write_text(f"#!/bin/sh\ntouch {work / 'pwned'}\n")
    script.chmod(0o755)
    access = _outside_sandbox(work, env, command)
    assert "./run.sh is ./run.sh, a file in the working directory" in access.note, access.note
    assert access.scope is None
    _control(work, env, command)


def test_a_program_linked_from_outside_into_the_working_directory_is_named(
    env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    # The third review (t9): ~/bin/fmt-all -> <work>/tools/fmt-all (ln -s, npm link, pipx); a
    # sandboxed command rewrote tools/fmt-all, then "fmt-all" outside the sandbox said nothing.
    tools = work / "tools"
    tools.mkdir()
    (tools / "fmt-all").write_text(f"#!/bin/sh\ntouch {work / 'pwned'}\n")
    (tools / "fmt-all").chmod(0o755)
    linked = tmp_path / "user-bin"
    linked.mkdir()
    (linked / "fmt-all").symlink_to(tools / "fmt-all")
    env["PATH"] = f"{linked}:{env['PATH']}"
    access = _outside_sandbox(work, env, "fmt-all")
    assert "fmt-all is ./tools/fmt-all, a file in the working directory" in access.note
    assert access.scope is None
    _control(work, env, "fmt-all")


def _control(work: Path, env: dict[str, str], command: str) -> None:
    """Runs ``command`` in the real bash, outside any sandbox: the planted program ran."""
    workspace = Workspace.at(work, work / ".out")
    workspace.environment["PATH"] = env["PATH"]
    bash_run(BashTool(workspace), command)
    assert (work / "pwned").exists()
