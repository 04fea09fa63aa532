"""The real ``dsh`` process on real pipes: startup failures, one-shot, signals, resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from dsh_core.testing import StubServer, closed_port
from tests.support import DSH, assert_no_canary, wait_blocked_reading

pytestmark = pytest.mark.slow


def run(
    env: dict[str, str], *args: str, stdin: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DSH, *args],
        input=stdin.decode("utf-8", "surrogateescape"),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def session_events(home: Path) -> list[dict[str, object]]:
    (log,) = home.rglob("session.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()[1:]]


def turn_ends(home: Path) -> list[dict[str, object]]:
    return [e["data"] for e in session_events(home) if e["type"] == "turn/end"]  # type: ignore[misc]


# Startup failures: one line on stderr, exit 2, nothing on stdout.


def test_no_key(dsh_env: dict[str, str]) -> None:
    del dsh_env["DEEPSEEK_API_KEY"]
    dsh_env["DEEPSEEK_BASE_URL"] = "https://api.deepseek.invalid"  # loopback needs no key
    result = run(dsh_env, stdin=b"hello\n")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "dsh: startup failed: DEEPSEEK_API_KEY is not set: export your DeepSeek API key, "
        "or try the offline demo: dsh --demo\n"
    )


def test_bad_flag_value(dsh_env: dict[str, str]) -> None:
    result = run(dsh_env, "--max-tokens", "lots")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "dsh: startup failed: --max-tokens must be a positive integer, not 'lots'\n"
    )


def test_unknown_flag(dsh_env: dict[str, str]) -> None:
    result = run(dsh_env, "--frobnicate")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: unrecognized arguments: --frobnicate")
    assert result.stderr.count("\n") == 1


def test_unusable_home(dsh_env: dict[str, str], tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = run(dsh_env, "--home", str(not_a_dir), stdin=b"hello\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: ")
    assert "Not a directory" in result.stderr
    assert result.stderr.count("\n") == 1


def test_unknown_session(dsh_env: dict[str, str]) -> None:
    result = run(dsh_env, "--resume", "no-such-session", stdin=b"hello\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: ")
    assert "no-such-session" in result.stderr


def test_refused_session_log(dsh_env: dict[str, str], home: Path) -> None:
    assert run(dsh_env, stdin=b"one\ntwo\n").returncode == 0
    (log,) = home.rglob("session.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = b"{not json\n"
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    result = run(dsh_env, "--continue", stdin=b"three\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("dsh: startup failed: ")
    assert f"{log} is damaged at line 4" in result.stderr
    assert log.read_bytes() == before  # refused, not rewritten


# One-shot mode.


def test_one_shot_appends_piped_stdin(dsh_env: dict[str, str], stub: StubServer) -> None:
    result = run(dsh_env, "review", "this", stdin=b"diff --git a b\n+line\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: review this\n\ndiff --git a b\n+line\n"
    assert stub.requests[-1]["messages"][-1]["content"] == (
        "review this\n\ndiff --git a b\n+line\n"
    )


def test_one_shot_failure_exit_status(dsh_env: dict[str, str]) -> None:
    dsh_env["DEEPSEEK_BASE_URL"] = f"http://127.0.0.1:{(port := closed_port())}"
    result = run(dsh_env, "hello")
    assert result.returncode == 1
    assert result.stdout == (
        f"[turn failed TRANSPORT] DeepSeek API request to http://127.0.0.1:{port} failed: "
        "All connection attempts failed: [Errno 111] Connect call failed "
        f"('127.0.0.1', {port}) (next: check --base-url, the network and HTTPS_PROXY, "
        "then try again)\n"
    )
    assert "Traceback" not in result.stderr


# Signals: the running turn is recorded, the exit status says which signal.


def start_slow_turn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*DSH, *args],
        env=env,
        stdin=subprocess.DEVNULL if args else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdin is not None:
        proc.stdin.write("slow answer please\n")
        proc.stdin.flush()
    first = proc.stdout.read(4)  # the first words of the answer: the turn is streaming
    assert first, proc.stderr.read() if proc.stderr else ""
    return proc


@pytest.mark.parametrize(
    ("sig", "status", "reason"),
    [
        (signal.SIGTERM, 143, "shutdown"),
        (signal.SIGINT, 130, "user"),
        (signal.SIGHUP, 129, "shutdown"),  # the terminal went away
    ],
)
@pytest.mark.parametrize("one_shot", [False, True])
def test_signal_mid_turn(
    dsh_env: dict[str, str], home: Path, sig: int, status: int, reason: str, one_shot: bool
) -> None:
    args = ("slow",) if one_shot else ()
    proc = start_slow_turn(dsh_env, *args)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == status, err
    assert out.endswith(f"\n[turn aborted] {reason}\n")
    assert "Traceback" not in err
    ends = turn_ends(home)
    assert ends[-1]["reason"] == {"kind": "aborted", "reason": reason}
    answers = [e for e in session_events(home) if e["type"] == "assistant/message"]
    assert answers[-1]["data"]["interrupted"] is True  # type: ignore[index]


def test_sigint_while_waiting_for_input(dsh_env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        DSH, env=dsh_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_blocked_reading(proc.pid)  # started, handlers in place, waiting for a line
    proc.send_signal(signal.SIGINT)
    # wait(), not communicate(): closing stdin would race the signal with an EOF.
    assert proc.wait(timeout=20) == 130
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.stdin is not None
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    assert out == b""
    assert b"Traceback" not in err


# Resume after a crash.


def test_continue_reports_a_turn_left_open_by_a_killed_process(
    dsh_env: dict[str, str], home: Path
) -> None:
    proc = start_slow_turn(dsh_env)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)
    result = run(dsh_env, "--continue", stdin=b"hello again\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "[turn interrupted by a previous process exit]\nYou said: hello again\n"
    )
    assert "interrupted" in result.stderr
    kinds = [end["reason"]["kind"] for end in turn_ends(home)]  # type: ignore[index]
    assert kinds == ["interrupted", "completed"]
    assert_no_canary(home, result.stdout, result.stderr)


def test_continue_without_a_session_starts_one(dsh_env: dict[str, str]) -> None:
    result = run(dsh_env, "--continue", stdin=b"hi\n")
    assert result.returncode == 0
    assert result.stdout == "You said: hi\n"
    assert "no session yet" in result.stderr


def test_one_shot_sigint_while_piped_stdin_stays_open(dsh_env: dict[str, str]) -> None:
    """The question waits for piped stdin to end; Ctrl-C meanwhile ends dsh at once."""
    proc = subprocess.Popen(
        [*DSH, "review this"],
        env=dsh_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"part of a diff\n")
    proc.stdin.flush()
    wait_blocked_reading(proc.pid)  # up, Ctrl-C is its own, and waiting for the rest of stdin
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130  # stdin is still open: only the signal ended it
    out, err = proc.stdout.read(), proc.stderr.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    assert out == b""
    assert b"Traceback" not in err


def test_one_shot_oversized_piped_stdin_is_rejected(dsh_env: dict[str, str]) -> None:
    result = run(dsh_env, "review", stdin=b"x" * (300 * 1024))
    assert result.returncode == 1
    assert result.stdout == (
        "[turn rejected] the message is 300.1 KiB, over the limit of 256 KiB per message: "
        "shorten it, or send it in parts\n"
    )


def test_the_interrupted_line_is_printed_by_the_resume_that_found_it(
    dsh_env: dict[str, str],
) -> None:
    proc = start_slow_turn(dsh_env)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)
    first = run(dsh_env, "--continue")
    assert first.stdout == "[turn interrupted by a previous process exit]\n"
    again = run(dsh_env, "--continue")
    assert again.stdout == ""  # already reported and closed; nothing new happened
    assert again.returncode == 0


def test_show_reasoning_goes_to_stderr_set_apart(dsh_env: dict[str, str]) -> None:
    result = run(dsh_env, "--show-reasoning", stdin=b"think about it\n")
    assert result.returncode == 0
    assert result.stdout == "The answer, after some thought: 42.\n"
    assert result.stderr.startswith(
        "The user wants an answer. Let me think step by step... 6 x 7 = 42.\ndsh: tokens in "
    )


# Closed or failing standard streams: a clear line, never a traceback.


def test_stdin_closed_is_no_input(dsh_env: dict[str, str]) -> None:
    result = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *DSH],
        env=dsh_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_stdout_closed_is_a_startup_failure(dsh_env: dict[str, str]) -> None:
    result = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *DSH],
        input="hello\n",
        env=dsh_env,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "dsh: startup failed: standard output is closed: answers would be lost\n"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_that_cannot_be_written(dsh_env: dict[str, str], home: Path) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            DSH,
            input="hello\nagain\n",
            env=dsh_env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert re.fullmatch(
        r"dsh: cannot write to standard output: \[Errno 28\] No space left on device\n"
        r"dsh: session (\S+) \(dsh -r \1 to resume\)\n",
        result.stderr,
    )
    reasons = [end["reason"] for end in turn_ends(home)]
    assert reasons == [
        {"kind": "aborted", "reason": "standard output failed: [Errno 28] No space left on device"}
    ]  # the pipe stopped there: nothing more could be shown


def test_demo_on_a_pipe_ends_cleanly_on_sigterm(tmp_path: Path) -> None:
    """No 'Fatal Python error' from a stdin thread at interpreter shutdown."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    demo = [DSH[0], str(Path(__file__).parents[2] / "scripts" / "demo_repl.py")]
    proc = subprocess.Popen(
        demo, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"hello\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"You said: hello\n"
    proc.send_signal(signal.SIGTERM)  # while it waits for the next line
    assert proc.wait(timeout=20) == 143
    err = proc.stderr.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    assert b"Fatal Python error" not in err and b"Traceback" not in err


def test_a_run_without_turns_leaves_no_session_behind(dsh_env: dict[str, str], home: Path) -> None:
    assert run(dsh_env, stdin=b"remember this\n").returncode == 0
    assert run(dsh_env, stdin=b"").returncode == 0  # started and left without a turn
    assert len(list(home.rglob("session.jsonl"))) == 1
    result = run(dsh_env, "--continue", stdin=b"and this\n")
    assert result.stdout == "You said: and this\n"
    assert [e["type"] for e in session_events(home)].count("user/message") == 2
