"""Pruning on the real process (SPEC 11 "since wave 4", issue 29): old tool results become
stubs naming a file that holds them whole, the file is readable by ``read`` on a pipe without
a question, and the prompt cache's prefix breaks only at the
first request after a prune or a summary. A resume sends the stubs the log holds, byte for
byte; a reader that does not know ``compaction/prune`` (an older dsh) sends the results whole.
"""

from __future__ import annotations

import itertools
import json
import re
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.dsh_stdio.test_long_sessions import raw_messages
from tests.support import DSH, assert_no_canary, child_env, read_events, scan_log, single_log

pytestmark = pytest.mark.slow

HANG = 120.0
"""Seconds after which a run is a hang: a bound, not a measure of speed."""

STUB = re.compile(r"all of it is in (\S+), which read opens without a question")


def dsh(env: dict[str, str], cwd: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DSH, "--context-window", "20000", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HANG,
    )


def messages_of(body: bytes) -> list[dict[str, object]]:
    return list(json.loads(body)["messages"])


def pruned_stub_count(body: bytes) -> int:
    return sum(
        1
        for m in messages_of(body)
        if m.get("role") == "tool" and STUB.search(str(m.get("content")))
    )


def test_old_results_are_pruned_to_files_read_opens_and_the_prefix_breaks_only_there(
    tmp_path: Path,
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    names = [f"f{n}.txt" for n in range(6)]
    for n, name in enumerate(names):
        (work / name).write_text(f"file {n}: the quick brown fox jumps over the dog.\n" * 160)
    with StubServer(context_window=20_000) as stub:
        env = child_env(stub.url, home)
        lines = "".join(f"turn {t} toolfiles {' '.join(names)}\n" for t in range(3))
        first = dsh(env, work, stdin=lines)
        assert first.returncode == 0, first.stderr[-2000:]
        assert "dsh: [context pruned: " in first.stderr
        log = single_log(home)
        events = read_events(log)
        prunes = [e["data"] for e in events if e["type"] == "compaction/prune"]
        assert prunes
        results = {e["data"]["call_id"]: e for e in events if e["type"] == "tool/result"}
        # Each stub names its file, which holds what the model was sent, private to the user.
        for item in prunes[0]["results"]:
            path = Path(STUB.search(item["stub"]).group(1))  # type: ignore[union-attr]
            assert path.parent == log.parent / "tool-output"
            assert path.name == f"result-{results[item['call_id']]['seq']}.txt"
            assert path.read_text() == results[item["call_id"]]["data"]["content"]
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        # The prompt cache: each answered request begins with the previous one's messages,
        # but the first after a summary request or a request with more stubs than before.
        answered = [
            (served, body)
            for served, body in zip(stub.served, stub.bodies, strict=True)
            if not served.refused
        ]
        breaks = 0
        for (before, earlier), (now, later) in itertools.pairwise(answered):
            previous = messages_of(earlier)
            if messages_of(later)[: len(previous)] == previous:
                continue
            allowed = before.summary or now.summary
            allowed = allowed or pruned_stub_count(later) > pruned_stub_count(earlier)
            assert allowed, f"request {now.number} broke the prefix without a prune or summary"
            breaks += 1
        assert breaks >= len(prunes)
        # Resumed, the model reads a pruned output on a pipe, unasked.
        saved = STUB.search(prunes[0]["results"][0]["stub"]).group(1)  # type: ignore[union-attr]
        stub.enqueue(ToolCalls((("read", json.dumps({"file_path": saved})),)), Answer("read it"))
        asked = len(stub.requests)
        again = dsh(env, work, "-c", stdin="read the pruned output\n")
        assert again.returncode == 0, again.stderr[-2000:]
        assert len(stub.requests) == asked + 2  # the read, then the answer: nothing asked
        result = stub.requests[-1]["messages"][-1]
        assert result["role"] == "tool"
        assert "file 0: the quick brown fox" in result["content"]
        assert "refused" not in result["content"] and "--allow" not in result["content"]
        shown = subprocess.run(
            [*DSH, "--show", "last"], cwd=work, env=env, capture_output=True, text=True
        )
        assert "[context pruned: " in shown.stdout
        assert_no_canary(home, first.stdout, first.stderr, again.stdout, again.stderr)


# -- a resume, and a reader that does not know the prune -------------------------------------


@dataclass
class Pruned:
    """A session of one ``toolfiles`` turn whose only compaction was a prune, and the stub."""

    stub: StubServer
    env: dict[str, str]
    work: Path
    home: Path
    log: Path
    last: int
    """The index, in the stub's records, of the last request of that run."""

    def prunes(self) -> list[dict[str, Any]]:
        return [e["data"] for e in read_events(self.log) if e["type"] == "compaction/prune"]


@pytest.fixture
def pruned(tmp_path: Path) -> Iterator[Pruned]:
    """Eight reads (the most a ``toolfiles`` line makes) of about 1,500 tokens each under a
    20,000-token window: the prune at 80% leaves about 8,600 tokens, well under the 60% that
    would ask for a summary, and the turn ends before the window fills again."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    names = [f"f{n}.txt" for n in range(8)]
    for n, name in enumerate(names):
        (work / name).write_text(f"file {n}: the quick brown fox jumps over the dog.\n" * 100)
    with StubServer(context_window=20_000) as stub:
        env = child_env(stub.url, home)
        first = dsh(env, work, stdin=f"toolfiles {' '.join(names)}\n")
        assert first.returncode == 0, first.stderr[-2000:]
        assert "dsh: [context pruned: " in first.stderr
        log = single_log(home)
        kinds = [e["type"] for e in read_events(log) if e["type"].startswith("compaction/")]
        assert kinds == ["compaction/prune"], "the premise: one prune, no summary"
        yield Pruned(stub, env, work, home, log, len(stub.requests) - 1)


def stubbed(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's pruned results: (call id, the stub line), in order."""
    return [
        (m["tool_call_id"], m["content"])
        for m in body["messages"]
        if m["role"] == "tool" and STUB.search(m["content"])
    ]


@pytest.mark.parametrize("how", ["-c", "-r ID"])
def test_a_resumed_session_sends_the_same_stubs_byte_for_byte(pruned: Pruned, how: str) -> None:
    """The stubs are in the event (not made again on a resume): the first request after a
    resume sends the stub lines the last one before the exit sent, and so begins with its
    messages byte for byte (the prompt cache holds across a resume)."""
    stub = pruned.stub
    (prune,) = pruned.prunes()
    args = ["-c"] if how == "-c" else ["-r", pruned.log.parent.name]
    again = dsh(pruned.env, pruned.work, *args, stdin="and then?\n")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[context pruned: " not in again.stderr  # nothing pruned again: what was, is sent
    before, after = stub.requests[pruned.last], stub.requests[pruned.last + 1]
    assert after["messages"][-1] == {"role": "user", "content": "and then?"}
    stubs = stubbed(before)
    assert stubs == [(item["call_id"], item["stub"]) for item in prune["results"]]
    assert stubbed(after) == stubs
    earlier = raw_messages(stub.bodies[pruned.last])[:-1]  # without its closing bracket
    assert raw_messages(stub.bodies[pruned.last + 1]).startswith(earlier)
    assert_no_canary(pruned.home, again.stdout, again.stderr)


def test_a_reader_that_does_not_know_the_prune_shows_and_resumes_with_the_results_whole(
    pruned: Pruned,
) -> None:
    """An older dsh reads ``compaction/prune`` as an event of a type it does not know
    (``UnknownEvent``): ignored. The real log's prune line renamed to a type this dsh does not
    know stands for that: ``--show`` and a resume still work, and the resume sends every result
    whole, as the older dsh would."""
    stub = pruned.stub
    (prune,) = pruned.prunes()
    text = pruned.log.read_text()
    assert text.count('"type":"compaction/prune"') == 1
    pruned.log.write_text(text.replace('"type":"compaction/prune"', '"type":"compaction/trim"'))
    assert scan_log(pruned.log).problems == []
    shown = subprocess.run(
        [*DSH, "--show", "last"],
        cwd=pruned.work,
        env=pruned.env,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "> toolfiles f0.txt" in shown.stdout and "Read 8 files." in shown.stdout
    assert "[context pruned: " not in shown.stdout
    # Whole, the results no longer fit 20,000 tokens: a larger window, so nothing compacts.
    stub.context_window = None
    again = dsh(pruned.env, pruned.work, "-c", "--context-window", "200000", stdin="and then?\n")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[context pruned: " not in again.stderr
    after = stub.requests[pruned.last + 1]
    assert after["messages"][-1] == {"role": "user", "content": "and then?"}
    assert stubbed(after) == []
    whole = {
        e["data"]["call_id"]: e["data"]["content"]
        for e in read_events(pruned.log)
        if e["type"] == "tool/result"
    }
    sent = {m["tool_call_id"]: m["content"] for m in after["messages"] if m["role"] == "tool"}
    assert sent == whole and len(sent) == 8
    assert {item["call_id"] for item in prune["results"]} < set(sent)
    assert_no_canary(pruned.home, shown.stdout, shown.stderr, again.stdout, again.stderr)
