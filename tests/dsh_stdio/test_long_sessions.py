"""Long sessions end to end (SPEC 11), against a stub server of its own.

The whole front door (in-process, ``tests/harness.py``, or the real process where a SIGKILL or
a terminal is the point): a 600 KB conversation on the default model is sent, a
60-turn session under a small window compacts on its own and every request it sends keeps
DeepSeek's history rules and the prompt-cache prefix (checked on the raw bodies), the
context-window 400 compacts once and retries, and a SIGKILL while a compaction is under way
leaves a session that resumes and sends a valid request. Kills wait for what the log and the
stub show (a line written, a request received), never for a time; :data:`HANG` bounds a hang.
The states between two log lines, which no process can be caught in, are each resumed in
process (``tests/dsh_core/agent/test_compaction.py``).
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh_core.agent.history import CHECKPOINT_HEADING
from dsh_core.testing import Answer, Held, StubServer, ToolCalls, validate_request
from tests.harness import run_in_process
from tests.support import DSH, Run, assert_no_canary, child_env, scan_log, wait_until

if TYPE_CHECKING:
    from tests.dsh_stdio.test_agent_terminal import Terminal

pytestmark = pytest.mark.slow

HANG = 120.0
"""Seconds after which a run or a wait is a hang: a bound, not a measure of speed."""

DEMO = "Hello, world.\n" + "The quick brown fox jumps over the lazy dog. " * 60 + "\n"
"""What the stub's tool triggers read (and grep): about 800 tokens a result."""

COMPACTED = "dsh: [context compacted: "
PRUNED = "dsh: [context pruned: "


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "demo.txt").write_text(DEMO)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"  # outside the working directory: grep does not find the log


@pytest.fixture
def env(stub: StubServer, home: Path) -> dict[str, str]:
    return child_env(stub.url, home)


def run_dsh(env: dict[str, str], cwd: Path, *args: str, stdin: str) -> Run:
    """dsh to its end on ``stdin``, in-process (``tests/harness.py``): what a long session
    sends and stores needs no process of its own; the SIGKILL below does."""
    return run_in_process(env, *args, stdin=stdin, cwd=cwd)


def events(home: Path) -> list[dict[str, Any]]:
    """The events of the one log under ``home`` as written so far (a torn line is not yet)."""
    paths = list(home.rglob("session.jsonl"))
    if not paths:
        return []  # not created yet
    (path,) = paths
    found = []
    for line in path.read_bytes().split(b"\n")[1:]:
        try:
            found.append(json.loads(line))
        except ValueError:
            break
    return found


def of_type(home: Path, kind: str) -> list[dict[str, Any]]:
    return [event["data"] for event in events(home) if event["type"] == kind]


def history_problems(stub: StubServer) -> list[str]:
    """Every body the stub received, checked by DeepSeek's two history rules, and what it
    refused for anything but the context window."""
    rechecked = [problem for body in stub.requests if (problem := validate_request(body))]
    refused = [
        s.refused for s in stub.served if s.refused and "maximum context length" not in s.refused
    ]
    return rechecked + refused


_DECODER = json.JSONDecoder()


def raw_messages(body: bytes) -> str:
    """The ``messages`` array of a raw request body, exactly as sent."""
    text = body.decode("utf-8")
    start = text.index('"messages": ') + len('"messages": ')
    _, end = _DECODER.raw_decode(text, start)
    return text[start:end]


def prefix_breaks(stub: StubServer) -> list[int]:
    """Answered requests whose messages do not begin, byte for byte, with the previous answered
    request's, other than the first request after a compaction (a summary request before it)."""
    answered = [
        (served, body)
        for served, body in zip(stub.served, stub.bodies, strict=True)
        if not served.refused
    ]
    breaks = []
    for (before, earlier), (now, later) in itertools.pairwise(answered):
        previous = raw_messages(earlier)[:-1]  # without its closing bracket
        if not raw_messages(later).startswith(previous) and not before.summary:
            breaks.append(now.number)
    return breaks


# -- the window ------------------------------------------------------------------------------


def test_a_600_kb_conversation_on_deepseek_v4_flash_is_sent(
    stub: StubServer, env: dict[str, str], work: Path, home: Path
) -> None:
    """The default model takes 1,048,576 tokens: no 128,000 guess rejects this any more."""
    stub.enqueue(*[Answer("ok")] * 4)
    lines = "".join(f"{n}: {'x' * 200_000}\n" for n in range(3)) + "and the next turn?\n"
    result = run_dsh(env, work, stdin=lines)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n" * 4
    assert "[turn rejected]" not in result.stdout + result.stderr
    last = stub.requests[-1]
    assert last["model"] == "deepseek-v4-flash"
    assert sum(len(message["content"]) for message in last["messages"]) > 600_000
    assert not of_type(home, "compaction/start")


def test_a_60_turn_session_under_a_20000_token_window_compacts_and_stays_valid(
    stub: StubServer, env: dict[str, str], work: Path, home: Path
) -> None:
    stub.context_window = 20_000  # the server holds to it too: a request over it is refused
    words = ["toolread", "toolchain", "toolmany", "toolthink", "just words"]
    lines = "".join(f"turn {n} {words[n % len(words)]}\n" for n in range(60))
    result = run_dsh(env, work, "--context-window", "20000", stdin=lines)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "[turn" not in result.stdout  # no outcome line: every turn completed
    compacted = [line for line in result.stderr.splitlines() if line.startswith(COMPACTED)]
    pruned = [line for line in result.stderr.splitlines() if line.startswith(PRUNED)]
    ends, prunes = of_type(home, "compaction/end"), of_type(home, "compaction/prune")
    assert len(compacted) == len(ends) and len(pruned) == len(prunes)
    assert len(prunes) >= 3  # the old tool results were stubbed, again and again
    assert {start["trigger"] for start in of_type(home, "compaction/start")} <= {
        "pressure",
        "overflow",
    }
    assert len(of_type(home, "turn/end")) == 60
    assert history_problems(stub) == []
    # Each prune breaks the prefix once (the request after it), and nothing else breaks it.
    assert len(prefix_breaks(stub)) <= len(prunes)
    assert max(s.prompt.tokens for s in stub.served if not s.refused) <= 20_000
    assert scan_log(next(home.rglob("session.jsonl"))).problems == []
    assert_no_canary(home, result.stdout, result.stderr)


def test_the_400_path_compacts_once_and_retries(
    stub: StubServer, env: dict[str, str], work: Path, home: Path
) -> None:
    """A model dsh knows no window for: the server's refusal decides, and is learned."""
    stub.context_window = 9_000
    lines = "".join(f"turn {n} toolread\n" for n in range(14))
    result = run_dsh(env, work, "--model", "local-model", stdin=lines)
    assert result.returncode == 0, result.stderr[-2000:]
    served = stub.served
    refused = [n for n, s in enumerate(served) if s.refused]
    assert refused, "the session never reached the window"
    for n in refused:
        # The refused step, one summary request, then the same step again, answered.
        assert served[n + 1].summary and not served[n + 1].refused
        assert not served[n + 2].summary and not served[n + 2].refused
        assert raw_messages(stub.bodies[n + 2]) != raw_messages(stub.bodies[n])
    starts = of_type(home, "compaction/start")
    assert starts[0]["trigger"] == "overflow" and starts[0]["window"] == 9_000
    assert "maximum context length is 9000 tokens" in starts[0]["error"]["message"]
    # Learned: the later compactions come before the window is reached, not after a 400.
    assert len([s for s in starts if s["trigger"] == "overflow"]) == len(refused)
    assert len(refused) < len(starts)
    assert history_problems(stub) == []


# -- a kill while compacting -----------------------------------------------------------------


class PipeSession:
    """dsh on a pipe, fed one line at a time, each after the turn before ended."""

    def __init__(self, env: dict[str, str], cwd: Path, home: Path, *args: str) -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [*DSH, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())
        self.proc.stdin.flush()

    def turn(self, line: str) -> None:
        ended = len(self.ended())
        self.send(line)
        self.wait(lambda: len(self.ended()) > ended, "the turn's end")

    def ended(self) -> list[dict[str, Any]]:
        return of_type(self.home, "turn/end")

    def wait(self, condition: Any, what: str) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"dsh exited ({self.proc.returncode}) before {what}")
            return bool(condition())

        wait_until(seen, what, timeout=HANG)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.close()
        assert self.proc.returncode == -signal.SIGKILL

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=HANG)
        if self.proc.stdin is not None:
            self.proc.stdin.close()


def test_a_subagent_that_does_not_fit_tells_the_model_what_a_model_can_do(
    env: dict[str, str], work: Path, stub: StubServer
) -> None:
    """The review found a child kept the REPL's advice and told the parent's model to use
    ``/compact``. The resumed parent keeps its small system prompt; its child's, made now,
    holds an AGENTS.md larger than the window."""
    assert run_dsh(env, work, stdin="hello\n").returncode == 0
    (work / "AGENTS.md").write_text("Be thorough. " * 2_600)  # about 10,000 tokens
    prompt = json.dumps({"description": "look", "prompt": "What does demo.txt say?"})
    stub.enqueue(ToolCalls((("subagent", prompt),)), Answer("It did not fit."))
    run = run_dsh(env, work, "-c", "--context-window", "8000", stdin="ask a subagent\n")
    assert run.returncode == 0, run.stderr
    result = stub.requests[-1]["messages"][-1]
    assert result["role"] == "tool"
    assert "was rejected: the conversation no longer fits" in result["content"]
    assert result["content"].endswith(
        "): ask each subagent for less (split the task among several calls), or shorten the prompt"
    )


@pytest.mark.parametrize("phase", ["summary asked", "compacted, step asked again"])
def test_sigkill_during_compaction_loses_nothing_and_resumes_valid(
    stub: StubServer, env: dict[str, str], work: Path, home: Path, phase: str
) -> None:
    """Killed while the summary request waits for its answer (only ``compaction/start`` is on
    disk), or once ``compaction/end`` is on disk and the retried step waits for its answer."""
    session = PipeSession(env, work, home, "--model", "local-model")
    gate = threading.Event()
    try:
        for n in range(4):  # words, not tool results: pruning cannot make room, a summary must
            session.turn(f"turn {n} " + "words " * 300)
        # The next turn's first request will not fit: refused, summarised, asked again.
        stub.context_window = stub.served[-1].prompt.tokens + 5
        if phase == "summary asked":
            stub.enqueue_summaries(Held(gate, Answer("never sent")))
            session.send("turn 4 toolread")
            session.wait(lambda: any(s.summary for s in stub.served), "the summary request")
            assert of_type(home, "compaction/start") and not of_type(home, "compaction/end")
        else:
            stub.enqueue(Held(gate, Answer("never sent")))
            session.send("turn 4 toolread")
            session.wait(lambda: of_type(home, "compaction/end"), "compaction/end")
            session.wait(lambda: not stub.served[-1].summary, "the step asked again")
        session.kill()
    finally:
        gate.set()
        session.close()
    before = events(home)
    completed = [data["turn"] for data in of_type(home, "turn/end")]
    assert completed == [1, 2, 3, 4]
    stub.context_window = None
    asked = len(stub.served)
    result = run_dsh(env, work, "--model", "local-model", "--continue", stdin="hello again\n")
    assert result.returncode == 0, result.stderr
    assert "[turn interrupted by a previous process exit]" in result.stdout
    assert result.stdout.endswith("hello again\n")  # joined to a checkpoint, if one is last
    # Nothing before the kill was lost or changed; the open turn was closed.
    after = events(home)
    assert after[: len(before)] == before
    assert [data["turn"] for data in of_type(home, "turn/end")] == [1, 2, 3, 4, 5, 6]
    assert of_type(home, "turn/end")[4]["reason"]["kind"] == "interrupted"
    # The first request of the resumed run: after a compaction cut short, the old history is
    # in force (and, over the window the refusal taught, is compacted again first); after one
    # whose end was on disk, the summary is.
    first = stub.served[asked]
    checkpoint = stub.requests[asked]["messages"][1]["content"].startswith(CHECKPOINT_HEADING)
    if phase == "summary asked":
        assert first.summary and not checkpoint
    else:  # in force, whether the first request sends it or summarises it again
        assert checkpoint
    assert history_problems(stub) == []
    assert all(not s.refused for s in stub.served[asked:])
    assert scan_log(next(home.rglob("session.jsonl"))).problems == []


# -- at a terminal, and in --show ------------------------------------------------------------


def test_compact_usage_and_think_at_the_terminal_and_in_show(
    term: Terminal, stub: StubServer, env: dict[str, str], workdir: Path
) -> None:
    # Long enough for a summary to make it smaller (two short questions are not: see
    # test_compaction_prune.py).
    term.send_turn("first question " + "words " * 150)
    term.send_turn("second question " + "words " * 150)
    term.send_turn("/compact")
    term.child.expect(r"\[context compacted: ([\d,]+) -> ([\d,]+) tokens\]\r\n")
    before, after = (int(group.replace(",", "")) for group in term.child.match.groups())
    assert after < before
    term.send_turn("/usage")
    term.child.expect(r"in +[\d,]+ tokens \(cache hit [\d,]+ / miss [\d,]+\)\r\n")
    term.child.expect(r"requests +3, 1 compacted\r\n")
    term.child.expect(r"context +about [\d,]+ of 1,048,576 tokens \(\d+%\)\r\n")
    term.send_turn("/think on")
    term.child.expect_exact("thinking: on for the next turns")
    term.send_turn("third question")
    # The second exchange was kept as it was, after the checkpoint: the stub echoes the third.
    term.child.expect_exact("You said: third question\r\n")
    assert term.leave() == 0
    assert stub.requests[-1]["thinking"] == {"type": "enabled"}
    assert stub.requests[-1]["messages"][1]["content"].startswith(CHECKPOINT_HEADING)
    shown = run_dsh(env, workdir, "--show", "last", stdin="")
    assert shown.returncode == 0, shown.stderr
    assert (
        f"[context compacted: {before:,} -> {after:,} tokens]\n> third question\n" in shown.stdout
    )


def test_compact_with_a_focus_at_the_terminal_and_not_on_a_short_conversation(
    term: Terminal, stub: StubServer
) -> None:
    """``/compact FOCUS`` (issue 29) on a real terminal: the summary request carries the focus
    in the user's words; on two short questions, nothing is asked and the REPL says why."""
    term.send_turn("first question")
    term.send_turn("second question")
    term.send_turn("/compact")
    term.child.expect_exact("dsh: not compacted: the conversation (about ")
    term.child.expect_exact(" tokens) is too short for a summary to make it smaller\r\n")
    assert len(stub.served) == 2 and not any(s.summary for s in stub.served)
    term.send_turn("third question " + "words " * 150)
    term.send_turn("fourth question " + "words " * 150)
    term.send_turn("/compact the parser's errors and   the fix")
    term.child.expect(r"\[context compacted: ([\d,]+) -> ([\d,]+) tokens\]\r\n")
    before, after = (int(group.replace(",", "")) for group in term.child.match.groups())
    assert after < before
    summaries = [
        body for body, served in zip(stub.requests, stub.served, strict=True) if served.summary
    ]
    assert len(summaries) == 1
    asked = summaries[0]["messages"][-1]["content"]
    assert asked.endswith("The focus, in the user's words:\nthe parser's errors and   the fix")
    term.send_turn("fifth question")
    term.child.expect_exact("You said: fifth question\r\n")
    assert term.leave() == 0
    assert stub.requests[-1]["messages"][1]["content"].startswith(CHECKPOINT_HEADING)
    assert term.events("compaction/start")[0]["trigger"] == "manual"
