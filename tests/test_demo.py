"""The offline demo runs the real front door against the bundled stub, with no key.

On a pipe, ``dsh --demo`` runs in-process (``tests/harness.py``); on a terminal, the installed
``dsh --demo`` and ``scripts/demo_repl.py`` run as processes on a pseudo-terminal.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from dsh_core.testing import ManualClock
from tests.dsh_stdio.test_agent_terminal import SANDBOX_NOTE, Terminal, spawn_terminal
from tests.harness import run_in_process

DEMO = [sys.executable, str(Path(__file__).parent.parent / "scripts" / "demo_repl.py")]
DSH_DEMO = [str(Path(sys.executable).parent / "dsh"), "--demo"]
"""The installed ``dsh`` script, as a user starts the demo."""


def demo_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env["DSH_HOME"] = str(tmp_path / "home")
    return env


def test_demo_on_a_pipe(tmp_path: Path) -> None:
    result = run_in_process(demo_env(tmp_path), "--demo", stdin="hello\nlimit\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "You said: hello\n"
        "This answer is cut short by the output token lim\n"
        "[turn stopped at the output token limit]\n"
    )
    assert "dsh demo: stub server at http://127.0.0.1:" in result.stderr
    assert "fail" in result.stderr  # the banner lists the trigger words


def test_a_bad_flag_is_refused_before_the_demo_starts(tmp_path: Path) -> None:
    result = run_in_process(demo_env(tmp_path), "--demo", "--bogus", stdin="hello\n")
    assert (result.returncode, result.stdout) == (2, "")
    refused = "dsh: startup failed: unrecognized arguments: --bogus (see dsh --help)\n"
    assert result.stderr == refused


def test_demo_down_shows_the_transport_chain(tmp_path: Path) -> None:
    clock = ManualClock(autojump=True)  # four retries: their waits, in no time
    result = run_in_process(demo_env(tmp_path), "--demo", "--down", stdin="hello\n", clock=clock)
    assert result.returncode == 1
    assert re.fullmatch(
        r"\[turn failed TRANSPORT\] DeepSeek API request to http://127\.0\.0\.1:(\d+) failed: "
        r"All connection attempts failed: \[Errno 111\] Connect call failed "
        r"\('127\.0\.0\.1', \1\) \(next: check --base-url, the network and HTTPS_PROXY, "
        r"then try again\)\n",
        result.stdout,
    ), result.stdout
    assert result.stderr.count("retrying in") == 4


# -- on a terminal -------------------------------------------------------------------------------


def demo_terminal(argv: list[str], tmp_path: Path) -> Terminal:
    env = demo_env(tmp_path) | {"TERM": "dumb", "PROMPT_TOOLKIT_NO_CPR": "1"}
    return spawn_terminal(argv, env, tmp_path, tmp_path / "home")


def leave_demo(term: Terminal) -> None:
    """Ctrl-D: the demo ends with 0, and offers no session to resume: its directory is gone."""
    assert term.leave() == 0
    assert "dsh demo: over; its temporary directory is removed\r\n" in term.child.before
    assert "dsh -r" not in term.child.before


@pytest.mark.slow
@pytest.mark.parametrize("argv", [DSH_DEMO, DEMO], ids=["dsh --demo", "scripts/demo_repl.py"])
def test_demo_asks_before_running_a_command(argv: list[str], tmp_path: Path) -> None:
    term = demo_terminal(argv, tmp_path)
    try:
        term.child.expect_exact("dsh demo: stub server at http://127.0.0.1:")
        term.child.expect(r"toolbash +a bash call")  # the banner lists the tool triggers
        term.send_turn("toolbash")
        term.child.expect(rf"\[tool bash\] \$ ls -la{SANDBOX_NOTE}\r\n")
        term.expect_question("bash", "$ ls -la")
        term.keys("y\r")
        term.child.expect(r"\[tool bash exit 0\] \d+ lines\r\n")
        term.child.expect_exact("Tool results: [bash] total")  # the model's answer
        leave_demo(term)
    finally:
        term.child.close(force=True)


@pytest.mark.slow
def test_demo_long_deltas(tmp_path: Path) -> None:
    term = demo_terminal([*DSH_DEMO, "--long-deltas", "50"], tmp_path)
    try:
        term.child.expect_exact("(20,000 deltas unless --long-deltas says)")
        term.send_turn("long")
        # 50 deltas of a nine-word cycle: five whole sentences and five words.
        term.child.expect(r"(?:the quick brown fox jumps over a lazy dog\. ){5}")
        term.child.expect_exact("the quick brown fox jumps \r\n")
        term.child.expect(r"tokens in \d+ \(cached \d+\) / out 50, ")
        leave_demo(term)
    finally:
        term.child.close(force=True)
