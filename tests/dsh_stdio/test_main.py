"""``dsh`` from the command line to its exit status, in-process (``tests/harness.py``).

Startup failures, one-shot mode, resuming (here or from another directory), the session's name,
the system prompt, stopping a pipe after a failure every line would meet, next steps on failed
turns, ``--sessions``/``--show`` ids, ``--quiet``, a keyless local server: each through
``dsh_stdio.__main__.main`` with the environment, working directory and input a child would
have. What needs a real process (signals, a SIGKILL, closed or full standard streams, a
terminal) stays in ``test_process.py``, ``test_terminal_habits.py`` and
``test_session_context.py``.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from dsh_core.clock import LOOP_CLOCK, Clock
from dsh_core.testing import HttpError, ManualClock, StubServer, closed_port
from tests.dsh_stdio.test_process import session_events
from tests.dsh_stdio.test_session_context import NAMED, system_of
from tests.dsh_stdio.test_terminal_habits import events, session_of
from tests.harness import run_in_process
from tests.reliability.faults import FaultServer, read_request
from tests.support import Run, child_env


def run_dsh(
    env: dict[str, str], cwd: Path, *args: str, stdin: str = "", clock: Clock = LOOP_CLOCK
) -> Run:
    """dsh in-process in ``cwd``, with ``stdin`` as its input."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd, clock=clock)


# Startup failures: one line on stderr, exit 2, nothing on stdout.


def test_no_key(dsh_env: dict[str, str]) -> None:
    del dsh_env["DEEPSEEK_API_KEY"]
    dsh_env["DEEPSEEK_BASE_URL"] = "https://api.deepseek.invalid"  # loopback needs no key
    result = run_in_process(dsh_env, stdin=b"hello\n")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "dsh: startup failed: DEEPSEEK_API_KEY is not set: export your DeepSeek API key, "
        "or try the offline demo: dsh --demo\n"
    )


def test_bad_flag_value(dsh_env: dict[str, str]) -> None:
    result = run_in_process(dsh_env, "--max-tokens", "lots")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "dsh: startup failed: --max-tokens must be a positive integer, not 'lots'\n"
    )


def test_unknown_flag(dsh_env: dict[str, str]) -> None:
    result = run_in_process(dsh_env, "--frobnicate")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: unrecognized arguments: --frobnicate")
    assert result.stderr.count("\n") == 1


def test_unusable_home(dsh_env: dict[str, str], tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = run_in_process(dsh_env, "--home", str(not_a_dir), stdin=b"hello\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: ")
    assert "Not a directory" in result.stderr
    assert result.stderr.count("\n") == 1


def test_unknown_session(dsh_env: dict[str, str]) -> None:
    result = run_in_process(dsh_env, "--resume", "no-such-session", stdin=b"hello\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: ")
    assert "no-such-session" in result.stderr


def test_refused_session_log(dsh_env: dict[str, str], home: Path) -> None:
    assert run_in_process(dsh_env, stdin=b"one\ntwo\n").returncode == 0
    (log,) = home.rglob("session.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = b"{not json\n"
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    result = run_in_process(dsh_env, "--continue", stdin=b"three\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: ")
    assert f"{log} is damaged at line 4" in result.stderr
    assert log.read_bytes() == before  # refused, not rewritten


# One-shot mode, --continue, --show-reasoning.


def test_one_shot_appends_piped_stdin(dsh_env: dict[str, str], stub: StubServer) -> None:
    result = run_in_process(dsh_env, "review", "this", stdin=b"diff --git a b\n+line\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: review this\n\ndiff --git a b\n+line\n"
    assert stub.requests[-1]["messages"][-1]["content"] == (
        "review this\n\ndiff --git a b\n+line\n"
    )


def test_one_shot_failure_exit_status(dsh_env: dict[str, str]) -> None:
    dsh_env["DEEPSEEK_BASE_URL"] = f"http://127.0.0.1:{(port := closed_port())}"
    clock = ManualClock(autojump=True)  # the retries' waits, in no time
    result = run_in_process(dsh_env, "hello", clock=clock)
    assert result.returncode == 1
    assert len(clock.slept) == 4  # a refused connection is retried, four times
    assert result.stdout == (
        f"[turn failed TRANSPORT] DeepSeek API request to http://127.0.0.1:{port} failed: "
        "All connection attempts failed: [Errno 111] Connect call failed "
        f"('127.0.0.1', {port}) (next: check --base-url, the network and HTTPS_PROXY, "
        "then try again)\n"
    )
    assert "Traceback" not in result.stderr


def test_continue_without_a_session_starts_one(dsh_env: dict[str, str]) -> None:
    result = run_in_process(dsh_env, "--continue", stdin=b"hi\n")
    assert result.returncode == 0
    assert result.stdout == "You said: hi\n"
    assert "no session yet" in result.stderr


def test_one_shot_oversized_piped_stdin_is_rejected(dsh_env: dict[str, str]) -> None:
    result = run_in_process(dsh_env, "review", stdin=b"x" * (300 * 1024))
    assert result.returncode == 1
    assert result.stdout == (
        "[turn rejected] the message is 300.1 KiB, over the limit of 256 KiB per message: "
        "shorten it, or send it in parts\n"
    )


def test_show_reasoning_goes_to_stderr_set_apart(dsh_env: dict[str, str]) -> None:
    result = run_in_process(dsh_env, "--show-reasoning", stdin=b"think about it\n")
    assert result.returncode == 0
    assert result.stdout == "The answer, after some thought: 42.\n"
    assert result.stderr.startswith(
        "The user wants an answer. Let me think step by step... 6 x 7 = 42.\ndsh: tokens in "
    )


def test_a_run_without_turns_leaves_no_session_behind(dsh_env: dict[str, str], home: Path) -> None:
    assert run_in_process(dsh_env, stdin=b"remember this\n").returncode == 0
    assert run_in_process(dsh_env, stdin=b"").returncode == 0  # started and left without a turn
    assert len(list(home.rglob("session.jsonl"))) == 1
    result = run_in_process(dsh_env, "--continue", stdin=b"and this\n")
    assert result.stdout == "You said: and this\n"
    assert [e["type"] for e in session_events(home)].count("user/message") == 2


# The session's name and its system prompt.


def test_pipe_and_one_shot_runs_name_their_session(
    dsh_env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    piped = run_in_process(dsh_env, stdin=b"hello\n", cwd=tmp_path)
    match = NAMED.search(piped.stderr)
    assert match is not None and piped.stderr.endswith(match.group(0))
    (log,) = home.rglob("session.jsonl")
    assert log.parent.name == match.group(1)
    again = run_in_process(dsh_env, "-r", match.group(1), "and again", cwd=tmp_path)
    assert NAMED.search(again.stderr) is not None
    assert again.stdout == "You said: and again\n"
    # A run without any turn keeps no session, and names none.
    empty = run_in_process(dsh_env, stdin=b"", cwd=tmp_path)
    assert NAMED.search(empty.stderr) is None


def test_the_system_prompt_has_the_agents_files_and_is_recorded_once(
    dsh_env: dict[str, str], stub: StubServer, home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Run the tests with make check.\n")
    work = repo / "src"
    work.mkdir()
    (work / "AGENTS.md").write_text("Code here is typed.\n")
    run_in_process(dsh_env, stdin=b"first\n", cwd=work)
    prompt = system_of(stub.requests[-1])
    assert f"Working directory: {work}" in prompt
    assert prompt.index("Run the tests with make check.") < prompt.index("Code here is typed.")
    (log,) = home.rglob("session.jsonl")
    records = [json.loads(line) for line in log.read_bytes().splitlines()[1:]]
    assert records[0]["type"] == "system/prompt"
    assert records[0]["data"]["text"] == prompt
    # A resume sends the recorded prompt, whatever the files say now.
    (repo / "AGENTS.md").write_text("Something else entirely.\n")
    run_in_process(dsh_env, "-c", stdin=b"second\n", cwd=work)
    assert system_of(stub.requests[-1]) == prompt
    assert sum(1 for line in log.read_bytes().splitlines() if b'"system/prompt"' in line) == 1


def test_dash_s_replaces_the_first_part_and_keeps_the_files(
    dsh_env: dict[str, str], stub: StubServer, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("Be terse.\n")
    run_in_process(dsh_env, "-s", "You are a pirate.", "ahoy", cwd=tmp_path)
    prompt = system_of(stub.requests[-1])
    assert prompt.startswith("You are a pirate.")
    assert "Working directory" not in prompt
    assert "Be terse." in prompt


def test_a_bad_agents_file_is_named_and_the_run_goes_on(
    dsh_env: dict[str, str], stub: StubServer, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"\x00\x01binary\xff" * 100)
    result = run_in_process(dsh_env, "hello", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == "You said: hello\n"
    assert "AGENTS.md" in result.stderr and "Traceback" not in result.stderr


# SPEC 12 on a pipe: where a resumed session runs, when a pipe stops, next steps, ids.


def test_a_session_resumed_from_another_directory_on_a_pipe_is_refused_with_the_way_out(
    dsh_env: dict[str, str], home: Path, tmp_path: Path, stub: StubServer
) -> None:
    # SPEC 10.14: a person confirms a directory that is not this one; on a pipe nobody can
    # (tests/security/test_r14_dsh_home.py asks on a terminal, and runs there after a yes).
    started, elsewhere = tmp_path / "started", tmp_path / "elsewhere"
    started.mkdir()
    elsewhere.mkdir()
    first = run_dsh(dsh_env, started, stdin="hello\n")
    session = session_of(first.stderr)
    result = run_dsh(dsh_env, elsewhere, "-r", session, stdin="where am I\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert f"to resume it there: cd {started} && dsh -r {session}\n" in result.stderr
    resumed = run_dsh(dsh_env, started, "-r", session, stdin="here\n")
    assert resumed.returncode == 0, resumed.stderr
    assert [data["text"] for data in events(home, "user/message")] == ["hello", "here"]


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
    clock = ManualClock(autojump=True)  # the retries' waits, in no time
    result = run_dsh(child_env(url, home), workdir, stdin="hello\n", clock=clock)
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
