"""The approval question on a real terminal (SPEC 12): what a first week with dsh tripped over.

The default is visible and Enter takes it; any other answer asks again; ``n`` may carry a
reason the model receives; ``[a]`` for ``bash`` covers only commands with the same first word;
the diff is coloured on a colour terminal. Here, the colour, which needs a colour terminal
(pexpect, ``TERM=xterm-256color``); the answers run in-process in ``test_terminal.py``, and
layouts and answers in detail are ``test_approve.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dsh_stdio.test_agent_terminal import Terminal, spawn_terminal
from tests.support import DSH

pytestmark = pytest.mark.slow


def _prompt(term: Terminal) -> str:
    """The question's prompt line, once it is on screen."""
    term.child.expect(r"Allow [^\r\n]*: ")
    return str(term.child.after)


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
