"""SPEC section 12, on the real ``dsh`` process: what a first week with dsh tripped over.

Pipe behaviour runs ``dsh`` on real pipes; terminal behaviour on a pseudo-terminal (pexpect,
``TERM=dumb``). Every wait is for something dsh shows or writes, never for a time.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

import pexpect
import pytest

from dsh_core.testing import HttpError, StubServer
from tests.dsh_stdio.test_agent_pipe import run_dsh
from tests.dsh_stdio.test_agent_terminal import PROMPT, Terminal, bash, spawn_terminal
from tests.reliability.faults import FaultServer, read_request
from tests.support import DSH, HANG_GUARD, assert_no_canary, child_env

pytestmark = pytest.mark.slow

SESSION_ID = r"\d{8}-\d{6}-[0-9a-f]{6}"


# -- helpers ----------------------------------------------------------------------------------


def events(home: Path, kind: str) -> list[dict[str, Any]]:
    """The ``data`` of every ``kind`` event in the one session log under ``home``."""
    (log,) = home.rglob("session.jsonl")
    lines = log.read_text().splitlines()[1:]
    return [event["data"] for event in map(json.loads, lines) if event["type"] == kind]


def session_of(stderr: str) -> str:
    """The id in the ``dsh: session <id> (dsh -r <id> to resume)`` line."""
    [line] = [line for line in stderr.splitlines() if line.startswith("dsh: session ")]
    return line.split()[2]


# -- a resumed session runs where it was started ------------------------------------------------


def test_a_session_resumed_from_another_directory_runs_in_its_own(
    dsh_env: dict[str, str], home: Path, tmp_path: Path, stub: StubServer
) -> None:
    started, elsewhere = tmp_path / "started", tmp_path / "elsewhere"
    started.mkdir()
    elsewhere.mkdir()
    first = run_dsh(dsh_env, started, stdin="hello\n")
    session = session_of(first.stderr)

    stub.enqueue(bash("pwd"))
    result = run_dsh(dsh_env, elsewhere, "-r", session, "--allow", "shell", stdin="where am I\n")
    assert result.returncode == 0, result.stderr
    assert f"dsh: session {session} was started in {started}: running there\n" in result.stderr
    [*_, outcome] = events(home, "tool/result")
    assert outcome["content"] == f"{started}\n"  # the command ran there, not in elsewhere
    system = stub.requests[-1]["messages"][0]
    assert system["role"] == "system"
    assert f"working directory: {started}" in system["content"].lower()


def test_a_session_whose_directory_is_gone_is_refused_with_the_way_out(
    dsh_env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    started, elsewhere = tmp_path / "started", tmp_path / "elsewhere"
    started.mkdir()
    elsewhere.mkdir()
    session = session_of(run_dsh(dsh_env, started, stdin="hello\n").stderr)
    started.rmdir()
    result = run_dsh(dsh_env, elsewhere, "-r", session, stdin="hello again\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"dsh: startup failed: session {session} was started in {started}, which cannot be "
        "entered now; start a new session (dsh without -r), or restore that directory: "
        f"[Errno 2] No such file or directory: {str(started)!r}\n"
    )
    assert [data["text"] for data in events(home, "user/message")] == ["hello"]


# -- pipes: stop after a failure every line would meet; a reader that goes away -------------------


@pytest.mark.parametrize(("word", "code"), [("auth", "AUTH"), ("quota", "QUOTA")])
def test_a_pipe_stops_sending_after_auth_or_quota(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer, word: str, code: str
) -> None:
    before = len(stub.requests)
    result = run_dsh(dsh_env, workdir, stdin=f"hello\n{word}\nthird\nfourth\n")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "You said: hello"
    assert lines[1].startswith(f"[turn failed {code}] ")
    assert len(lines) == 2
    assert (
        f"dsh: stopped reading input after {code}: the remaining lines were not sent\n"
        in result.stderr
    )
    assert len(stub.requests) - before == 2  # third and fourth never left
    assert [data["text"] for data in events(home, "user/message")] == ["hello", word]


def test_a_closed_stdout_ends_the_turn_as_aborted_output_closed(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    # `dsh long | head -c 50`: the answer (about 95 KB) outgrows the pipe, so dsh is still
    # writing when its reader goes away.
    with subprocess.Popen(
        [*DSH, "long"],
        cwd=workdir,
        env=dsh_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        head = process.stdout.read(50)
        process.stdout.close()
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=HANG_GUARD)
    assert status == 1, stderr  # not -13: no death by SIGPIPE
    assert len(head) == 50
    assert "dsh: cannot write to standard output: [Errno 32] Broken pipe\n" in stderr
    assert events(home, "turn/end")[-1] == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": "output closed"},
    }
    [answer] = events(home, "assistant/message")
    assert answer["interrupted"] is True


# -- a base URL that is not a chat-completions API ----------------------------------------------


def test_a_501_is_not_retried_and_says_to_check_the_base_url(home: Path, workdir: Path) -> None:
    with StubServer() as server:
        server.enqueue(HttpError(501, "Not Implemented"))
        result = run_dsh(child_env(server.url, home), workdir, stdin="hello\n")
        requests = len(server.requests)
    assert result.returncode == 1
    assert result.stdout == (
        "[turn failed SERVER] DeepSeek API returned HTTP 501 Not Implemented: Not Implemented "
        "(next: check --base-url: dsh adds /chat/completions to it)\n"
    )
    assert "retrying" not in result.stderr
    assert requests == 1


def _server_error(conn: socket.socket, server: FaultServer) -> None:
    """Any path, any method: 503, and the connection closed (one connection per request)."""
    read_request(conn)
    conn.sendall(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )


def test_a_base_url_ending_in_chat_completions_is_not_retried_and_says_so(
    home: Path, workdir: Path
) -> None:
    with FaultServer(_server_error) as server:
        base_url = f"{server.url}/v1/chat/completions"
        result = run_dsh(child_env(base_url, home), workdir, stdin="hello\n")
        connections = server.connections
    assert result.returncode == 1
    assert connections == 1  # a 503 is retried; to this URL, never
    assert "retrying" not in result.stderr
    assert result.stderr.startswith(
        f"dsh: the base URL {base_url} ends in /chat/completions, which dsh adds itself\n"
    )
    assert result.stdout.startswith("[turn failed SERVER] DeepSeek API returned HTTP 503")


def test_failed_turns_end_with_a_next_step(home: Path, workdir: Path) -> None:
    # Nothing listens on the port: TRANSPORT. (AUTH and QUOTA: the golden transcript.)
    with StubServer() as server:
        url = server.url
    result = run_dsh(child_env(url, home), workdir, stdin="hello\n")
    assert result.returncode == 1
    assert result.stdout.startswith(f"[turn failed TRANSPORT] DeepSeek API request to {url} ")
    assert result.stdout.endswith(
        " (next: check --base-url, the network and HTTPS_PROXY, then try again)\n"
    )


def test_the_step_limit_names_itself_and_its_flag(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    result = run_dsh(dsh_env, workdir, "--max-steps", "2", stdin="toolloop\n")
    assert result.returncode == 0, result.stderr
    line = (
        "[turn stopped at the step limit] 2 steps "
        "(next: send a message to go on, or raise --max-steps)\n"
    )
    assert result.stdout.endswith(line)
    shown = run_dsh(dsh_env, workdir, "--show", "last")
    assert shown.stdout.endswith(line)  # the transcript says what the pipe said


# -- sessions: header, prefixes, --quiet, the demo ------------------------------------------------


def test_sessions_have_a_header_and_ids_may_be_shortened(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    first = session_of(run_dsh(dsh_env, workdir, stdin="hello\n").stderr)
    listing = run_dsh(dsh_env, workdir, "--sessions")
    header, row = listing.stdout.splitlines()
    assert header.split() == [
        "SESSION",
        "LAST",
        "ACTIVITY",
        "TURNS",
        "LAST",
        "TURN",
        "FIRST",
        "MESSAGE",
    ]
    assert row.startswith(first)

    prefix = first[:17]  # the date, the time, and one character of the random tail
    shown = run_dsh(dsh_env, workdir, "--show", prefix)
    assert (shown.returncode, shown.stdout) == (0, "> hello\nYou said: hello\n")
    resumed = run_dsh(dsh_env, workdir, "-r", prefix, stdin="again\n")
    assert resumed.returncode == 0, resumed.stderr
    assert session_of(resumed.stderr) == first

    unknown = run_dsh(dsh_env, workdir, "--show", "nosuchid")
    assert unknown.returncode == 2
    assert unknown.stderr == (
        f"dsh: startup failed: no session 'nosuchid' in {home / 'sessions'} "
        "(dsh --sessions --all lists them)\n"
    )


def test_an_ambiguous_prefix_names_the_sessions_it_could_be(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    ids = sorted(session_of(run_dsh(dsh_env, workdir, stdin=f"{n}\n").stderr) for n in "ab")
    first, second = ids
    common = next(first[:n] for n in range(len(first), 0, -1) if second.startswith(first[:n]))
    result = run_dsh(dsh_env, workdir, "-r", common, stdin="which?\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"dsh: startup failed: {common!r} is the start of 2 session ids "
        f"({ids[0]}, {ids[1]}): type more of the id\n"
    )


def test_quiet_drops_the_usage_and_session_notices(dsh_env: dict[str, str], workdir: Path) -> None:
    loud = run_dsh(dsh_env, workdir, stdin="hello\n")
    assert "dsh: tokens in " in loud.stderr and "dsh: session " in loud.stderr
    quiet = run_dsh(dsh_env, workdir, "--quiet", stdin="hello\n")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "You said: hello\n", "")


def test_the_demo_does_not_offer_to_resume_the_session_it_deletes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    result = run_dsh(env, tmp_path, "--demo", stdin="hello\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: hello\n"
    assert "dsh -r" not in result.stderr
    assert result.stderr.endswith(
        "dsh demo: over; its temporary directory and sessions are removed\n"
    )


# -- a local server without a key -----------------------------------------------------------------


def test_a_loopback_base_url_needs_no_key(home: Path, workdir: Path) -> None:
    with StubServer(key_required=False) as server:
        env = child_env(server.url, home)
        del env["DEEPSEEK_API_KEY"]
        result = run_dsh(env, workdir, stdin="hello\n")
        headers = server.headers
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: hello\n"
    assert [name for name in headers[0] if name == "authorization"] == []


def test_a_remote_base_url_still_needs_a_key(home: Path, workdir: Path) -> None:
    env = child_env("https://api.example.com", home)
    del env["DEEPSEEK_API_KEY"]
    result = run_dsh(env, workdir, stdin="hello\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: DEEPSEEK_API_KEY is not set")


# -- one-shot at a terminal asks there -----------------------------------------------------------


def test_one_shot_at_a_terminal_asks_on_it(
    dsh_env: dict[str, str], home: Path, workdir: Path
) -> None:
    # stdout goes to a file, the question to the terminal: the answer file holds the answer.
    script = f"{shlex.join([*DSH, 'toolbash'])} > answer.txt; echo status=$?"
    term = spawn_terminal(["bash", "-c", script], dsh_env, workdir, home)
    try:
        term.expect_question("bash", "$ ls -la")
        term.keys("y\r")
        term.child.expect_exact("status=0")
        term.child.expect(pexpect.EOF)
    finally:
        term.child.close(force=True)
    assert (workdir / "answer.txt").read_text().startswith("Tool results: [bash] total ")
    assert [data["outcome"] for data in events(home, "approval/decided")] == ["allowed"]
    assert_no_canary(home, term.screen.getvalue())


# -- tools on a terminal ------------------------------------------------------------------------


def test_a_running_command_shows_a_live_line_then_its_last_lines(
    term: Terminal, stub: StubServer, workdir: Path
) -> None:
    # The command waits for a file that the test makes once the live line is on screen.
    command = "while [ ! -e go ]; do sleep 0.05; done; seq 1 7"
    stub.enqueue(bash(command))
    term.send_turn("count")
    term.expect_question("bash", f"$ {command}")
    term.keys("y\r")
    term.child.expect(r"… bash running \d+ s \(Ctrl-C to stop\)")
    (workdir / "go").touch()
    term.child.expect_exact("[tool bash exit 0] 7 lines\r\n")
    term.child.expect_exact("  3\r\n  4\r\n  5\r\n  6\r\n  7\r\n")  # the last five
    term.child.expect_exact("Tool results: [bash] 1")
    assert term.leave() == 0


def test_an_edit_allowed_always_still_shows_its_diff(term: Terminal, workdir: Path) -> None:
    term.send_turn("tooledit")
    term.expect_question("edit", "demo.txt")
    term.keys("a\r")
    term.child.expect_exact("[tool edit done]")
    term.send_turn("tooledit again")
    term.child.expect_exact("[tool edit] demo.txt\r\n")
    term.child.expect_exact(
        "--- a/demo.txt\r\n+++ b/demo.txt\r\n@@ -1,2 +1,2 @@\r\n"
        "-Hello again from the dsh demo.\r\n+Hello again again from the dsh demo.\r\n"
    )
    term.child.expect_exact("[tool edit done]")
    assert term.leave() == 0
    assert (workdir / "demo.txt").read_text().startswith("Hello again again from")


# -- leaving, Ctrl-C, /help, /session -------------------------------------------------------------


@pytest.mark.parametrize("line", ["/quit", "exit", "quit"])
def test_quit_and_exit_leave(term: Terminal, line: str) -> None:
    term.send_turn(line)
    term.child.expect(pexpect.EOF)
    term.child.close()
    assert term.child.exitstatus == 0


def test_ctrl_c_at_an_empty_prompt_says_how_to_leave_and_help_lists_slashes(
    term: Terminal,
) -> None:
    term.child.expect_exact(PROMPT)
    term.keys("\x03")
    term.child.expect_exact("dsh: Ctrl-C clears the line; to leave: Ctrl-D on an empty line")
    term.send_turn("/help")
    term.child.expect(r"//TEXT +send a message that starts with /")
    assert term.leave() == 0


def test_session_shows_model_url_directory_sandbox_and_grants(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    term = spawn_terminal([*DSH, "--allow", "write", "-m", "some-model"], dsh_env, workdir, home)
    try:
        term.send_turn("/session")
        term.child.expect(rf"session +{SESSION_ID}\r\n")
        term.child.expect(r"log +\S+session\.jsonl\r\n")
        term.child.expect_exact("some-model\r\n")
        term.child.expect(rf"base URL +{stub.url}\r\n")
        term.child.expect(rf"directory +{workdir}\r\n")
        term.child.expect(r"sandbox +\S")
        term.child.expect_exact("grants     --allow: write; always this session: none\r\n")
        assert term.leave() == 0
    finally:
        term.child.close(force=True)
