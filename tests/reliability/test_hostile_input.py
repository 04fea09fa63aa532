"""Hostile input, end to end: bytes that are not text, enormous lines, control sequences in the
model's answer, a 50 MB answer, session files edited by hand, and a home that cannot be written.

Runs go through dsh's ``main`` in-process (``tests/harness.py``), except where the process is
the point, which run the real dsh and are marked slow: its memory under a 10 MiB line or a
50 MiB answer, a read-only or full file system (mount namespaces, a file size limit).

On a terminal, model text is neutralised; that is checked by ``tests/dsh_stdio/test_repl.py``
(pexpect) and not repeated here. On a pipe the model's text is data and must pass unchanged.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from dsh_core.testing import ESCAPE_TEXT, Answer, RawStream, StubServer
from tests.harness import run_in_process
from tests.reliability.conftest import (
    DSH,
    Live,
    Run,
    assert_log_whole,
    assert_no_canary,
    assert_sane,
    read_events,
    single_log,
)
from tests.reliability.faults import sse_event

MIB = 1 << 20


# Input bytes.


def test_bytes_that_are_not_clean_text(env: dict[str, str]) -> None:
    lines = [
        b"caf\xe9 au lait\n",  # Latin-1, not UTF-8
        b"\xff\xfe\xc0\xaf overlong\n",  # never valid UTF-8
        b"\xed\xa0\x80 surrogate\n",  # a UTF-16 surrogate encoded as UTF-8: invalid
        b"nul\x00byte\n",
        b"crlf line\r\n",
        b"   \t  \n",  # whitespace only: not a turn
        b"\n",
        b"\r\n",
        b"an ANSI colour \x1b[31m in the input\n",
        b"the last line has no newline",
    ]
    run = run_in_process(env, stdin=b"".join(lines))
    texts = [
        "caf\ufffd au lait",
        "\ufffd\ufffd\ufffd\ufffd overlong",
        "\ufffd\ufffd\ufffd surrogate",
        "nul\ufffdbyte",
        "crlf line",
        "an ANSI colour \x1b[31m in the input",
        "the last line has no newline",
    ]
    assert run.stdout == "".join(f"You said: {text}\n" for text in texts)
    assert run.returncode == 0
    assert [m["text"] for m in run.of_type("user/message")] == texts
    assert run.turn_ends() == [{"kind": "completed"}] * len(texts)
    assert_sane(run)


@pytest.mark.slow
def test_ten_megabyte_line_is_refused_without_reading_it_into_memory(env: dict[str, str]) -> None:
    live = Live(env)
    try:
        live.send(b"z" * (10 * MIB) + b"\n")
        rejection = live.read_until(b"\n")
        peak_kb = live.status()["VmHWM"]
        live.send(b"after it\n")
        live.read_until(b"You said: after it\n")
        run = live.finish()
    finally:
        live.kill()
    assert rejection == (
        b"[turn rejected] the message is 10 MiB, over the limit of 256 KiB per message: "
        b"shorten it, or send it in parts\n"
    )
    assert run.returncode == 1  # a rejected turn
    assert peak_kb < 100 * 1024, f"peak RSS {peak_kb} kB after a 10 MiB line"
    assert [e["kind"] for e in run.turn_ends()] == ["rejected", "completed"]
    assert run.log_path().stat().st_size < 4096  # the refused message is not stored
    assert_sane(run)


# Model output on a pipe is data.


def test_escape_sequences_and_bidi_pass_through_a_pipe(env: dict[str, str]) -> None:
    run = run_in_process(env, stdin=b"escape\n")
    assert run.stdout_bytes == ESCAPE_TEXT.encode()
    assert run.returncode == 0
    assert run.of_type("assistant/message") == [{"turn": 1, "step": 1, "text": ESCAPE_TEXT}]
    assert_sane(run)


def test_every_control_and_separator_passes_through(stub: StubServer, env: dict[str, str]) -> None:
    text = "C1 CSI:\x9b31m NUL:\x00 DEL:\x7f LS:\u2028 PS:\u2029 NEL:\x85 FS:\x1c CR:\r end"
    stub.enqueue(Answer(text))
    run = run_in_process(env, stdin=b"controls\n")
    assert run.stdout_bytes == (text + "\n").encode()
    assert run.of_type("assistant/message") == [{"turn": 1, "step": 1, "text": text}]
    assert_sane(run)


def test_a_lone_surrogate_in_the_answer(stub: StubServer, env: dict[str, str]) -> None:
    # JSON can carry half of a UTF-16 pair ("\\ud800"); no UTF-8 stream can write it.
    events = (sse_event("half \ud800 pair"), sse_event("", "stop"), b"data: [DONE]\n\n")
    stub.enqueue(RawStream(events))
    run = run_in_process(env, stdin=b"surrogate\n")
    assert run.stdout_bytes == "half \ufffd pair\n".encode()
    assert run.of_type("assistant/message") == [{"turn": 1, "step": 1, "text": "half \ud800 pair"}]
    assert_sane(run)
    shown = run_in_process(env, "--show", "last")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout_bytes == "> surrogate\nhalf \ufffd pair\n".encode()


@pytest.mark.slow
def test_fifty_megabyte_answer(stub: StubServer, env: dict[str, str]) -> None:
    size = 50 * MIB
    stub.enqueue(
        RawStream(
            (*[sse_event("z" * MIB)] * 50, sse_event("", "stop"), b"data: [DONE]\n\n"),
        )
    )
    live = Live(env)
    try:
        live.send(b"a long answer please\n")
        assert live.proc.stdout is not None
        received = 0
        wrong = 0
        while received < size + 1:
            piece = os.read(live.proc.stdout.fileno(), MIB)
            assert piece, f"stdout ended after {received} bytes"
            received += len(piece)
            wrong += len(piece) - piece.count(b"z")
        peak_kb = live.status()["VmHWM"]
        live.send(b"and now?\n")
        run = live.finish()
    finally:
        live.kill()
    assert (received, wrong) == (size + 1, 1)  # the answer, then its newline
    assert re.fullmatch(
        r"\[turn rejected\] the conversation no longer fits the model's context window "
        r"\(about 15,7\d\d,\d\d\d tokens, the window is 1,048,576; compacting cannot help: "
        r"the request for its summary would not fit either\): start a fresh session \(send the "
        r"rest to a new dsh run, without --continue or --resume\), or shorten the message\n",
        run.stdout,
    ), run.stdout[:300]
    assert run.returncode == 1
    # Held as deltas, joined, encoded as one JSON line: a few copies, not unbounded.
    assert peak_kb < 8 * size // 1024, f"peak RSS {peak_kb} kB for a 50 MiB answer"
    answers = run.of_type("assistant/message")
    assert len(answers) == 1 and len(answers[0]["text"]) == size
    assert [e["kind"] for e in run.turn_ends()] == ["completed", "rejected"]
    assert_sane(run)
    print(f"50 MiB answer: peak RSS {peak_kb / 1024:.0f} MiB, {run.seconds:.1f} s")


# Session files edited by hand.


def three_turns(env: dict[str, str]) -> Path:
    run = run_in_process(env, stdin=b"one\ntwo\nthree\n")
    assert run.returncode == 0, run.stderr
    return run.log_path()


def test_bad_json_inside_a_finished_turn_is_refused(env: dict[str, str]) -> None:
    log = three_turns(env)
    lines = log.read_bytes().splitlines(keepends=True)
    answer = next(i for i, line in enumerate(lines) if b'"assistant/message"' in line)
    end = next(i for i, line in enumerate(lines) if b'"turn/end"' in line)
    lines[answer] = b'{"type":"assistant/message","seq":2,"data":{"turn":1,"text":"You said\n'
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    run = run_in_process(env, "--continue", stdin=b"four\n")
    assert run.stderr == (
        f"dsh: startup failed: session log {log} is damaged at line {answer + 1}: not JSON; it "
        f"comes before the complete turn/end on line {end + 1}, so dsh will not repair it\n"
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert log.read_bytes() == before
    assert_sane(run, log_whole=False)


def test_unknown_event_types_and_end_kinds_are_tolerated(env: dict[str, str]) -> None:
    log = three_turns(env)
    events = read_events(log)
    # The last turn/end gets a kind from the future; a note of an unknown type follows it.
    last = log.read_bytes().splitlines(keepends=True)
    end = json.loads(last[-1])
    end["data"]["reason"] = {"kind": "paused-by-a-newer-dsh", "until": "tomorrow"}
    last[-1] = json.dumps(end, separators=(",", ":")).encode() + b"\n"
    note = {
        "type": "note/added-by-hand",
        "seq": len(events),
        "time": "2026-11-30T09:00:00.000Z",
        "data": {"text": "remember the milk", "turn": 99},
    }
    last.append(json.dumps(note, separators=(",", ":")).encode() + b"\n")
    log.write_bytes(b"".join(last))
    before = log.read_bytes()
    run = run_in_process(env, "--continue", stdin=b"four\n")
    assert run.stdout == "You said: four\n"  # no outcome line for an unknown kind
    # The usage notice and the session's name only.
    assert (run.returncode, run.stderr.count("\n")) == (0, 2), run.stderr
    after = log.read_bytes()
    assert after.startswith(before)  # kept byte for byte
    added = [json.loads(line) for line in after[len(before) :].splitlines()]
    assert [e["seq"] for e in added] == list(range(len(events) + 1, len(events) + 1 + len(added)))
    assert (added[0]["type"], added[0]["data"]["turn"]) == ("turn/start", 4)
    assert_sane(run, log_whole=False)


def test_future_format_version_is_refused(env: dict[str, str]) -> None:
    log = three_turns(env)
    lines = log.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["version"] = 2
    lines[0] = json.dumps(header, separators=(",", ":")).encode() + b"\n"
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    run = run_in_process(env, "--continue", stdin=b"four\n")
    assert run.stderr == (
        f"dsh: startup failed: session log {log} is format version 2, written by a newer dsh; "
        "this dsh reads version 1: upgrade dsh to open it\n"
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert log.read_bytes() == before
    assert_sane(run, log_whole=False)


def test_damage_inside_the_open_turn_is_moved_aside(env: dict[str, str]) -> None:
    log = three_turns(env)
    seq = len(read_events(log))
    start = {
        "type": "turn/start",
        "seq": seq,
        "time": "2026-11-30T09:00:00.000Z",
        "data": {"turn": 4, "model": "deepseek-v4-flash"},
    }
    damage = b'{"type":"user/message","seq":' + str(seq + 1).encode() + b',"da\xff\x00ta\n'
    with log.open("ab") as file:
        file.write(json.dumps(start, separators=(",", ":")).encode() + b"\n" + damage)
    run = run_in_process(env, "--continue", stdin=b"four\n")
    assert run.stdout == "[turn interrupted by a previous process exit]\nYou said: four\n"
    assert run.returncode == 0
    (sidecar,) = log.parent.glob("session.jsonl.damaged-*")
    assert sidecar.read_bytes() == damage
    assert sidecar.stat().st_mode & 0o777 == 0o600
    assert f"line {seq + 3} of {log} was damaged (not UTF-8)" in run.stderr
    assert "closed it as interrupted" in run.stderr
    kinds = [e["kind"] for e in run.turn_ends()]
    assert kinds == ["completed", "completed", "completed", "interrupted", "completed"]
    assert_sane(run)


# A home that cannot be written.


def _private_mounts_work() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        [unshare, "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(
    not _private_mounts_work(),
    reason="needs root and mount namespaces (unshare -m) for a read-only or full file system",
)


def in_private_mounts(script: str, env: dict[str, str], stdin: bytes) -> Run:
    """Run ``script`` (sh) in a mount namespace of its own: its mounts vanish with it."""
    result = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return Run(result.returncode, result.stdout, result.stderr, Path(env["DSH_HOME"]), 0.0)


@pytest.mark.slow
@needs_mounts
def test_read_only_home(env: dict[str, str]) -> None:
    log = three_turns(env)
    before = log.read_bytes()
    home = shlex.quote(env["DSH_HOME"])
    dsh = " ".join(shlex.quote(part) for part in DSH)
    readonly = f"mount --bind {home} {home} && mount -o remount,bind,ro {home} && "
    resumed = in_private_mounts(f"{readonly} exec {dsh} --continue", env, b"four\n")
    fresh = in_private_mounts(f"{readonly} exec {dsh}", env, b"four\n")
    assert resumed.stderr == (
        f"dsh: startup failed: cannot open session log {log}: [Errno 30] Read-only file "
        f"system: '{log}'\n"
    )
    assert re.fullmatch(
        r"dsh: startup failed: cannot create session log (\S+)/session\.jsonl: \[Errno 30\] "
        r"Read-only file system: '\1'\n",
        fresh.stderr,
    ), fresh.stderr
    for run in (resumed, fresh):
        assert (run.returncode, run.stdout) == (2, "")
        assert_sane(run)
    assert log.read_bytes() == before
    assert len(list(Path(env["DSH_HOME"]).rglob("session.jsonl"))) == 1


FULL_LINE = b"four " + b"q" * 9000 + b"\n"
"""Larger than the room left: its write fails part way."""


def _check_full_disk(run: Run, log: Path, before: bytes, errno_text: str) -> None:
    """What must hold today: a clear line, no traceback, nothing already written lost."""
    text = run.stdout + run.stderr
    assert "Traceback" not in text
    assert f"cannot write session log {log}: {errno_text}" in text, text
    assert run.returncode != 0
    assert_no_canary(run.home, run.stdout, run.stderr)
    after = log.read_bytes()
    assert after.startswith(before)  # nothing written before is lost or changed
    assert after.count(b"\n") == len(after.splitlines())  # no torn line left behind


def _limited(size: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def _run_file_size_limited(env: dict[str, str], log: Path) -> Run:
    """dsh with RLIMIT_FSIZE just above the log's size: its next large write gets EFBIG."""
    limit = log.stat().st_size + 300
    result = subprocess.run(
        [*DSH, "--continue"],
        input=FULL_LINE,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: _limited(limit),
    )
    return Run(result.returncode, result.stdout, result.stderr, Path(env["DSH_HOME"]), 0.0)


@pytest.mark.slow
def test_full_file_system_as_a_file_size_limit(env: dict[str, str]) -> None:
    """RLIMIT_FSIZE works everywhere without privileges: write() fails with EFBIG."""
    log = three_turns(env)
    before = log.read_bytes()
    run = _run_file_size_limited(env, log)
    _check_full_disk(run, log, before, "[Errno 27] File too large")
    # With room again, the next start loads the log and closes the turn the failure left open.
    # The failed message was rolled back, so it is not in the history; its turn/start was
    # written, and nothing could close that turn, so the load says so.
    again = run_in_process(env, "--continue", stdin=b"five\n")
    assert again.stdout == "[turn interrupted by a previous process exit]\nYou said: five\n"
    assert again.returncode == 0, again.stderr
    assert log.read_bytes().startswith(before)
    assert_sane(again)


@pytest.mark.slow
@needs_mounts
def test_full_file_system(env: dict[str, str], tmp_path: Path) -> None:
    """A real ENOSPC: the home copied onto a tiny tmpfs, filled up, in a private namespace."""
    log = three_turns(env)
    before = log.read_bytes()
    small, out = tmp_path / "small", tmp_path / "out"
    small.mkdir()
    out.mkdir()
    home, q_small, q_out = (shlex.quote(str(p)) for p in (Path(env["DSH_HOME"]), small, out))
    dsh = " ".join(shlex.quote(part) for part in DSH)
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {q_small} && cp -a {home}/. {q_small}/ && "
        f"(dd if=/dev/zero of={q_small}/filler bs=4096 count=64 2>/dev/null; true) && "
        f"DSH_HOME={q_small} {dsh} --continue; status=$?; "
        f"cp -a {q_small}/sessions {q_out}/; exit $status"
    )
    run = in_private_mounts(script, env, FULL_LINE)
    full_log = out / log.relative_to(Path(env["DSH_HOME"]))
    inner_log = small / log.relative_to(Path(env["DSH_HOME"]))
    run.stdout_bytes = run.stdout_bytes.replace(str(inner_log).encode(), str(full_log).encode())
    run.stderr_bytes = run.stderr_bytes.replace(str(inner_log).encode(), str(full_log).encode())
    _check_full_disk(run, full_log, before, "[Errno 28] No space left on device")
    assert_log_whole_after_load(env, out)


def assert_log_whole_after_load(env: dict[str, str], home: Path) -> None:
    again = run_in_process(dict(env, DSH_HOME=str(home)), "--continue", stdin=b"five\n")
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith("five\n")
    assert_log_whole(single_log(home))


@pytest.mark.slow
def test_full_file_system_fails_the_turn_with_an_outcome_line(env: dict[str, str]) -> None:
    """The turn fails with its outcome line; the pipe stops, since nothing more can be stored."""
    log = three_turns(env)
    limit = log.stat().st_size + 300
    result = subprocess.run(
        [*DSH, "--continue"],
        input=FULL_LINE + b"five\n",
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: _limited(limit),
    )
    assert result.stdout.decode() == (
        f"[turn failed SESSION_LOG] cannot write session log {log}: [Errno 27] File too large\n"
    )
    assert result.returncode == 1
    assert b"internal error" not in result.stderr and b"Traceback" not in result.stderr
    # The pipe stops there, and says why the next line ("five") went unanswered.
    assert re.search(
        rb"dsh: stopped reading input: the session log cannot be written\n"
        rb"dsh: session \S+ \(dsh -r \S+ to resume\)\n\Z",
        result.stderr,
    )
