"""The approval question on a real terminal (SPEC 12): what a first week with dsh tripped over.

The default is visible and Enter takes it; any other answer asks again; ``n`` may carry a
reason the model receives; ``[a]`` for ``bash`` covers only commands with the same first word;
the diff is coloured on a colour terminal. The real ``dsh`` on a pseudo-terminal (pexpect)
against the stub server; layouts and answers in detail are ``test_approve.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from tests.dsh_stdio.test_agent_terminal import Terminal, bash, spawn_terminal
from tests.support import DSH

pytestmark = pytest.mark.slow


def _prompt(term: Terminal) -> str:
    """The question's prompt line, once it is on screen."""
    term.child.expect(r"Allow [^\r\n]*: ")
    return str(term.child.after)


def test_the_default_is_shown_and_any_other_answer_asks_again(term: Terminal) -> None:
    term.send_turn("toolbash")
    prompt = _prompt(term)
    assert prompt.endswith('[y]es / [N]o / [a]lways for "ls ...": ')
    term.keys("x\r")
    term.child.expect_exact("please answer y or n (Enter is no;")
    assert _prompt(term) == prompt  # asked again, the same question
    term.keys("maybe\r")
    assert _prompt(term) == prompt
    term.keys("\r")  # Enter: the default, no
    term.child.expect_exact('[tool refused bash] the user rejected tool "bash"\r\n')
    assert term.leave() == 0
    assert term.decisions() == ["rejected"]
    assert term.events("tool/call") == []


def test_no_with_a_reason_reaches_the_model_and_the_log(term: Terminal) -> None:
    term.send_turn("toolbash")
    _prompt(term)
    term.keys("n use uv instead\r")
    refusal = 'the user rejected tool "bash": use uv instead'
    term.child.expect_exact(f"[tool refused bash] {refusal}\r\n")
    term.child.expect_exact(f"Tool results: [bash] Error: {refusal}")  # what the model got
    assert term.leave() == 0
    [decided] = term.events("approval/decided")
    assert (decided["outcome"], decided["reason"]) == ("rejected", "use uv instead")


def test_always_for_a_command_covers_only_commands_with_its_first_word(
    term: Terminal, stub: StubServer, workdir: Path
) -> None:
    def turn(command: str) -> None:
        stub.enqueue(bash(command))
        term.send_turn(f"run {command}")

    turn("echo one")
    assert _prompt(term).endswith('[a]lways for "echo ...": ')
    term.keys("a\r")
    term.child.expect_exact("Tool results: [bash] one")
    turn("echo two")  # the same first word: not asked
    asked = term.child.expect([r"Allow bash\?", re.escape("Tool results: [bash] two")])
    assert asked == 1, "asked again for the same first word"
    turn("touch made-by-ls")  # another word: asked
    assert _prompt(term).endswith('[a]lways for "touch ...": ')
    term.keys("n\r")
    term.child.expect_exact("[tool refused bash]")
    term.child.expect_exact("Tool results: [bash] Error:")
    turn("echo three; touch sneaky")  # the word, and more: asked, no [a]
    assert _prompt(term).endswith(" [y]es / [N]o: ")
    term.keys("n\r")
    term.child.expect_exact("[tool refused bash]")
    assert term.leave() == 0
    assert term.decisions() == ["allowed-always", "allowed-always", "rejected", "rejected"]
    assert not (workdir / "made-by-ls").exists() and not (workdir / "sneaky").exists()


def test_the_diff_is_coloured_on_a_colour_terminal(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    env = dict(dsh_env, TERM="xterm-256color")
    term = spawn_terminal(DSH, env, workdir, home)
    try:
        term.child.expect_exact("Ctrl-D leaves.")
        term.keys("tooledit\r")  # the prompt is drawn with cursor moves here, not as "> "
        term.child.expect_exact("\x1b[31m-Hello from the dsh demo.\x1b[0m\r\n")
        term.child.expect_exact("\x1b[32m+Hello again from the dsh demo.\x1b[0m\r\n")
        term.child.expect_exact("Allow edit?")
        term.keys("n\r")
        term.child.expect_exact("[tool refused edit]")
    finally:
        term.child.close(force=True)
    assert term.decisions() == ["rejected"]
