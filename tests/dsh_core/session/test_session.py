"""The session log: layout, modes, format, durability, and every repair SPEC section 6 names."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsh_core import error_chain
from dsh_core.errors import SessionLogError, UsageError
from dsh_core.session import (
    FORMAT_VERSION,
    SessionEvent,
    SessionLog,
    SessionStore,
    cwd_key,
    encode_line,
    format_time,
    read_log,
)
from dsh_core.session.events import (
    AssistantStep,
    SystemPrompt,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    UserText,
)
from tests.conftest import CANARY_KEY

START = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
CWD = Path("/home/ann/src/project")


def ticking(step: timedelta = timedelta(milliseconds=250)) -> Callable[[], datetime]:
    """A clock that advances ``step`` on every call, from START."""
    moments = (START + n * step for n in range(1_000_000))
    return lambda: next(moments)


def numbered(prefix: str = "s") -> Callable[[], str]:
    counter = iter(range(1_000_000))
    return lambda: f"{prefix}{next(counter)}"


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap os.fsync; the returned list grows by one fd per call."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def one_turn(log: SessionLog, turn: int, *, end: bool = True) -> None:
    log.append(TurnStart(turn, "m"))
    log.append(UserText(turn, f"question {turn}"), durable=True)
    if end:
        log.append(AssistantStep(turn, 1, f"answer {turn}"))
        log.append(TurnEnd(turn, "completed"), durable=True)


# --- layout, modes, format ------------------------------------------------------------------


def test_layout_and_header(store: SessionStore, log: SessionLog) -> None:
    assert log.path == store.root / cwd_key(str(CWD)) / "s0" / "session.jsonl"
    assert log.id == "s0"
    assert log.cwd == str(CWD)
    assert log.path.read_bytes() == (
        b'{"type":"session","version":1,"id":"s0",'
        b'"created":"2026-11-30T09:00:00.000Z","cwd":"/home/ann/src/project"}\n'
    )


def test_modes_are_set_explicitly_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)  # the most permissive umask: mkdir/open modes alone would leave 0777
    try:
        log = SessionStore(tmp_path / "home", clock=ticking()).create(CWD)
    finally:
        os.umask(old)
    with log:
        assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
        for directory in (log.path.parent, log.path.parent.parent, tmp_path / "home/sessions"):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
        assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700


def test_envelope_and_gapless_seq(log: SessionLog) -> None:
    first = log.append(TurnStart(1, "m"))
    second = log.append(
        UnknownEvent("x/custom", {"nested": {"ok": True}, "text": "你好 \u2028 🙂"})
    )
    assert first == SessionEvent(0, "2026-11-30T09:00:00.250Z", TurnStart(1, "m"))
    assert (first.type, first.data) == ("turn/start", {"turn": 1, "model": "m"})
    assert second.seq == 1
    assert lines(log.path)[1:] == [
        b'{"type":"turn/start","seq":0,"time":"2026-11-30T09:00:00.250Z",'
        b'"data":{"turn":1,"model":"m"}}\n',
        b'{"type":"x/custom","seq":1,"time":"2026-11-30T09:00:00.500Z",'
        b'"data":{"nested":{"ok":true},"text":"'
        + "你好 ".encode()
        + b"\\u2028 "
        + "🙂".encode()
        + b'"}}\n',
    ]
    # Readers that split with str.splitlines() still see one event per line.
    assert len(log.path.read_text(encoding="utf-8").splitlines()) == 3
    assert log.events == [first, second]


def test_an_ascii_line_escapes_every_character_a_terminal_could_act_on() -> None:
    # Second review (D6): --json on a terminal had an encoder of its own, without the
    # UsageError of a value that is no JSON.
    value = {"text": "é\x7f\x9b2J\u202eevil\u2028 \ud83d 🙂"}
    line = encode_line(value, ascii=True)
    assert line == (
        b'{"text":"\\u00e9\\u007f\\u009b2J\\u202eevil\\u2028 \\ud83d \\ud83d\\ude42"}\n'
    )
    assert json.loads(line) == value
    with pytest.raises(UsageError, match="not JSON-serialisable"):
        encode_line({"text": object()}, ascii=True)


def test_lone_surrogates_stay_valid_utf8_and_round_trip(
    store: SessionStore, log: SessionLog
) -> None:
    text = "split pair \ud83d then more"
    log.append(UserText(1, text))
    log.path.read_bytes().decode("utf-8")  # still valid UTF-8
    log.close()
    loaded, _ = store.open(log.id)
    with loaded:
        assert loaded.events[0].data["text"] == text


def test_format_time() -> None:
    assert format_time(datetime(2026, 1, 2, 3, 4, 5, 678999, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.678Z"
    )
    assert format_time(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"


def test_cwd_key_is_readable_and_collision_free() -> None:
    assert cwd_key("/home/ann/src/dsh").startswith("home-ann-src-dsh-")
    assert cwd_key("/a/b") != cwd_key("/a-b")
    assert cwd_key("/").startswith("root-")
    assert cwd_key("/.hidden/x y").startswith("hidden-x_y-")
    long = cwd_key("/" + "/".join(["segment"] * 40))
    assert len(long) <= 48 + 13


def test_default_ids_are_unique_and_sortable(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    first, second = store.create(CWD), store.create(CWD)
    with first, second:
        assert first.id != second.id
        assert first.id[:15] <= second.id[:15]


@pytest.mark.parametrize("bad", ["", "../escape", ".hidden", "a/b", "x" * 200])
def test_unsafe_ids_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError):
        SessionStore(tmp_path, new_id=lambda: bad).create(CWD)
    with pytest.raises(SessionLogError, match="no session"):
        SessionStore(tmp_path).open(bad)


def test_an_existing_id_is_not_overwritten(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, new_id=lambda: "same")
    with store.create(CWD), pytest.raises(SessionLogError, match="already exists"):
        store.create(CWD)


def test_durable_appends_fsync(log: SessionLog, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_fsyncs(monkeypatch)
    log.append(UnknownEvent("a", {}))
    assert calls == []
    log.append(UnknownEvent("b", {}), durable=True)
    assert len(calls) == 1


def test_the_key_is_never_written(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY_KEY)
    with store.create(CWD) as log:
        one_turn(log, 1)
    for path in store.home.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes()


# --- write failures ---------------------------------------------------------------------------


def test_write_failure_names_the_file_and_keeps_the_cause(
    log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log.append(UnknownEvent("a", {}))
    before = log.path.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:10]))  # a torn write, then the disk is full
        monkeypatch.setattr(os, "write", failing)
        return 10

    def failing(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(SessionLogError) as caught:
        log.append(UnknownEvent("b", {"text": "long enough to be torn"}))
    assert error_chain(caught.value) == (
        f"cannot write session log {log.path}: [Errno 28] No space left on device"
    )
    monkeypatch.setattr(os, "write", real_write)
    assert log.path.read_bytes() == before  # the torn piece was cut back off
    assert log.append(UnknownEvent("c", {})).seq == 1  # and the seq was not spent


def test_after_an_unrecoverable_failure_the_log_stops_writing(
    log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.EIO, "Input/output error")

    def no_truncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", failing)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(SessionLogError):
        log.append(UnknownEvent("a", {}))
    monkeypatch.undo()
    with pytest.raises(SessionLogError, match="after an earlier failure") as caught:
        log.append(UnknownEvent("b", {}))
    assert "Input/output error" in error_chain(caught.value)


def test_appending_after_close_is_misuse(log: SessionLog) -> None:
    log.close()
    log.close()  # idempotent
    with pytest.raises(UsageError):
        log.append(UnknownEvent("a", {}))


def test_non_json_data_is_misuse(log: SessionLog) -> None:
    with pytest.raises(UsageError, match="not JSON-serialisable"):
        log.append(UnknownEvent("a", {"value": object()}))
    assert log.append(UnknownEvent("b", {})).seq == 0


def test_create_failure_is_a_session_log_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "sessions").write_text("a file where a directory belongs")
    with pytest.raises(SessionLogError, match="cannot create session log") as caught:
        SessionStore(home).create(CWD)
    assert "Errno" in error_chain(caught.value)


# --- loading: whole logs ----------------------------------------------------------------------


def test_round_trip(store: SessionStore, log: SessionLog) -> None:
    one_turn(log, 1)
    one_turn(log, 2)
    log.close()
    loaded, report = store.open("s0")
    with loaded:
        assert report.notices == () and report.interrupted_turn is None
        assert loaded.events == log.events
        assert (loaded.id, loaded.cwd, loaded.created) == (log.id, log.cwd, log.created)
        assert loaded.append(UnknownEvent("next", {})).seq == 8


def test_unknown_event_types_and_fields_are_tolerated(store: SessionStore, log: SessionLog) -> None:
    with log.path.open("ab") as file:
        file.write(b'{"type":"future/thing","seq":0,"time":"t","data":{"x":1},"extra":[1]}\n')
    log.close()
    loaded, report = store.open("s0")
    with loaded:
        assert loaded.events == [SessionEvent(0, "t", UnknownEvent("future/thing", {"x": 1}))]
        assert report.notices == ()


def test_unknown_id(store: SessionStore) -> None:
    with pytest.raises(SessionLogError, match="no session 'nope'"):
        store.open("nope")


def test_a_newer_format_is_refused_saying_so(store: SessionStore, log: SessionLog) -> None:
    header = json.loads(lines(log.path)[0])
    header["version"] = FORMAT_VERSION + 1
    log.path.write_text(json.dumps(header) + "\n")
    log.close()
    with pytest.raises(SessionLogError) as caught:
        store.open("s0")
    assert str(caught.value) == (
        f"session log {log.path} is format version 2, written by a newer dsh; "
        "this dsh reads version 1: upgrade dsh to open it"
    )


def test_a_log_in_use_is_refused(store: SessionStore, log: SessionLog) -> None:
    with pytest.raises(SessionLogError, match="in use by another dsh process"):
        store.open("s0")
    log.close()
    store.open("s0")[0].close()


# --- loading: repairs -------------------------------------------------------------------------


def test_open_turn_is_closed_durably_and_reported(
    store: SessionStore, log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_turn(log, 1)
    one_turn(log, 2, end=False)
    log.close()
    before = log.path.read_bytes()
    fsyncs = count_fsyncs(monkeypatch)
    loaded, report = store.open("s0")
    with loaded:
        assert report.interrupted_turn == 2
        assert report.notices == (
            "turn 2 was left open by a process that exited; closed it as interrupted",
        )
        assert loaded.events[-1].type == "turn/end"
        assert loaded.events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}
        assert loaded.events[-1].seq == 6
        assert fsyncs  # durable
        after = log.path.read_bytes()
        assert after.startswith(before)  # appended, nothing rewritten
    again, report = store.open("s0")
    with again:
        assert report.notices == ()  # a repaired log loads clean


def test_torn_tail_is_truncated_and_reported(store: SessionStore, log: SessionLog) -> None:
    one_turn(log, 1)
    log.close()
    whole = log.path.read_bytes()
    torn = b'{"type":"turn/start","seq":4,"ti'
    log.path.write_bytes(whole + torn)
    loaded, report = store.open("s0")
    with loaded:
        assert report.notices == (
            f"truncated a torn last line (line 6, {len(torn)} bytes) "
            f"left by an interrupted write to {log.path}",
        )
        assert report.interrupted_turn is None
        assert log.path.read_bytes() == whole
        assert len(loaded.events) == 4


def test_torn_tail_inside_an_open_turn(store: SessionStore, log: SessionLog) -> None:
    one_turn(log, 1)
    one_turn(log, 2, end=False)
    log.close()
    whole = log.path.read_bytes()
    log.path.write_bytes(whole + b'{"type":"assistant/mess')
    loaded, report = store.open("s0")
    with loaded:
        assert len(report.notices) == 2
        assert report.notices[0].startswith("truncated a torn last line (line 8, 23 bytes)")
        assert report.interrupted_turn == 2
        assert [e.seq for e in loaded.events] == list(range(7))


def test_damage_before_the_last_turn_end_is_refused_naming_file_and_line(
    store: SessionStore, log: SessionLog
) -> None:
    one_turn(log, 1)
    one_turn(log, 2)
    log.close()
    content = lines(log.path)
    content[3] = b'{"type":"assistant/message","seq":2,GARBAGE\n'
    damaged = b"".join(content)
    log.path.write_bytes(damaged)
    with pytest.raises(SessionLogError) as caught:
        store.open("s0")
    assert str(caught.value) == (
        f"session log {log.path} is damaged at line 4: not JSON; it comes before the complete "
        "turn/end on line 5, so dsh will not repair it"
    )
    assert log.path.read_bytes() == damaged  # refused means untouched
    assert list(log.path.parent.iterdir()) == [log.path]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"\n", "not JSON"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"type":"x","seq":4,"time":"t"}\n', "not an event (type, seq, time, data)"),
        (b'{"type":"x","seq":7,"time":"t","data":{}}\n', "seq 7 where 4 was expected"),
        (b'{"type":"x","seq":true,"time":"t","data":{}}\n', "seq True where 4 was expected"),
        (
            b'{"type":"turn/start","seq":4,"time":"t","data":{}}\n',
            "a turn/start event whose data is wrong (no turn)",
        ),
        (b'{"type":"x","seq":4,"time":"\xff","data":{}}\n', "not UTF-8"),
    ],
)
def test_each_kind_of_damage_is_named(
    store: SessionStore, log: SessionLog, line: bytes, why: str
) -> None:
    one_turn(log, 1)
    one_turn(log, 2)
    log.close()
    content = lines(log.path)
    content.insert(5, line)  # after turn 1's turn/end, before turn 2
    log.path.write_bytes(b"".join(content))
    with pytest.raises(SessionLogError, match=re.escape(f"is damaged at line 6: {why}")):
        store.open("s0")


def test_damage_after_the_last_turn_end_is_moved_byte_for_byte(
    store: SessionStore, log: SessionLog
) -> None:
    one_turn(log, 1)
    one_turn(log, 2, end=False)
    log.append(AssistantStep(2, 1, "partial"))
    log.close()
    content = lines(log.path)
    good = b"".join(content[:7])  # header, turn 1, turn 2's start and message
    damaged = b'{"type":"assistant/message","seq":6,"ti\x00me":garbage}\n' + content[7] + b'{"tor'
    log.path.write_bytes(good + damaged)
    loaded, report = store.open("s0")
    with loaded:
        sidecar = log.path.with_name("session.jsonl.damaged-20261130T090002.000Z")
        assert report.notices == (
            f"line 8 of {log.path} was damaged (not JSON); moved it and everything after it "
            f"({len(damaged)} bytes) to {sidecar}",
            "turn 2 was left open by a process that exited; closed it as interrupted",
        )
        assert report.interrupted_turn == 2
        assert sidecar.read_bytes() == damaged
        assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
        assert log.path.read_bytes().startswith(good)
        assert [e.seq for e in loaded.events] == list(range(7))


def test_damage_right_after_a_turn_end_is_moved_without_closing_a_turn(
    store: SessionStore, log: SessionLog
) -> None:
    one_turn(log, 1)
    log.close()
    with log.path.open("ab") as file:
        file.write(b"not json\n")
    loaded, report = store.open("s0")
    with loaded:
        assert len(report.notices) == 1 and "moved it" in report.notices[0]
        assert report.interrupted_turn is None


def test_two_repairs_in_the_same_millisecond_keep_both_sidecars(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: START, new_id=numbered())
    with store.create(CWD) as log:
        pass
    for _ in range(2):
        with log.path.open("ab") as file:
            file.write(b"junk\n")
        store.open(log.id)[0].close()
    names = sorted(p.name for p in log.path.parent.iterdir())
    assert names == [
        "session.jsonl",
        "session.jsonl.damaged-20261130T090000.000Z",
        "session.jsonl.damaged-20261130T090000.000Z-2",
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "the file is empty"),
        (b'{"type":"session","vers', "the header line is incomplete"),
        (b"garbage\n", "the header is not JSON"),
        (b'{"type":"other"}\n', "the first line is not a session header"),
        (
            b'{"type":"session","id":"s0","created":"c","cwd":"/"}\n',
            "the header has no valid format version",
        ),
        (b'{"type":"session","version":1,"created":"c","cwd":"/"}\n', "the header has no id"),
    ],
)
def test_a_bad_header_is_refused(
    store: SessionStore, log: SessionLog, content: bytes, why: str
) -> None:
    log.close()
    log.path.write_bytes(content)
    with pytest.raises(SessionLogError, match=re.escape(f"{log.path} is damaged at line 1: {why}")):
        store.open("s0")


# --- finding sessions -------------------------------------------------------------------------


def test_newest_and_summaries(store: SessionStore, tmp_path: Path) -> None:
    assert store.newest(CWD) is None
    assert store.summaries() == []
    logs = [store.create(CWD), store.create(CWD), store.create(Path("/elsewhere"))]
    for n, log in enumerate(logs):
        log.close()
        os.utime(log.path, (1_000_000 + n, 1_000_000 + n))
    os.utime(logs[0].path, (2_000_000, 2_000_000))  # s0 written most recently
    found = store.newest(CWD)
    assert found is not None
    with found[0] as newest:
        assert newest.id == "s0"
    assert [summary.id for summary in store.summaries(CWD)] == ["s0", "s1"]
    everything = store.summaries()
    assert [summary.id for summary in everything] == ["s0", "s2", "s1"]
    assert everything[1].cwd == "/elsewhere"
    assert everything[1].path == logs[2].path
    assert everything[1].updated == datetime.fromtimestamp(1_000_002, UTC)


def test_summaries_show_an_unreadable_session_as_damaged(store: SessionStore) -> None:
    with store.create(CWD) as good, store.create(CWD) as bad:
        bad.path.write_bytes(b"garbage\n")
    summaries = {summary.id: summary for summary in store.summaries(CWD)}
    assert summaries[good.id].damage is None
    damage = summaries[bad.id].damage
    assert damage is not None and "line 1" in damage


def test_newest_refuses_rather_than_skips_a_damaged_session(store: SessionStore) -> None:
    with store.create(CWD) as log:
        pass
    log.path.write_bytes(b"garbage\n")
    with pytest.raises(SessionLogError):
        store.newest(CWD)


def test_an_unused_session_is_discarded_and_a_used_one_kept(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    used = store.create(tmp_path)
    used.append(TurnStart(1, "m"), durable=True)
    assert used.discard_if_empty() is False
    used.close()
    unused = store.create(tmp_path)
    assert unused.discard_if_empty() is True
    assert not unused.path.exists() and not unused.path.parent.exists()
    found = store.newest(tmp_path)
    assert found is not None and found[0].id == used.id
    found[0].close()


# --- reading without a lock: summaries (dsh --sessions) and read_log (dsh --show) -----------


def files_state(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(path): (path.stat().st_mtime_ns, path.read_bytes() if path.is_file() else b"")
        for path in sorted(root.rglob("*"))
    }


def test_summaries_read_head_and_tail_and_match_what_newest_picks(
    store: SessionStore,
) -> None:
    assert store.summaries(CWD) == []  # no sessions directory yet: nothing, not an error
    with store.create(CWD) as older:
        one_turn(older, 1)
    with store.create(CWD) as newer:
        for n in (1, 2, 3):
            one_turn(newer, n)
        one_turn(newer, 4, end=False)
    with store.create(Path("/elsewhere")) as other:
        one_turn(other, 1)
    os.utime(older.path, (1_000_000, 1_000_000))
    os.utime(newer.path, (2_000_000, 2_000_000))
    os.utime(other.path, (3_000_000, 3_000_000))
    before = files_state(store.home)
    mine = store.summaries(CWD)
    assert [s.id for s in mine] == [newer.id, older.id]
    assert store.newest_path(CWD) == mine[0].path
    latest = mine[0]
    assert (latest.turns, latest.open, latest.last_end) == (4, True, None)
    assert (latest.first_user, latest.cwd, latest.damage) == ("question 1", str(CWD), None)
    assert latest.updated == datetime.fromtimestamp(2_000_000, UTC)
    assert mine[1].last_end == TurnEnd(1, "completed")
    assert [s.id for s in store.summaries()] == [other.id, newer.id, older.id]
    assert files_state(store.home) == before  # nothing locked, repaired or touched
    with store.open(newer.id)[0] as resumed:  # and the open turn is still there to repair
        assert resumed.events[-1].record == TurnEnd(4, "interrupted")


def test_summaries_refuse_an_unreadable_sessions_directory(tmp_path: Path) -> None:
    (tmp_path / "sessions").write_text("a file where the directory belongs\n")
    with pytest.raises(SessionLogError, match="is not a directory"):
        SessionStore(tmp_path).summaries()
    with pytest.raises(SessionLogError, match="cannot read the sessions") as caught:
        SessionStore(tmp_path / "sessions").summaries()  # its parent is a file
    assert isinstance(caught.value.__cause__, NotADirectoryError)


def test_a_log_that_cannot_be_read_is_summarised_not_raised(store: SessionStore) -> None:
    with store.create(CWD) as log:
        one_turn(log, 1)
    log.path.unlink()
    log.path.mkdir()  # session.jsonl is a directory now: open works, reading fails
    (summary,) = store.summaries(CWD)
    assert summary.id == log.id
    assert summary.damage is not None and "cannot read" in summary.damage


def test_read_log_reads_a_locked_log_as_it_is(store: SessionStore) -> None:
    with store.create(CWD) as log:
        one_turn(log, 1)
        one_turn(log, 2, end=False)
        before = files_state(store.home)
        stored = store.read(log.id)
        assert files_state(store.home) == before
        assert stored.open_turn == 2
        assert stored.problems == ()
        assert [e.record for e in stored.events] == [e.record for e in log.events]
        log.append(TurnEnd(2, "completed"), durable=True)  # the writer's lock is untouched


def test_read_log_skips_and_names_damage_and_a_torn_tail(store: SessionStore) -> None:
    with store.create(CWD) as log:
        one_turn(log, 1)
        one_turn(log, 2)
    data = lines(log.path)
    data[2] = b"[1, 2]\n"
    log.path.write_bytes(b"".join(data) + b'{"type":"tu')
    stored = read_log(log.path)
    assert [e.seq for e in stored.events] == [0, 2, 3, 4, 5, 6, 7]
    assert stored.problems == (
        f"session log {log.path} is damaged at line 3: not a JSON object",
        f"session log {log.path} is damaged at line 4: seq 2 where 1 was expected",
        f"session log {log.path} ends in an incomplete line (line 10, 11 bytes): "
        "a write was cut short, or is still going on",
    )


def test_read_log_refuses_a_newer_format_and_an_unknown_id(store: SessionStore) -> None:
    with store.create(CWD) as log:
        one_turn(log, 1)
    log.path.write_bytes(log.path.read_bytes().replace(b'"version":1', b'"version":7', 1))
    with pytest.raises(SessionLogError, match="format version 7, written by a newer dsh"):
        read_log(log.path)
    with pytest.raises(SessionLogError, match="no session 'nope'"):
        store.read("nope")
    assert store.find(log.id) == log.path


def test_summaries_find_a_turn_line_that_straddles_two_reads(tmp_path: Path) -> None:
    # The tail is searched backwards in chunks, the first 64 KiB from the end: put the start
    # of the last turn line on each side of that boundary, and across it.
    def build(padding: int) -> tuple[SessionStore, int]:
        store = SessionStore(tmp_path / f"home-{padding}")
        with store.create(CWD) as log:
            one_turn(log, 1)
            log.append(TurnStart(2, "m"))
            log.append(UserText(2, "q" * padding))
        data = log.path.read_bytes()
        return store, len(data) - data.rindex(b'\n{"type":"turn/start"')

    _, tail = build(1000)
    for shift in range(-2, len(b'\n{"type":"turn/') + 2):
        store, distance = build(1000 + (1 << 16) - tail + shift)
        assert distance == (1 << 16) + shift
        (summary,) = store.summaries(CWD)
        assert (summary.turns, summary.open, summary.damage) == (2, True, None), shift


def test_summaries_find_a_first_message_that_straddles_two_reads(tmp_path: Path) -> None:
    # The head is read in growing chunks from 16 KiB: put the first user line (behind a long
    # system prompt) on each side of that boundary, and across it.
    def build(padding: int) -> tuple[SessionStore, int]:
        store = SessionStore(tmp_path / f"home-{padding}")
        with store.create(CWD) as log:
            log.append(SystemPrompt("p" * padding))
            one_turn(log, 1)
        return store, log.path.read_bytes().index(b'\n{"type":"user/message"')

    _, at = build(1000)
    for shift in range(-len(b'\n{"type":"user/message",') - 1, 2):
        store, newline = build(1000 + (1 << 14) - at + shift)
        assert newline == (1 << 14) + shift
        (summary,) = store.summaries(CWD)
        assert (summary.first_user, summary.damage) == ("question 1", None), shift
