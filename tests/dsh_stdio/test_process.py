"""The real ``dsh`` process on real pipes: signals, a resume after SIGKILL, closed streams.

Startup failures, one-shot mode and resuming need no process: ``test_main.py`` runs them
in-process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

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
