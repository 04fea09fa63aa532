"""SPEC 10.5: the key's value is masked (``[DEEPSEEK_API_KEY]``) in every string dsh shows,
stores or sends to the model.

Each test is one attack on ``dsh`` with the canary key, run in-process (``tests/harness.py``:
what dsh shows and stores needs no process; the commands it runs are real processes): a server
that echoes the key back, a model that reads or ``cat``s a file holding it, a base URL that
carries it. What is
checked: the terminal or stdout, stderr, every file under ``DSH_HOME`` (the session log, the
saved output of commands), ``--json``, ``--show``, and the body of every request the model was
sent afterwards. The key still goes to the server in the ``Authorization`` header: that is its
job.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.harness import Terminal, on_terminal
from tests.reliability.conftest import assert_sane
from tests.reliability.faults import FaultServer, hang, read_request, self_signed_context
from tests.security._support_display import (  # noqa: F401 (fixtures, used by name)
    CANARY_KEY,
    MASK,
    Run,
    call,
    env_fixture,
    events_of,
    home_fixture,
    no_key_in_requests,
    pipe,
    stub_fixture,
    work_fixture,
)
from tests.support import assert_no_canary, child_env

SECRET_FILE = f"# local settings\nDEEPSEEK_API_KEY={CANARY_KEY}\n"


def _masked_everywhere(run: Run, *, shown: bool = True) -> None:
    """No key in the output, in any file of the home, in the log; and the mask where it was."""
    assert_sane(run)  # no canary in stdout, stderr or any file under home; the log whole
    if shown:
        assert MASK in run.stdout + run.stderr


def _json_and_show(env: dict[str, str], work: Path, stdin: str) -> None:
    """The same attack with ``--json``, then ``--show last`` of that session."""
    as_json = pipe(env, work, "--json", stdin=stdin)
    assert_sane(as_json)
    for line in as_json.stdout.splitlines():
        json.loads(line)  # whole lines, masked or not
    shown = pipe(env, work, "--show", "last")
    assert_sane(shown)
    assert shown.returncode == 0, shown.stderr


# -- a server that echoes the Authorization header ----------------------------------------------


def _echo_authorization(conn: socket.socket, server: FaultServer) -> None:
    """A 401 whose JSON body quotes the request's ``Authorization`` header back."""
    head = read_request(conn).decode("latin-1")
    [auth] = [line for line in head.split("\r\n") if line.lower().startswith("authorization:")]
    body = json.dumps({"error": {"message": f"Invalid credentials ({auth})"}}).encode()
    conn.sendall(
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


def test_a_401_that_echoes_the_authorization_header_shows_and_stores_no_key(
    home: Path, work: Path
) -> None:
    with FaultServer(_echo_authorization) as server:
        env = child_env(server.url, home)
        run = pipe(env, work, stdin="hello\n")
        assert run.stdout == (
            "[turn failed AUTH] DeepSeek API returned HTTP 401 Unauthorized: Invalid "
            f"credentials (Authorization: Bearer {MASK}) (next: check DEEPSEEK_API_KEY)\n"
        )
        _masked_everywhere(run)
        assert run.returncode == 1
        [end] = events_of(home, "turn/end")
        assert MASK in end["reason"]["message"]
        _json_and_show(env, work, "hello\n")


# -- a model that reads the key from a file -----------------------------------------------------


def test_a_model_that_reads_a_file_holding_the_key_is_sent_the_mask(
    env: dict[str, str], stub: StubServer, home: Path, work: Path
) -> None:
    (work / "settings.env").write_text(SECRET_FILE)
    stub.enqueue(call("read", file_path="settings.env"))
    run = pipe(env, work, stdin="look at the settings\n")
    # The stub answers by quoting the result it was sent: the model saw the mask.
    assert run.stdout == "Tool results: [read]      1\t# local settings...\n"
    [result] = events_of(home, "tool/result")
    assert result["content"] == f"     1\t# local settings\n     2\tDEEPSEEK_API_KEY={MASK}"
    _masked_everywhere(run, shown=False)
    no_key_in_requests(stub)
    stub.enqueue(call("read", file_path="settings.env"))
    _json_and_show(env, work, "look at the settings\n")
    no_key_in_requests(stub)


def test_a_model_that_cats_the_key_gets_the_mask_and_so_does_the_saved_output(
    env: dict[str, str], stub: StubServer, home: Path, work: Path
) -> None:
    # 40,000 characters: over the 30,000 a result keeps, so all of it goes to a file.
    filler = "".join(f"line {n}\n" for n in range(5000))
    (work / "dump.txt").write_text(f"{CANARY_KEY}\n{filler}{CANARY_KEY}\n")
    stub.enqueue(call("bash", command="cat dump.txt"))
    run = pipe(env, work, "--allow", "shell", stdin="dump it\n")
    assert run.stdout == f"Tool results: [bash] {MASK}...\n"
    [result] = events_of(home, "tool/result")
    assert result["truncated"] is True
    saved = Path(result["output_file"]).read_text()
    assert saved.startswith(f"{MASK}\nline 0\n") and saved.endswith(f"line 4999\n{MASK}\n")
    _masked_everywhere(run, shown=False)
    no_key_in_requests(stub)


def test_a_model_that_writes_the_key_in_a_command_runs_the_mask(
    env: dict[str, str], stub: StubServer, home: Path, work: Path
) -> None:
    """Arguments come from the server: one that knows the key cannot make a command use it."""
    stub.enqueue(call("bash", command=f"echo {CANARY_KEY} > leaked.txt"))
    run = pipe(env, work, "--allow", "shell", stdin="go\n")
    assert f"dsh: [tool bash] $ echo {MASK} > leaked.txt" in run.stderr
    assert (work / "leaked.txt").read_text() == f"{MASK}\n"
    [started] = events_of(home, "tool/call")
    assert MASK in started["arguments"]
    _masked_everywhere(run)
    no_key_in_requests(stub)


# -- a server that streams the key as text ------------------------------------------------------


def test_a_server_that_streams_the_key_in_pieces_shows_the_mask(
    env: dict[str, str], stub: StubServer, home: Path, work: Path
) -> None:
    """Four characters per delta: the key arrives in nine pieces, never whole in one."""
    said = f"Your key is {CANARY_KEY}, keep it safe."
    stub.enqueue(Answer(said, reasoning=f"The header said {CANARY_KEY}.", chunk_size=4))
    run = pipe(env, work, "--show-reasoning", stdin="what is my key?\n")
    assert run.stdout == f"Your key is {MASK}, keep it safe.\n"
    assert f"The header said {MASK}." in run.stderr
    _masked_everywhere(run)
    no_key_in_requests(stub)
    stub.enqueue(Answer(said, chunk_size=4))
    _json_and_show(env, work, "what is my key?\n")


def test_a_server_that_streams_the_key_upper_cased_in_pieces_shows_the_mask(
    env: dict[str, str], stub: StubServer, home: Path, work: Path
) -> None:
    """The review's echo, in another case: ``SK-DSH-CANARY-...`` is the key all the same."""
    shouted = CANARY_KEY.upper()
    stub.enqueue(Answer(f"YOUR KEY IS {shouted}, KEEP IT SAFE.", chunk_size=4))
    run = pipe(env, work, stdin="what is my key?\n")
    assert run.stdout == f"YOUR KEY IS {MASK}, KEEP IT SAFE.\n"
    stored = b"".join(path.read_bytes() for path in home.rglob("*") if path.is_file())
    assert shouted.encode() not in stored + run.stdout.encode() + run.stderr.encode()
    _masked_everywhere(run)


def test_a_key_on_the_terminal_is_shown_as_the_mask(
    env: dict[str, str], home: Path, stub: StubServer, work: Path
) -> None:
    (work / "settings.env").write_text(SECRET_FILE)
    stub.enqueue(call("bash", command="cat settings.env"))

    async def script(term: Terminal) -> None:
        await term.turn("show me the settings")
        await term.expect("Allow bash?")
        term.keys("y\r")
        await term.expect("[tool bash exit 0] 2 lines")
        await term.expect("Tool results: [bash] # local settings...")
        stub.enqueue(Answer(f"It says {CANARY_KEY}.", chunk_size=3))
        await term.turn("and the key?")
        await term.expect(f"It says {MASK}.")
        assert await term.leave() == 0

    term = on_terminal(env, work, script)  # the REPL in-process: the screen is what dsh wrote
    assert_no_canary(home, term.text)


# -- a key in the base URL ----------------------------------------------------------------------


def _first_closes_then_404(conn: socket.socket, server: FaultServer) -> None:
    """The first connection closes unanswered (a retry); then a 404 that echoes the path."""
    head = read_request(conn).decode("latin-1")
    if server.connections == 1:
        return
    path = head.split(" ")[1]
    body = json.dumps({"error": {"message": f"No route for {path}"}}).encode()
    conn.sendall(
        b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


def test_a_key_in_the_base_url_is_masked_in_notices_outcomes_and_the_log(
    home: Path, work: Path
) -> None:
    with FaultServer(_first_closes_then_404) as server:
        base = f"{server.url}/v1?key={CANARY_KEY}"
        run = pipe(child_env(base, home), work, stdin="hello\n")
    shown = f"{server.url}/v1?key={MASK}"
    [notice] = [line for line in run.stderr.splitlines() if "retrying" in line]
    assert f"DeepSeek API request to {shown} failed" in notice
    assert run.stdout.startswith("[turn failed HTTP_404] DeepSeek API returned HTTP 404 Not Found")
    assert f"No route for /v1?key={MASK}/chat/completions" in run.stdout
    [retry] = events_of(home, "retry")
    assert shown in retry["message"]
    _masked_everywhere(run)


def test_a_key_in_the_base_url_is_masked_in_a_tls_failure(
    home: Path, work: Path, tmp_path: Path
) -> None:
    context = self_signed_context(tmp_path)
    if context is None:
        pytest.skip("no openssl to make a certificate with")
    with FaultServer(hang, tls=context) as server:
        base = f"https://127.0.0.1:{server.port}/?key={CANARY_KEY}"
        run = pipe(child_env(base, home), work, "is", "this", "private?")
    assert run.stdout.startswith(
        f"[turn failed TRANSPORT] DeepSeek API request to https://127.0.0.1:{server.port}/"
        f"?key={MASK} failed: [SSL: CERTIFICATE_VERIFY_FAILED]"
    )
    _masked_everywhere(run)


def test_a_key_in_a_refused_base_url_is_masked_in_the_startup_failure(
    home: Path, work: Path
) -> None:
    run = pipe(child_env(f"ftp://example.invalid/?key={CANARY_KEY}", home), work, stdin="hi\n")
    assert run.stderr == (
        "dsh: startup failed: DEEPSEEK_BASE_URL must be an http:// or https:// URL, "
        f"not 'ftp://example.invalid/?key={MASK}'\n"
    )
    _masked_everywhere(run)


# -- a short key --------------------------------------------------------------------------------


def test_a_short_key_does_not_mangle_text_or_strip_the_environment_of_commands(
    stub: StubServer, home: Path, work: Path
) -> None:
    """A key of a few characters (a local server's ``any``) is no secret anyone can keep:
    masking it would mangle every sentence, and dropping every variable that holds it would
    leave commands without their environment."""
    env = child_env(stub.url, home, DEEPSEEK_API_KEY="x", DSH_TEST_BOX="box of xylophones")
    stub.enqueue(call("bash", command='echo "$DSH_TEST_BOX"'))
    run = pipe(env, work, "--allow", "shell", stdin="run it\nan example text\n")
    assert run.stdout == "Tool results: [bash] box of xylophones\nYou said: an example text\n"
    assert MASK not in run.stdout + run.stderr
    assert_sane(run)


# -- an MCP server that says the key on stderr --------------------------------------------------


def test_an_mcp_server_that_fails_saying_the_key_on_stderr_shows_the_mask(
    env: dict[str, str], stub: StubServer, home: Path, work: Path, tmp_path: Path
) -> None:
    # Second review (D1): the warning quotes the server's last stderr line after its chain,
    # which error_chain's masking never saw. The key is the server's own (its environment holds
    # none): a token in its own configuration, say.
    server = tmp_path / "leaky.sh"
    server.write_text(f"#!/bin/sh\necho 'auth failed for key {CANARY_KEY}' >&2\nexit 1\n")
    server.chmod(0o755)
    home.mkdir()
    (home / "config.toml").write_text(f'[mcp.servers.leaky]\ncommand = "{server}"\n')
    stub.enqueue(Answer("hello"))
    run = pipe(env, work, stdin="hi\n")
    said = (
        'MCP server "leaky" did not start: it exited with status 1: Connection closed '
        '(its stderr ends "auth failed '
    )
    assert f'{said}for key {MASK}"; all of it is in ' in run.stderr
    # The server's stderr file holds what it wrote, as it wrote it: dsh never reads it through.
    [stderr_file] = home.rglob("mcp-leaky.stderr")
    stderr_file.unlink()
    _masked_everywhere(run)
