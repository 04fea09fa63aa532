"""Secrets: the API key appears nowhere, a base URL's password is redacted wherever it is shown,
and what dsh writes is private (0600 files, 0700 directories) whatever the umask.

Every run in this directory uses the canary key and :func:`assert_sane` checks its output and
files; the tests here add the log records (every record of every logger at DEBUG, written to a
file by a handler on the root logger, as a ``sitecustomize`` would in a child), the terminal
mode and its history file, and keys that cannot be a header. dsh runs in-process
(``tests/harness.py``), but where the process is the point: its umask.
"""

from __future__ import annotations

import io
import logging
import os
import re
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import HttpError, ManualClock, StubServer
from tests.conftest import CANARY_KEY
from tests.harness import Terminal, on_terminal, run_in_process
from tests.reliability.conftest import DSH, Run, assert_no_canary, assert_sane, child_env
from tests.reliability.faults import (
    FaultServer,
    bad_chunk_after_text,
    hang,
    read_request,
    self_signed_context,
)
from tests.support import wait_raw_mode

PASSWORD = "url-password-7c2e"
"""The password in a base URL with user info: shown nowhere."""


@pytest.fixture
def records(tmp_path: Path) -> Iterator[Path]:
    """A file receiving every log record of the test's in-process runs, at DEBUG: what dsh and
    its libraries (httpx included) log, as a child's ``sitecustomize`` would capture it."""
    path = tmp_path / "records.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


def test_canary_key_is_in_no_output_file_or_log_record(
    stub: StubServer, home: Path, records: Path
) -> None:
    env = child_env(stub.url, home)
    stub.enqueue(HttpError(429, "Rate limit reached for requests", retry_after=0))
    lines = b"hello\nthink about it\nauth\ncut\nmalformed\nfilter\nquota\nlimit\n"
    runs = [
        run_in_process(env, stdin=lines),
        run_in_process(env, "--continue", stdin=b"and again\n"),
        run_in_process(env, "review", "this", stdin=b"diff --git a b\n"),
        run_in_process(env, "--max-tokens", "lots", stdin=b"hello\n"),
    ]

    async def at_a_terminal(term: Terminal) -> None:
        await term.turn("hello from a terminal")
        await term.expect("You said: hello from a terminal")
        assert await term.leave() == 0

    screen = on_terminal(env, home.parent, at_a_terminal).text
    outputs = [text for run in runs for text in (run.stdout_bytes, run.stderr_bytes)]
    assert_no_canary(home, *outputs, screen)
    for run in runs:
        assert_sane(run)
    logged = records.read_text()
    assert "HTTP Request: POST" in logged  # the capture works: httpx's records are there
    assert "turn 3 of session" in logged  # and dsh_core's warnings (the failed auth turn)
    assert CANARY_KEY not in logged
    # The key did reach the server, as a Bearer token, on every request.
    assert {h["authorization"] for h in stub.headers} == {f"Bearer {CANARY_KEY}"}
    assert (home / "history").read_text().count("hello from a terminal") == 1


@pytest.mark.parametrize(
    "suffix",
    [" pasted twice", "\x7f", "\u00e9", "\nX-Injected: 1", "\tx"],
    ids=["space", "DEL", "non-ASCII", "newline", "tab"],
)
def test_key_that_cannot_be_a_header_is_not_echoed(
    suffix: str, stub: StubServer, home: Path, records: Path
) -> None:
    env = child_env(stub.url, home, DEEPSEEK_API_KEY=f"{CANARY_KEY}{suffix}")
    run = run_in_process(env, stdin=b"hello\n")
    assert run.stderr == (
        "dsh: startup failed: The DeepSeek API key contains spaces or characters "
        "not allowed in an HTTP header: check DEEPSEEK_API_KEY\n"
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert stub.requests == []
    assert not (home / "sessions").exists()  # refused before any session was created
    assert CANARY_KEY not in records.read_text()
    assert_sane(run)


def test_a_key_echoed_by_the_server_or_carried_by_the_url_is_in_no_log_record(
    stub: StubServer, home: Path, records: Path
) -> None:
    """SPEC 10.5: httpx logs each request's URL, dsh_core logs each failure: both masked."""
    run = run_in_process(child_env(f"{stub.url}/v1?key={CANARY_KEY}", home), stdin=b"hello\n")
    assert run.stdout.startswith("[turn failed HTTP_404]")
    assert "?key=[DEEPSEEK_API_KEY]" in run.stdout  # the stub's 404 names the path it got
    logged = records.read_text()
    assert "HTTP Request: POST" in logged and "?key=[DEEPSEEK_API_KEY]" in logged
    assert "failed [HTTP_404]" in logged  # dsh_core's warning, masked by error_chain
    assert CANARY_KEY not in logged
    assert_sane(run)


# A base URL with user info.


def _flaky(conn: socket.socket, server: FaultServer) -> None:
    """The first connection closes without an answer (a retry); later ones break mid-body."""
    if server.connections == 1:
        read_request(conn)
        return
    bad_chunk_after_text(conn, server)


def _no_password(run: Run) -> None:
    assert PASSWORD not in run.stdout + run.stderr
    for path in run.home.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
    assert_sane(run)


def test_userinfo_is_redacted_in_outcomes_notices_and_the_log(home: Path) -> None:
    with FaultServer(_flaky) as server:
        base = f"http://user:{PASSWORD}@127.0.0.1:{server.port}"
        shown = f"http://***@127.0.0.1:{server.port}"
        run = run_in_process(
            child_env(base, home), stdin=b"hello\n", clock=ManualClock(autojump=True)
        )
    (notice,) = [line for line in run.stderr.splitlines() if "retrying" in line]
    assert notice.endswith(
        f"DeepSeek API request to {shown} failed: Server disconnected without sending a response."
    )
    assert run.stdout.startswith(
        f"Some text, then \n[turn failed TRANSPORT] DeepSeek API stream from {shown} failed: "
    )
    (retry,) = run.of_type("retry")
    assert shown in retry["message"]
    assert shown in run.turn_ends()[0]["message"]
    _no_password(run)


def test_userinfo_is_redacted_for_tls_and_one_shot(home: Path, tmp_path: Path) -> None:
    context = self_signed_context(tmp_path)
    if context is None:
        pytest.skip("no openssl to make a certificate with")
    with FaultServer(hang, tls=context) as server:
        base = f"https://user:{PASSWORD}@127.0.0.1:{server.port}"
        run = run_in_process(child_env(base, home), "is", "this", "private?")
    assert run.stdout.startswith(
        f"[turn failed TRANSPORT] DeepSeek API request to https://***@127.0.0.1:{server.port} "
        "failed: [SSL: CERTIFICATE_VERIFY_FAILED]"
    )
    assert run.returncode == 1
    _no_password(run)


def test_userinfo_is_redacted_in_a_startup_failure(home: Path) -> None:
    run = run_in_process(child_env(f"ftp://user:{PASSWORD}@example.invalid", home), stdin=b"hi\n")
    assert run.stderr == (
        "dsh: startup failed: DEEPSEEK_BASE_URL must be an http:// or https:// URL, "
        "not 'ftp://***@example.invalid'\n"
    )
    assert (run.returncode, run.stdout) == (2, "")
    _no_password(run)


def test_userinfo_does_not_replace_the_key(stub: StubServer, home: Path, records: Path) -> None:
    """httpx would turn ``user:password@`` into Basic auth, replacing the Bearer key."""
    base = stub.url.replace("http://", f"http://user:{PASSWORD}@")
    run = run_in_process(child_env(base, home), stdin=b"hello\n")
    assert stub.headers[-1]["authorization"] == f"Bearer {CANARY_KEY}"
    assert run.stdout == "You said: hello\n"
    assert "HTTP Request: POST" in records.read_text()
    assert PASSWORD not in records.read_text()  # httpx logs the URL it was given
    _no_password(run)


# Private files.


def _spawn_repl(env: dict[str, str]) -> tuple[pexpect.spawn, io.StringIO]:
    transcript = io.StringIO()
    child = pexpect.spawn(
        DSH[0],
        DSH[1:],
        env=dict(env, TERM="dumb", PROMPT_TOOLKIT_NO_CPR="1"),
        encoding="utf-8",
        timeout=20,
        dimensions=(24, 200),
        preexec_fn=lambda: os.umask(0),
    )
    child.logfile_read = transcript
    return child, transcript


def _leave(child: pexpect.spawn) -> None:
    child.expect_exact("> ")
    wait_raw_mode(child.child_fd)  # in cooked mode the tty would swallow Ctrl-D (FIELD-NOTES)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.slow
def test_files_are_private_whatever_the_umask(stub: StubServer, home: Path) -> None:
    env = child_env(stub.url, home)
    result = subprocess.run(
        [*DSH],
        input=b"hello\n",
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.umask(0),
    )
    assert result.returncode == 0, result.stderr
    child, _ = _spawn_repl(env)
    child.expect_exact("> ")
    child.sendline("hello")
    child.expect_exact("You said: hello")
    _leave(child)
    modes = {
        str(path.relative_to(home)): stat.S_IMODE(path.stat().st_mode)
        for path in [home, *home.rglob("*")]
    }
    files = {name: mode for name, mode in modes.items() if not (home / name).is_dir()}
    dirs = {name: mode for name, mode in modes.items() if (home / name).is_dir()}
    assert set(files.values()) == {0o600}, modes
    assert set(dirs.values()) == {0o700}, modes
    assert "history" in files
    assert sum(name.endswith("session.jsonl") for name in files) == 2
    assert re.search(r"^sessions/[^/]+/[^/]+$", "\n".join(dirs), re.M)
