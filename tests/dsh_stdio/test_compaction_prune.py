"""Pruning on the real process (SPEC 11 "since wave 4", issue 29): old tool results become
stubs naming a file that holds them whole, the file is readable by ``read`` on a pipe without
a question, and the prompt cache's prefix breaks only at the
first request after a prune or a summary."""

from __future__ import annotations

import itertools
import json
import re
import stat
import subprocess
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.support import DSH, assert_no_canary, child_env, read_events, single_log

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
