"""``dsh --sessions`` and ``dsh --show`` (SPEC section 9): listing, transcript, bad input.

The transcript's invariant is checked on real pipe runs: the ``--show`` output without its
``> `` lines and tool lines is, byte for byte, what those runs printed on stdout.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsh_core.errors import FailureRecord, SessionLogError
from dsh_core.model.seam import ToolCall, Usage
from dsh_core.session import SessionLog, SessionStore
from dsh_core.session.events import (
    ApprovalDecided,
    AssistantStep,
    Record,
    RetryScheduled,
    StepUsage,
    SystemPrompt,
    ToolCallStarted,
    ToolOutput,
    ToolResult,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    UserText,
)
from dsh_core.testing import Stall, StubServer
from dsh_stdio.commands.sessions import (
    list_sessions,
    print_listing,
    print_transcript,
    session_id,
    show_session,
)
from dsh_stdio.config import parse_config
from dsh_stdio.render import INTERRUPTED_LINE
from tests.harness import run_in_process
from tests.support import DSH, Run, child_env

START = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
HERE = Path("/home/ann/src/project")
ELSEWHERE = Path("/srv/other")


def ticking() -> Iterator[datetime]:
    return (START + n * timedelta(milliseconds=250) for n in range(1_000_000))


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    clock = ticking()
    ids = iter(f"s{n}" for n in range(1_000))
    return SessionStore(tmp_path / "home", clock=lambda: next(clock), new_id=lambda: next(ids))


def session(
    store: SessionStore, records: list[Record], *, cwd: Path = HERE, mtime: int | None = None
) -> SessionLog:
    """A closed session holding ``records``; ``mtime`` (seconds) orders it in a listing."""
    with store.create(cwd) as log:
        for record in records:
            log.append(record)
    if mtime is not None:
        os.utime(log.path, (mtime, mtime))
    return log


def turn(number: int, user: str, answer: str, end: TurnEnd | None = None) -> list[Record]:
    """A one-step turn; ``end`` None: it completed."""
    return [
        TurnStart(number, "m"),
        UserText(number, user),
        AssistantStep(number, 1, answer),
        end or TurnEnd(number, "completed"),
    ]


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every path under ``root``: mode, mtime and (for files) content."""
    found: dict[str, tuple[int, int, bytes]] = {}
    for path in [root, *sorted(root.rglob("*"))] if root.exists() else []:
        status = path.lstat()
        content = path.read_bytes() if path.is_file() else b""
        found[str(path)] = (status.st_mode, status.st_mtime_ns, content)
    return found


def listing(store: SessionStore, *, all_directories: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = print_listing(store, HERE, all_directories=all_directories, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def show(
    store: SessionStore, ref: str, *, terminal: bool = False, cwd: Path = HERE
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = print_transcript(store, cwd, ref, out=out, err=err, terminal=terminal)
    return status, out.getvalue(), err.getvalue()


def local(seconds: int) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


def without_user_and_tool_lines(transcript: str) -> str:
    """What the invariant compares: the transcript minus ``> `` lines and tool lines.

    A tool line's continuation lines (a multi-line summary) are indented by two spaces.
    """
    kept: list[str] = []
    in_tool = False
    for line in transcript.splitlines(keepends=True):
        if line.startswith("> "):
            in_tool = False
            continue
        if line.startswith("[tool ") or (in_tool and line.startswith("  ")):
            in_tool = True
            continue
        in_tool = False
        kept.append(line)
    return "".join(kept)


# --- --sessions ---------------------------------------------------------------------------


def test_no_sessions_is_one_line_and_creates_nothing(store: SessionStore) -> None:
    assert listing(store) == (
        0,
        "",
        f"dsh: no sessions yet for {HERE} (dsh --sessions --all lists every directory's)\n",
    )
    assert listing(store, all_directories=True) == (
        0,
        "",
        f"dsh: no sessions yet in {store.root}\n",
    )
    assert not store.home.exists()


def test_an_unreadable_sessions_directory_is_a_startup_failure(tmp_path: Path) -> None:
    # Tests run as root, where chmod 000 does not stop a read: a file where the directory
    # should be cannot be listed either.
    home = tmp_path / "home"
    home.mkdir()
    (home / "sessions").write_text("not a directory\n")
    store = SessionStore(home)
    with pytest.raises(SessionLogError, match="is not a directory"):
        listing(store)
    config = parse_config(["--sessions", "--home", str(home)], environ={})
    out = io.StringIO()
    with pytest.raises(SessionLogError, match="is not a directory"):
        list_sessions(config, out, terminal=False, err=io.StringIO(), cwd=HERE)
    assert out.getvalue() == ""


def test_lists_this_directory_newest_first_a_line_each(store: SessionStore) -> None:
    failure = FailureRecord("TRANSPORT", "DeepSeek API request to http://x failed: refused")
    first = session(store, turn(1, "fix the failing test", "done"), mtime=1_000_000)
    second = session(
        store,
        [
            *turn(1, "line one\nline two\tand\x1b[31m red", "ok"),
            *turn(2, "again", "", TurnEnd(2, "error", failure)),
        ],
        mtime=3_000_000,
    )
    session(store, turn(1, "elsewhere", "ok"), cwd=ELSEWHERE, mtime=2_000_000)
    rejected = session(
        store, [TurnStart(1, "m"), TurnEnd(1, "rejected", reason="too big")], mtime=500_000
    )
    status, out, err = listing(store)
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "SESSION  LAST ACTIVITY     TURNS    LAST TURN        FIRST MESSAGE",
        f"{second.id:7}  {local(3_000_000)}  2 turns  error TRANSPORT  "
        "line one line two and^[[31m red",
        f"{first.id:7}  {local(1_000_000)}  1 turn   completed        fix the failing test",
        f"{rejected.id:7}  {local(500_000)}  1 turn   rejected         -",
    ]
    # The first listed is the one --continue resumes.
    assert store.newest_path(HERE) == second.path


def test_all_lists_every_directory_with_its_path(store: SessionStore) -> None:
    here = session(store, turn(1, "here", "ok"), mtime=1_000_000)
    there = session(store, turn(1, "there", "ok"), cwd=ELSEWHERE, mtime=2_000_000)
    status, out, _ = listing(store, all_directories=True)
    assert status == 0
    assert out.splitlines() == [
        f"SESSION  LAST ACTIVITY     TURNS   LAST TURN  {'DIRECTORY':21}  FIRST MESSAGE",
        f"{there.id:7}  {local(2_000_000)}  1 turn  completed  {ELSEWHERE!s:21}  there",
        f"{here.id:7}  {local(1_000_000)}  1 turn  completed  {HERE}  here",
    ]


def test_the_first_line_is_trimmed(store: SessionStore) -> None:
    session(store, turn(1, "word " * 40, "ok"))
    out = listing(store)[1]
    first = out.split("completed  ")[1].rstrip("\n")
    assert first == ("word " * 12)[:59] + "…"


def test_a_session_being_written_is_open_and_listing_does_not_touch_it(
    store: SessionStore,
) -> None:
    done = session(store, turn(1, "earlier", "ok"), mtime=1_000_000)
    with store.create(HERE) as live:  # holds the writer's lock, as a running dsh does
        live.append(TurnStart(1, "m"))
        live.append(UserText(1, "still running"), durable=True)
        before = snapshot(store.home)
        status, out, _ = listing(store)
        assert status == 0
        assert "  1 turn  open       still running" in out.splitlines()[1]
        assert out.splitlines()[1].endswith("still running")
        assert out.splitlines()[2].startswith(done.id)
        assert snapshot(store.home) == before
        live.append(AssistantStep(1, 1, "finished"))  # the writer goes on: nothing was locked
        live.append(TurnEnd(1, "completed"), durable=True)
    assert "  1 turn  completed  still running" in listing(store)[1].splitlines()[1]


def test_a_long_first_message_and_a_long_last_turn_are_read_only_in_part(
    store: SessionStore,
) -> None:
    prompt = SystemPrompt("p" * 100_000)  # the first user message is past the first read
    big = "\x01" * 300_000  # escaped as \u0001: a 1.8 MB line, read only at its start
    calls = tuple(ToolCall(f"c{n}", "read", "{}") for n in range(20))
    long_turn: list[Record] = [
        TurnStart(2, "m"),
        UserText(2, "read them"),
        AssistantStep(2, 1, "", tool_calls=calls),
        *(ToolResult(2, 1, call.id, ToolOutput("r" * 30_000)) for call in calls),
    ]
    log = session(store, [prompt, *turn(1, "hello " + big, "ok"), *long_turn])
    summary = store.summaries(HERE)[0]
    assert summary.id == log.id
    assert (summary.turns, summary.open, summary.last_end, summary.damage) == (2, True, None, None)
    assert summary.first_user is not None
    assert summary.first_user.startswith("hello \x01\x01")
    out = listing(store)[1]
    assert out.rstrip("\n").endswith("  2 turns  open       hello " + "^A" * 53 + "…")


@pytest.mark.parametrize(
    ("damage", "marker"),
    [
        (lambda data: b"garbage\n" + data.split(b"\n", 1)[1], "completed damaged"),
        (lambda data: data + b'{"type":"turn/st', "completed damaged"),
        (lambda data: data.replace(b'"kind":"completed"', b'"kind":7'), "damaged"),
        (lambda data: b"", "damaged"),
    ],
    ids=["header", "torn-tail", "bad-turn-end", "empty"],
)
def test_a_damaged_log_is_listed_with_a_marker(
    store: SessionStore, damage: object, marker: str
) -> None:
    log = session(store, turn(1, "question", "answer"))
    assert callable(damage)
    log.path.write_bytes(damage(log.path.read_bytes()))
    status, out, err = listing(store)
    assert (status, err) == (0, "")
    (header, line) = out.splitlines()
    assert header.startswith("SESSION  ")
    assert line.startswith(log.id)
    assert f"  {marker}  " in line
    assert store.summaries(HERE)[0].damage


# --- --show --------------------------------------------------------------------------------


def tool_turn(number: int) -> list[Record]:
    """A turn with two tool calls (one refused), approvals, usage and an unknown event."""
    read = ToolCall("c1", "read", '{"file_path": "a.txt"}')
    bash = ToolCall("c2", "bash", '{"command": "ls\\nrm -rf /"}')
    refused = FailureRecord("TOOL_REFUSED", 'tool "bash" needs approval; run with --allow shell')
    return [
        TurnStart(number, "m"),
        UserText(number, "look around\nplease"),
        RetryScheduled(number, 1, 1, 4, 0.5, FailureRecord("SERVER", "busy")),
        AssistantStep(number, 1, "Let me look.", reasoning="hmm", tool_calls=(read, bash)),
        StepUsage(number, 1, Usage(10, 5)),
        ToolCallStarted(number, 1, "c1", "read", read.arguments),
        ToolResult(number, 1, "c1", ToolOutput("1\thello\n2\tworld")),
        ApprovalDecided(number, "c2", "unavailable"),
        ToolResult.failed(number, 1, "c2", refused),
        UnknownEvent("note/added", {"text": "from a newer dsh"}),
        AssistantStep(number, 2, "Found \x1b[31mtwo\x1b[0m lines."),
        TurnEnd(number, "completed"),
    ]


def test_show_prints_user_lines_tool_lines_and_what_the_pipe_printed(
    store: SessionStore,
) -> None:
    cut = FailureRecord("STREAM_CLOSED", "the stream ended early")
    session(
        store,
        [
            SystemPrompt("You are dsh."),
            *turn(1, "hello", "You said: hello"),
            *tool_turn(2),
            TurnStart(3, "m"),
            TurnEnd(3, "rejected", reason="the message is 300 KiB, over the limit"),
            TurnStart(4, "m"),
            UserText(4, "tell me"),
            AssistantStep(4, 1, "This is cut in the mid", interrupted=True),
            TurnEnd(4, "error", cut),
            TurnStart(5, "m"),
            UserText(5, "wait"),
            TurnEnd(5, "interrupted"),
            *turn(6, "go on\n", "Going on.\n"),
        ],
    )
    status, out, err = show(store, "last")
    assert (status, err) == (0, "")
    assert out == (
        "> hello\n"
        "You said: hello\n"
        "> look around\n"
        "> please\n"
        "Let me look.\n"
        '[tool read] {"file_path": "a.txt"}\n'
        "[tool read done] 2 lines\n"
        '[tool bash] {"command": "ls\\nrm -rf /"}\n'
        '[tool refused bash] tool "bash" needs approval; run with --allow shell\n'
        "Found \x1b[31mtwo\x1b[0m lines.\n"  # on a pipe the model's text is data
        "[turn rejected] the message is 300 KiB, over the limit\n"
        "> tell me\n"
        "This is cut in the mid\n"
        "[turn failed STREAM_CLOSED] the stream ended early\n"
        "> wait\n"
        f"{INTERRUPTED_LINE}\n"
        "> go on\n"
        "Going on.\n"
    )


def test_on_a_terminal_nothing_is_printed_raw(store: SessionStore) -> None:
    session(store, [*turn(1, "hi\x1b]0;title\x07", "red \x1b[31mtext\u202e"), *tool_turn(2)])
    status, out, _ = show(store, "last", terminal=True)
    assert status == 0
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert out.startswith("> hi^[]0;title^G\nred ^[[31mtext<U+202E>\n")
    assert "Found ^[[31mtwo^[[0m lines.\n" in out


def test_on_a_pipe_user_lines_are_inert_and_the_answer_is_data(store: SessionStore) -> None:
    # The `> ` lines are for a person (a piped-in file can hold anything); what a pipe run
    # printed stays byte for byte.
    session(store, turn(1, "look\x1b[2J\u202e here", "red \x1b[31mtext\u202e"))
    status, out, _ = show(store, "last")
    assert status == 0
    assert out == "> look^[[2J<U+202E> here\nred \x1b[31mtext\u202e\n"


def test_show_by_id_and_from_another_directory(store: SessionStore) -> None:
    there = session(store, turn(1, "there", "ok"), cwd=ELSEWHERE)
    status, out, err = show(store, there.id)
    assert (status, out) == (0, "> there\nok\n")
    assert err == f"dsh: session {there.id} was started in {ELSEWHERE}\n"


def test_show_last_is_the_one_continue_resumes(store: SessionStore) -> None:
    session(store, turn(1, "older", "ok"), mtime=1_000_000)
    session(store, turn(1, "newer", "ok"), mtime=2_000_000)
    session(store, turn(1, "other directory", "ok"), cwd=ELSEWHERE, mtime=3_000_000)
    assert show(store, "last")[1] == "> newer\nok\n"


def test_a_session_being_written_is_shown_and_not_locked(store: SessionStore) -> None:
    with store.create(HERE) as live:
        for record in turn(1, "first", "one"):
            live.append(record)
        live.append(TurnStart(2, "m"))
        live.append(UserText(2, "second"), durable=True)
        before = snapshot(store.home)
        status, out, err = show(store, live.id)
        assert snapshot(store.home) == before
        assert (status, out) == (0, "> first\none\n> second\n")
        assert err == (
            f"dsh: turn 2 of session {live.id} has not ended: a dsh is still running it, or "
            "one exited without ending it (resuming the session closes it)\n"
        )
        live.append(TurnEnd(2, "completed"), durable=True)  # the writer goes on


def test_a_torn_tail_is_shown_up_to_it_and_named(store: SessionStore) -> None:
    log = session(store, turn(1, "first", "one"))
    with log.path.open("ab") as file:
        file.write(b'{"type":"turn/start","seq":4,"ti')
    before = snapshot(store.home)
    status, out, err = show(store, log.id)
    assert snapshot(store.home) == before
    assert (status, out) == (1, "> first\none\n")
    assert err == (
        f"dsh: session log {log.path} ends in an incomplete line (line 6, 32 bytes): "
        "a write was cut short, or is still going on\n"
    )


def test_damage_in_the_middle_is_skipped_named_and_the_rest_shown(
    store: SessionStore,
) -> None:
    log = session(store, [*turn(1, "first", "one"), *turn(2, "second", "two")])
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines[3] = b"\x00\x00 not json\n"  # the first turn's answer
    log.path.write_bytes(b"".join(lines))
    status, out, err = show(store, log.id)
    assert (status, out) == (1, "> first\n> second\ntwo\n")
    assert err == (
        f"dsh: session log {log.path} is damaged at line 4: not JSON\n"
        f"dsh: session log {log.path} is damaged at line 5: seq 3 where 2 was expected\n"
    )


def test_bad_references_say_what_to_do(store: SessionStore) -> None:
    log = session(store, turn(1, "q", "a"))
    with pytest.raises(SessionLogError, match=r"no session 'nope' in .*dsh --sessions --all"):
        show(store, "nope")
    with pytest.raises(
        SessionLogError, match=rf"is a path; --show takes a session id: dsh --show {log.id}$"
    ):
        show(store, str(log.path))
    with pytest.raises(SessionLogError, match=r"'\./x\.jsonl' is a path; .*dsh --sessions lists"):
        show(store, "./x.jsonl")
    with pytest.raises(SessionLogError, match=f"no sessions yet for {ELSEWHERE}"):
        show(store, "last", cwd=ELSEWHERE)


def test_a_newer_format_is_refused(store: SessionStore) -> None:
    log = session(store, turn(1, "q", "a"))
    data = log.path.read_bytes().replace(b'"version":1', b'"version":99', 1)
    log.path.write_bytes(data)
    with pytest.raises(SessionLogError, match="written by a newer dsh"):
        show(store, log.id)


def test_the_front_door_entries_take_the_config(store: SessionStore) -> None:
    session(store, turn(1, "q", "a"))
    before = snapshot(store.home)
    config = parse_config(["--show", "last", "--home", str(store.home)], environ={})
    out, err = io.StringIO(), io.StringIO()
    assert show_session(config, "last", out, terminal=False, err=err, cwd=HERE) == 0
    assert (out.getvalue(), err.getvalue()) == ("> q\na\n", "")
    with pytest.raises(SessionLogError, match="no session 'nope' in "):
        show_session(config, "nope", out, terminal=False, err=err, cwd=HERE)
    config = parse_config(["--sessions", "--all", "--home", str(store.home)], environ={})
    out = io.StringIO()
    assert list_sessions(config, out, terminal=True, err=err, cwd=ELSEWHERE) == 0
    assert f"  {HERE}  q" in out.getvalue()
    assert snapshot(store.home) == before


class ClosedPipe(io.StringIO):
    """A stdout whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_a_stdout_that_fails_is_one_line_on_stderr(store: SessionStore) -> None:
    session(store, turn(1, "q", "a"))
    for run in (
        lambda out, err: print_transcript(store, HERE, "last", out=out, err=err, terminal=False),
        lambda out, err: print_listing(store, HERE, all_directories=False, out=out, err=err),
    ):
        err = io.StringIO()
        assert run(ClosedPipe(), err) == 1
        assert err.getvalue() == ("dsh: cannot write to standard output: [Errno 32] Broken pipe\n")


# --- the invariant, on real pipe runs ------------------------------------------------------


def run_dsh(
    env: dict[str, str], cwd: Path, *args: str, stdin: bytes
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*DSH, *args], input=stdin, env=env, cwd=cwd, capture_output=True, timeout=60, check=False
    )


def cli(env: dict[str, str], cwd: Path, *args: str, stdin: bytes) -> Run:
    """dsh's command line in-process (``tests/harness.py``), on the input a pipe would carry."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd)


def wait_for(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + 30  # generous: a bound for a hang, not a timing assertion
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def own_stub() -> Iterator[StubServer]:
    """A stub of this test's own: it scripts a stall that no other test must meet."""
    with StubServer() as server:
        yield server


@pytest.mark.slow
def test_show_without_user_and_tool_lines_is_the_pipe_runs_stdout(
    own_stub: StubServer, tmp_path: Path
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    work = Path(os.path.realpath(work))  # what the child's getcwd() says
    env = child_env(own_stub.url, home)
    stdout: list[bytes] = []

    # 1. Answers, reasoning, the output limit, a cut stream, a refused key, a rejected line,
    #    escapes passed through, a tool call, bytes that are not UTF-8.
    first = run_dsh(
        env,
        work,
        stdin=b"".join(
            [
                b"hello\n",
                b"think about it\n",
                b"limit\n",
                b"cut\n",
                b"x" * (300 * 1024) + b"\n",
                b"escape\n",
                b"toolread\n",
                b"caf\xe9 \x00 ok\n",
                b"auth\n",  # last: a refused key stops a pipe
            ]
        ),
    )
    assert first.returncode == 1, first.stderr
    stdout.append(first.stdout)

    # 2. SIGINT while text streams: the turn is aborted with its text kept.
    proc = subprocess.Popen(
        [*DSH, "--continue"],
        env=env,
        cwd=work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"slow answer please\n")
    proc.stdin.flush()
    # os.read, not proc.stdout.read: bytes left in the file object's buffer would be lost to
    # communicate(), which reads the descriptor.
    shown = os.read(proc.stdout.fileno(), 1 << 16)
    assert shown
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130
    stdout.append(shown + rest)

    # 3. A process killed while it waits for the model: the next run closes the turn.
    (log,) = home.rglob("session.jsonl")
    own_stub.enqueue(Stall(600))
    requests_before = len(own_stub.requests)
    proc = subprocess.Popen(
        [*DSH, "--continue"],
        env=env,
        cwd=work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    proc.stdin.write(b"this one stalls\n")
    proc.stdin.flush()
    # The request reached the stub (so the stall is taken), after the message was logged.
    wait_for(lambda: len(own_stub.requests) > requests_before, "the stalled request")
    assert b'"text":"this one stalls"' in log.read_bytes()
    proc.kill()
    killed_out, _ = proc.communicate(timeout=30)
    stdout.append(killed_out)

    # 4. The resuming run prints the interrupted line first, then its own turns.
    last = run_dsh(env, work, "--continue", stdin=b"after the crash\ntoolfail\nbye")
    assert last.returncode == 0, last.stderr
    assert last.stdout.startswith(INTERRUPTED_LINE.encode() + b"\n")
    stdout.append(last.stdout)

    expected = b"".join(stdout)
    store = SessionStore(home)
    out, err = io.StringIO(), io.StringIO()
    status = print_transcript(store, work, "last", out=out, err=err, terminal=False)
    assert status == 0, err.getvalue()
    transcript = out.getvalue()
    assert err.getvalue() == ""
    assert without_user_and_tool_lines(transcript).encode("utf-8") == expected
    # What was taken out is there too: every user line, and the tool lines.
    assert "> hello\nYou said: hello\n> think about it\n" in transcript
    assert "> caf\ufffd \ufffd ok\n" in transcript
    assert "[tool read] " in transcript
    assert transcript.count("[turn rejected] ") == 1

    # The same through a real process's stdout, in bytes.
    script = (
        "import sys; from pathlib import Path; from dsh_core.session import SessionStore; "
        "from dsh_stdio.commands.sessions import print_transcript; "
        f"sys.exit(print_transcript(SessionStore(Path({str(home)!r})), Path.cwd(), 'last', "
        "out=sys.stdout, err=sys.stderr, terminal=False))"
    )
    shown_by_process = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "PYTHONPATH": str(Path(__file__).parents[2])},
        cwd=work,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert shown_by_process.returncode == 0, shown_by_process.stderr
    assert shown_by_process.stdout == transcript.encode("utf-8")

    # Showing changed nothing: --continue still finds the session, whole.
    assert json.loads(log.read_bytes().splitlines()[-1])["type"] == "turn/end"


def test_the_real_cli_lists_and_shows(stub: StubServer, tmp_path: Path) -> None:
    """The command line (main, in-process) lists and shows, reading without writing."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    work = Path(os.path.realpath(work))
    env = child_env(stub.url, home)
    first = cli(env, work, stdin=b"hello\ncut\n" + b"x" * (300 * 1024) + b"\nbye\n")
    assert first.returncode == 1
    before = snapshot(home)
    shown = cli(env, work, "--show", "last", stdin=b"")
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr_bytes == b""
    assert without_user_and_tool_lines(shown.stdout).encode() == first.stdout_bytes
    listed = cli(env, work, "--sessions", stdin=b"")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("\n") == 2  # the header and the one session
    assert b"4 turns  completed  hello" in listed.stdout_bytes
    no_key = {k: v for k, v in env.items() if k != "DEEPSEEK_API_KEY"}
    assert cli(no_key, work, "--sessions", stdin=b"").returncode == 0  # needs no key
    for bad, says in [
        ("nope", b"no session 'nope' in "),
        (str(next(home.rglob("session.jsonl"))), b"is a path; --show takes a session id: "),
    ]:
        refused = cli(env, work, "--show", bad, stdin=b"")
        assert (refused.returncode, refused.stdout_bytes) == (2, b""), refused.stderr
        assert refused.stderr_bytes.startswith(b"dsh: startup failed: ")
        assert says in refused.stderr_bytes and refused.stderr_bytes.count(b"\n") == 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    empty = cli(env, elsewhere, "--sessions", stdin=b"")
    assert (empty.returncode, empty.stdout_bytes) == (0, b"")
    assert empty.stderr_bytes.startswith(b"dsh: no sessions yet for ")
    assert cli(env, elsewhere, "--show", "last", stdin=b"").returncode == 2
    assert snapshot(home) == before
    # --continue afterwards picks the same session, which was not touched.
    again = cli(env, work, "--continue", stdin=b"once more\n")
    assert again.returncode == 0, again.stderr
    assert len(list(home.rglob("session.jsonl"))) == 1


def test_replay_keeps_a_step_without_text_quiet(store: SessionStore) -> None:
    # A step that only thought and then called a tool prints nothing but the tool lines.
    call = ToolCall("c1", "glob", "{}")
    records: list[Record] = [
        TurnStart(1, "m"),
        UserText(1, "q"),
        AssistantStep(1, 1, "", reasoning="thinking", tool_calls=(call,)),
        ToolResult(1, 1, "c1", ToolOutput("(no output)")),
        AssistantStep(1, 2, "answer"),
        TurnEnd(1, "max-steps"),
    ]
    session(store, records)
    status, out, _ = show(store, "last")
    assert status == 0
    limit = "[turn stopped at the step limit] 2 steps (next: send a message to go on, or raise "
    assert out == (
        f"> q\n[tool glob] {{}}\n[tool glob done] 0 lines\nanswer\n{limit}--max-steps)\n"
    )
    assert without_user_and_tool_lines(out) == f"answer\n{limit}--max-steps)\n"


def test_summary_of_an_interrupted_and_an_aborted_session(store: SessionStore) -> None:
    session(store, turn(1, "q", "a", TurnEnd(1, "aborted", reason="user")), mtime=2_000_000)
    session(store, [TurnStart(1, "m"), UserText(1, "q"), TurnEnd(1, "interrupted")], mtime=1)
    ends = [line.split()[5] for line in listing(store)[1].splitlines()[1:]]
    assert ends == ["aborted", "interrupted"]
    summary = store.summaries(HERE)[0]
    assert summary.last_end == TurnEnd(1, "aborted", reason="user")


def test_a_session_id_may_be_shortened_to_any_unique_start(store: SessionStore) -> None:
    for _ in range(12):  # s0 ... s11
        session(store, turn(1, "q", "a"))
    session(store, turn(1, "q", "a"), cwd=ELSEWHERE)  # s12, in another directory
    assert session_id(store, "s12") == "s12"
    assert session_id(store, "s5") == "s5"
    assert session_id(store, "s1") == "s1"  # an exact id wins over the longer ones it begins
    with pytest.raises(SessionLogError) as ambiguous:
        session_id(store, "s")
    assert ambiguous.value.message == (
        "'s' is the start of 13 session ids (s0, s1, s10, s11, s12 and 8 more): type more of the id"
    )
    with pytest.raises(SessionLogError, match=r"^no session 'x' in .*\(dsh --sessions --all"):
        session_id(store, "x")
    for unsafe in ("*", "s?", "../s1", ".s1", ""):
        with pytest.raises(SessionLogError, match="is not a session id"):
            session_id(store, unsafe)
