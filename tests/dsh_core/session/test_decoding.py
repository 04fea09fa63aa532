"""The fast decoders read every line as the generic ones do: the same events, the same errors.

Resuming decodes each line through the C JSON scanner and a decoder compiled per record class
(:func:`dsh_core.session.codec.decode`); the generic path (``json.loads``, then each field's
reader: :func:`~dsh_core.session.codec._decode_slowly`) is the reference they must agree with,
on recorded sessions and on hostile lines alike.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.agent.history import History
from dsh_core.chain import error_chain
from dsh_core.errors import SessionLogError
from dsh_core.model.seam import ChatRequest, Usage
from dsh_core.model.wire import RequestEncoder, encode_request
from dsh_core.records import maker, record
from dsh_core.session import SessionLog, SessionStore
from dsh_core.session.codec import Codec, _decode_slowly, decode
from dsh_core.session.events import _KNOWN, SessionEvent, ToolOutput, UnknownEvent, parse_record
from dsh_core.session.lines import _json_object, decode_event, encode_line
from dsh_core.testing import StubServer
from tests.dsh_core.session.test_session import one_turn
from tests.support import DSH, child_env

FIXTURES = sorted((Path(__file__).parents[2] / "fixtures").glob("*.jsonl"))
CLASSES = sorted(
    {
        *(c for c in _KNOWN.values() if c.from_data.__func__ is Codec.from_data.__func__),  # type: ignore[attr-defined]
        ToolOutput,  # decoded by ToolResult's own reader
        Usage,  # flat in every usage line
    },
    key=lambda cls: cls.__name__,
)
"""The classes whose data :func:`decode` reads (the others read theirs their own way)."""


def reference_record(kind: str, data: dict[str, Any]) -> Any:
    """What a line's data meant before the compiled decoders: each field through its reader."""
    cls = _KNOWN.get(kind)
    if cls is None:
        return UnknownEvent(kind, data)
    if cls.from_data.__func__ is Codec.from_data.__func__:  # type: ignore[attr-defined]
        return _decode_slowly(cls, data)
    return cls.from_data(data)  # its own reader, whose inner decodes are pinned below


def reference_event(raw: bytes, seq: int | None) -> SessionEvent | str:
    """``decode_event`` as it was: ``json.loads`` and the generic readers."""
    value = _json_object(raw)
    if isinstance(value, str):
        return value
    kind, number, time, data = (value.get(k) for k in ("type", "seq", "time", "data"))
    if not (isinstance(kind, str) and isinstance(time, str) and isinstance(data, dict)):
        return "not an event (type, seq, time, data)"
    if not isinstance(number, int) or isinstance(number, bool) or seq not in (None, number):
        return f"seq {number!r} where {seq} was expected"
    try:
        return SessionEvent(number, time, reference_record(kind, data))
    except ValueError as exc:
        return f"a {kind} event whose data is wrong ({error_chain(exc)})"


def outcome(decode_one: Any, *args: Any) -> Any:
    """A decoder's value, or the words of the ValueError it raised."""
    try:
        return decode_one(*args)
    except ValueError as exc:
        return ("ValueError", str(exc))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda path: path.stem)
def test_recorded_sessions_decode_to_the_same_events(fixture: Path) -> None:
    lines = fixture.read_bytes().splitlines(keepends=True)[1:]
    assert lines
    for seq, raw in enumerate(lines):
        event = decode_event(raw, seq)
        assert isinstance(event, SessionEvent), event
        assert event == reference_event(raw, seq)
        assert encode_line(event.to_json()) == raw  # and it writes back byte for byte


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda path: path.stem)
def test_recorded_sessions_encode_as_one_json_dumps_would(fixture: Path) -> None:
    events = [decode_event(raw) for raw in fixture.read_bytes().splitlines(keepends=True)[1:]]
    history, encoder = History(), RequestEncoder()
    for end in range(1, len(events) + 1):  # a request after every event, as steps are
        history.update(events[:end])  # type: ignore[arg-type]
        request = ChatRequest("deepseek-v4-flash", tuple(history.messages()))
        assert encoder.encode(request) == encode_request(request)


hostile = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=5),
        st.sampled_from(["completed", "error", "pending", "auto", "read", "\ud800", "\x85"]),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(cls=st.sampled_from(CLASSES), data=st.data())
def test_any_data_decodes_as_the_generic_readers_decode_it(cls: type, data: st.DataObject) -> None:
    names = [*cls.__dataclass_fields__, "id", "name", "arguments", "kind", "reason", "code"]  # type: ignore[attr-defined]
    fields = data.draw(st.dictionaries(st.sampled_from(names), hostile, max_size=len(names)))
    assert outcome(decode, cls, fields) == outcome(_decode_slowly, cls, fields)


@settings(max_examples=500, deadline=None)
@given(
    record=st.one_of(*(st.from_type(cls) for _, cls in sorted(_KNOWN.items()))),
    seq=st.integers(0, 10**6),
)
def test_generated_events_decode_as_the_generic_readers_decode_them(record: Any, seq: int) -> None:
    """Any record of every known type, written as the log writes it, reads back the same
    through the fast path and the generic one (a record the loop would never write, such as an
    ``error`` end without its failure, is the same damage both ways)."""
    raw = encode_line(SessionEvent(seq, "2026-12-03T10:00:00.000Z", record).to_json())
    # By their reprs, which name every field: a retry's delay may be NaN, never equal to itself.
    assert repr(decode_event(raw, seq)) == repr(reference_event(raw, seq))


def test_sessions_the_real_process_wrote_decode_as_before(tmp_path: Path) -> None:
    """Turns with tool calls, reasoning, a todo list, failures and a compaction, written by
    the real dsh on a pipe: every line reads the same both ways."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "demo.txt").write_text("Hello\n")
    lines = "\n".join(
        ["hello", "toolread please", "toolchain now", "think first", "tooltodo", "toolfail"]
    )
    with StubServer() as stub:
        env = child_env(stub.url, home)
        for stdin in (lines, "limit\ntoolmany\n/compact\nfail\nafter it\n"):
            done = subprocess.run(
                [*DSH, "--continue", "--allow", "write"],
                input=stdin + "\n",
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode in (0, 1), done.stderr
    (log,) = home.glob("sessions/*/*/session.jsonl")
    raws = log.read_bytes().splitlines(keepends=True)[1:]
    kinds = set()
    for seq, raw in enumerate(raws):
        event = decode_event(raw, seq)
        assert isinstance(event, SessionEvent), (seq, event)
        assert event == reference_event(raw, seq)
        kinds.add(event.type)
    assert {"tool/call", "tool/result", "todo/write", "turn/end", "usage"} <= kinds


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(sorted(_KNOWN)), data=st.data())
def test_any_line_data_reads_as_before(kind: str, data: st.DataObject) -> None:
    names = [*_KNOWN[kind].__dataclass_fields__, "tool_calls", "is_error", "error", "reason"]
    names.append("failure")  # tool/result reads it its own way (never from the line)
    values = data.draw(st.dictionaries(st.sampled_from(names), hostile, max_size=len(names)))
    assert outcome(parse_record, kind, values) == outcome(reference_record, kind, values)


GOOD = b'{"type":"user/message","seq":3,"time":"t","data":{"turn":1,"text":"hi"}}'
LINES = [
    GOOD + b"\n",
    GOOD + b"\r\n",
    b"  " + GOOD + b"\n",  # leading blanks: json.loads allows them
    GOOD + b" \t\n",
    GOOD + b"x\n",  # trailing text
    GOOD + GOOD + b"\n",
    GOOD,  # no newline at all
    b"\n",
    b"[1, 2]\n",
    b"null\n",
    b'"text"\n',
    b"{\n",
    b"[" * 100_000 + b"\n",  # deeper than any recursion limit
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n",
    b'{"type":"user/message","seq":3,"time":"\xff","data":{}}\n',  # invalid UTF-8
    b'{"type":"user/message","seq":3,"time":"t","data":{"turn":1,"text":"\\ud800"}}\n',
    b'{"type":"user/message","seq":3.0,"time":"t","data":{"turn":1,"text":"hi"}}\n',
    b'{"type":"user/message","seq":true,"time":"t","data":{"turn":1,"text":"hi"}}\n',
    b'{"type":"user/message","seq":4,"time":"t","data":{"turn":1,"text":"hi"}}\n',
    b'{"type":"user/message","seq":3,"time":"t","data":{"turn":true,"text":"hi"}}\n',
    b'{"type":"user/message","seq":3,"time":"t","data":{"turn":1,"text":null}}\n',
    b'{"type":"user/message","seq":3,"time":"t","data":{"turn":1,"text":"a","text":7}}\n',
    b'{"type":"usage","seq":3,"time":"t","data":{"turn":1,"prompt_tokens":NaN}}\n',
    b'{"type":"usage","seq":3,"time":"t","data":{"turn":1,"prompt_tokens":1e400}}\n',
    b'{"type":"turn/start","seq":3,"time":"t","data":{"turn":1,"model":null}}\n',
    b'{"type":"turn/start","seq":3,"time":"t","data":{"turn":1}}\n',
    b'{"type":"x/y","seq":3,"time":"t","data":{"turn":[1]}}\n',
    b'{"type":7,"seq":3,"time":"t","data":{}}\n',
    b'{"type":"user/message","seq":3,"time":"t","data":{"turn":1,"text":"'
    + "é\u2028".encode() * 1_000_000
    + b'"}}\n',  # a huge line
]


@pytest.mark.parametrize("raw", LINES, ids=lambda raw: repr(raw[:40]))
@pytest.mark.parametrize("seq", [3, None])
def test_hostile_lines_read_as_before(raw: bytes, seq: int | None) -> None:
    if raw.startswith(b"[" * 100) or raw.startswith(b'{"a":{"a":'):
        assert decode_event(raw, seq) == "not JSON (nested too deeply)"  # it raised before
        return
    assert decode_event(raw, seq) == reference_event(raw, seq)


def test_a_deeply_nested_line_in_the_middle_is_named_damage(
    store: SessionStore, log: SessionLog
) -> None:
    one_turn(log, 1)
    one_turn(log, 2)
    log.close()
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines.insert(5, b"[" * 100_000 + b"\n")  # after turn 1's end: a RecursionError before
    log.path.write_bytes(b"".join(lines))
    why = "is damaged at line 6: not JSON (nested too deeply); it comes before the complete"
    with pytest.raises(SessionLogError, match=re.escape(why)):
        store.open(log.id)


@record
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@record
class Plain:
    value: int
    other: str = "x"


def test_maker_builds_the_same_record_or_is_the_class_itself() -> None:
    made = maker(Plain)(1, "y")
    assert made == Plain(1, "y") and hash(made) == hash(Plain(1, "y"))
    assert repr(made) == "Plain(value=1, other='y')"
    assert maker(Checked) is Checked  # its __post_init__ must run
    with pytest.raises(ValueError, match="negative"):
        maker(Checked)(-1)
