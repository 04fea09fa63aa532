"""SPEC 17, attention: a bell (or OSC 9, or nothing: ``notify`` in ``config.toml``) when a
question waits or a turn that ran longer than 10 s ends; on a real pty (pexpect)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from dsh_stdio.config_file import ConfigFileError, read_settings
from dsh_stdio.terminal.bell import LONG_TURN_SECONDS, Attention
from tests.dsh_stdio.test_agent_terminal import Terminal, bash, spawn_terminal
from tests.support import DSH

OSC9_QUESTION = "\x1b]9;dsh: a question waits for your answer\x07"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_only_a_long_turn_rings_and_only_on_a_terminal() -> None:
    out = _Tty()
    attention = Attention("bell", out)
    attention.turn_ended(LONG_TURN_SECONDS - 0.5)
    assert out.getvalue() == ""
    attention.turn_ended(LONG_TURN_SECONDS + 0.5)
    assert out.getvalue() == "\a"
    piped = io.StringIO()
    Attention("bell", piped).question()
    assert piped.getvalue() == ""  # a file or a pipe: nobody to call


@pytest.mark.parametrize(
    ("text", "notify"), [("", "bell"), ('notify = "osc9"\n', "osc9"), ('notify = "off"', "off")]
)
def test_notify_in_the_config_file(tmp_path: Path, text: str, notify: str) -> None:
    (tmp_path / "config.toml").write_text(text)
    assert read_settings(tmp_path, {}).notify == notify


def test_a_notify_that_is_none_of_the_ways_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('\nnotify = "loud"\n')
    with pytest.raises(ConfigFileError, match=r"line 2: notify: must be one of 'bell', 'osc9'"):
        read_settings(tmp_path, {})


def _question(env: dict[str, str], stub: StubServer, workdir: Path, home: Path) -> Terminal:
    """dsh asking about a ``bash`` call; what it sent until its prompt line is on screen."""
    stub.enqueue(bash("true"))
    term = spawn_terminal(DSH, env, workdir, home)
    term.send_turn("run it")
    term.child.expect(r"Allow bash\?")
    return term


def _written_before_question(term: Terminal) -> str:
    return term.screen.getvalue().split("run it", 1)[1].split("Allow bash?")[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "rung"), [(None, "\a"), ('notify = "osc9"', OSC9_QUESTION), ('notify = "off"', "")]
)
def test_a_waiting_question_calls_the_person(
    dsh_env: dict[str, str],
    stub: StubServer,
    workdir: Path,
    home: Path,
    config: str | None,
    rung: str,
) -> None:
    if config is not None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(config + "\n")
    term = _question(dsh_env, stub, workdir, home)
    try:
        term.keys("n\r")
        term.child.expect_exact("[tool refused bash]")
        assert term.leave() == 0
    finally:
        term.child.close(force=True)
    before = _written_before_question(term)
    assert before.count("\x07") == rung.count("\x07")
    assert rung in before


@pytest.mark.slow
def test_a_turn_longer_than_ten_seconds_rings_when_it_ends(
    dsh_env: dict[str, str], stub: StubServer, workdir: Path, home: Path
) -> None:
    quick = "A quick one."
    slow = "Long awaited."  # 13 pieces, 0.85 s apart: 11 s
    stub.enqueue(Answer(quick), Answer(slow, chunk_size=1, delay=0.85))
    term = spawn_terminal(DSH, dsh_env, workdir, home)
    try:
        term.send_turn("quick")
        term.child.expect_exact(quick)
        term.child.expect_exact("tokens in")
        term.send_turn("slow")
        term.child.expect_exact(slow)
        term.child.expect_exact("tokens in")
        term.child.expect_exact("\x07")
        assert term.leave() == 0
    finally:
        term.child.close(force=True)
    screen = term.screen.getvalue()
    assert "\x07" not in screen.split(slow, 1)[0]  # the quick turn: no bell
    assert screen.count("\x07") == 1
