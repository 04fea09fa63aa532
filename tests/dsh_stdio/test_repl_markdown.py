"""SPEC 17, Markdown in the scrollback: on a colour pty (pexpect, ``TERM=xterm-256color``) an
answer's finished blocks come out rendered; with ``NO_COLOR``, ``--plain`` and on a pipe the
bytes are the model's, and the log and ``--show`` into a pipe keep the raw text."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_terminal import Terminal, spawn_terminal
from tests.harness import run_in_process
from tests.support import DSH

ANSWER = (
    "# Plan\n\nFirst *this*, then **that**.\n\n```python\ndef f(x):\n    return x + 1\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\nDone.\n"
)
BANNER = "Ctrl-D leaves."


def colour_terminal(env: dict[str, str], workdir: Path, home: Path, *args: str) -> Terminal:
    term = spawn_terminal([*DSH, *args], dict(env, TERM="xterm-256color"), workdir, home)
    term.child.expect_exact(BANNER)
    return term


def leave(term: Terminal) -> int:
    """Ctrl-D at the prompt; the exit status."""
    term.keys("\x04")
    term.child.expect(pexpect.EOF)
    term.child.close()
    return int(term.child.exitstatus)


def ask(term: Terminal, line: str) -> None:
    """Type ``line`` and Enter at the prompt (drawn with cursor moves here, not as ``> ``)."""
    term.keys(line + "\r")


@pytest.mark.slow
def test_a_code_block_is_highlighted_and_a_heading_styled(
    dsh_env: dict[str, str], stub: StubServer, workdir: Path, home: Path
) -> None:
    stub.enqueue(Answer(ANSWER, chunk_size=3))
    term = colour_terminal(dsh_env, workdir, home)
    try:
        ask(term, "plan it")
        term.child.expect_exact("\x1b[1;4mPlan\x1b[0m")  # the heading: bold, underlined
        term.child.expect_exact("\x1b[3mthis\x1b[0m")  # emphasis: italic
        term.child.expect(r"\x1b\[38;5;\d+;49mdef\x1b\[0m")  # python's keyword, coloured
        term.child.expect_exact("Done.")
        term.child.expect_exact("tokens in")
    finally:
        term.child.close(force=True)
    answer = term.screen.getvalue().split("plan it")[-1]
    assert "```" not in answer.split("\x1b[J")[-1]  # the fence's marks were plain, then erased


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "args"), [({"NO_COLOR": "1"}, ()), ({}, ("--plain",))])
def test_no_color_and_plain_show_the_text_as_it_came(
    dsh_env: dict[str, str],
    stub: StubServer,
    workdir: Path,
    home: Path,
    extra: dict[str, str],
    args: tuple[str, ...],
) -> None:
    stub.enqueue(Answer(ANSWER, chunk_size=3))
    term = colour_terminal(dict(dsh_env, **extra), workdir, home, *args)
    try:
        ask(term, "plan it")
        term.child.expect_exact(ANSWER.replace("\n", "\r\n"))  # the pty's ONLCR, nothing else
        term.child.expect_exact("tokens in")
        assert leave(term) == 0
    finally:
        term.child.close(force=True)


def test_a_pipe_the_log_and_show_keep_the_raw_text(
    dsh_env: dict[str, str], stub: StubServer, workdir: Path
) -> None:
    stub.enqueue(Answer(ANSWER))
    run = run_in_process(dsh_env, stdin="plan it\n", cwd=workdir)
    assert run.returncode == 0
    assert run.stdout_bytes == ANSWER.encode()
    [message] = run.of_type("assistant/message")
    assert message["text"] == ANSWER
    shown = run_in_process(dsh_env, "--show", "last", cwd=workdir)
    assert ANSWER in shown.stdout
    assert not re.search(rb"\x1b", shown.stdout_bytes)


@pytest.mark.slow
def test_what_is_printed_above_the_answer_stays(
    dsh_env: dict[str, str], stub: StubServer, workdir: Path, home: Path
) -> None:
    """The erasing of a plain tail never reaches above it: a 24-row screen, an answer with
    paragraphs of many rows, and the question still on the screen, read by a terminal
    emulator at the end."""
    import pyte

    paragraph = " ".join(f"word{n}" for n in range(60))
    stub.enqueue(Answer(f"{paragraph}\n\n- {paragraph}\n\n`x`\n", chunk_size=5))
    term = spawn_terminal([*DSH], dict(dsh_env, TERM="xterm-256color"), workdir, home)
    term.child.setwinsize(24, 80)
    try:
        term.child.expect_exact(BANNER)
        ask(term, "question-marker")
        term.child.expect_exact("tokens in")
    finally:
        term.child.close(force=True)
    screen = pyte.Screen(80, 24)
    pyte.Stream(screen).feed(term.screen.getvalue())
    shown = "\n".join(screen.display)
    assert "question-marker" in shown
    assert shown.count("word59") == 2  # each paragraph once: no plain copy left behind
