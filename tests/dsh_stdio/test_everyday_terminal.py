"""SPEC 16's tools on a terminal, end to end: the real ``dsh`` on a pseudo-terminal (pexpect).

The checklist block; the model's question with numbered options, answered by a number, in the
person's own words, or cut short by Ctrl-C; ``web_fetch`` asked about per host, "always" for
that host; ``web_search`` through the stub; a background command whose question says it keeps
running, listed by ``/jobs``, ended when dsh leaves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.dsh_stdio.test_agent_terminal import Terminal, spawn_terminal
from tests.dsh_stdio.test_everyday_pipe import _alive, _marker
from tests.pages import PageServer
from tests.support import DSH, wait_until

pytestmark = pytest.mark.slow


def calls(*pairs: tuple[str, object]) -> ToolCalls:
    return ToolCalls(tuple((name, json.dumps(arguments)) for name, arguments in pairs))


QUESTION = {
    "questions": [
        {
            "id": "db",
            "question": "Which database?",
            "options": [
                {"label": "PostgreSQL (Recommended)", "description": "a server"},
                {"label": "SQLite"},
            ],
        },
        {"id": "name", "question": "What should it be called?"},
    ]
}


def test_the_checklist_shows_on_the_terminal(term: Terminal, stub: StubServer) -> None:
    todos = {
        "todos": [
            {"content": "Read the code", "status": "completed"},
            {"content": "Write the test", "status": "in_progress"},
            {"content": "Fix it", "status": "pending"},
        ]
    }
    stub.enqueue(calls(("todo_write", todos)), Answer("planned"))
    term.send_turn("plan it")
    term.child.expect_exact("[tool todo_write] 3 todos: 1 completed, 1 in progress, 1 pending")
    term.child.expect_exact("  [x] Read the code\r\n  [>] Write the test\r\n  [ ] Fix it\r\n")
    term.child.expect_exact("planned")
    assert term.leave() == 0
    assert len(term.events("todo/write")) == 1


def test_the_models_question_takes_a_number_and_words(term: Terminal, stub: StubServer) -> None:
    stub.enqueue(calls(("ask_user_question", QUESTION)), Answer("thanks"))
    term.send_turn("set it up")
    term.child.expect_exact('the model asks (1 of 2): "Which database?"')
    term.child.expect_exact('  1. "PostgreSQL (Recommended)": "a server"')
    term.child.expect_exact('  2. "SQLite"')
    term.child.expect_exact("Answer 1-2, or in your own words (Enter: no answer): ")
    term.keys("7\r")  # no such option: asked again
    term.child.expect_exact("please answer with one number from 1 to 2")
    term.keys("2\r")
    term.child.expect_exact('the model asks (2 of 2): "What should it be called?"')
    term.keys("call it shelf\r")
    term.child.expect_exact("thanks")
    assert term.leave() == 0
    (result,) = term.events("tool/result")
    assert json.loads(result["content"]) == {
        "answers": [
            {"id": "db", "selected": ["SQLite"]},
            {"id": "name", "selected": [], "custom": "call it shelf"},
        ]
    }


def test_ctrl_c_at_the_models_question_aborts_the_turn(term: Terminal, stub: StubServer) -> None:
    stub.enqueue(calls(("ask_user_question", QUESTION)))
    term.send_turn("set it up")
    term.child.expect_exact("Answer 1-2, or in your own words (Enter: no answer): ")
    term.keys("\x03")
    term.child.expect_exact("[turn aborted] user")
    assert term.leave() == 0
    assert [r["error"]["code"] for r in term.events("tool/result")] == ["ABORTED"]


def test_web_fetch_asks_per_host_and_always_covers_the_host(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[web]\nallow_private_addresses = true\n")
    with PageServer() as pages:
        host = f"127.0.0.1:{pages.port}"
        term = spawn_terminal(DSH, dsh_env, workdir, home)
        stub.enqueue(
            calls(("web_fetch", {"url": pages.url("/page")})),
            calls(("web_fetch", {"url": pages.url("/text")})),
            Answer("read both"),
        )
        term.send_turn("read the notes")
        term.child.expect_exact(f"Allow web_fetch? {pages.url('/page')} (fetched by dsh")
        term.child.expect_exact(f"[y]es / [N]o / [a]lways for {host}: ")
        term.keys("a\r")
        term.child.expect_exact(f"[tool web_fetch] {pages.url('/text')}")  # not asked again
        term.child.expect_exact("read both")
        assert term.leave() == 0
        assert pages.hits == ["/page", "/text"]
    assert term.decisions() == ["allowed-always", "allowed-always"]


def test_web_search_on_a_terminal(
    dsh_env: dict[str, str], home: Path, workdir: Path, stub: StubServer
) -> None:
    env = {**dsh_env, "DEEPSEEK_SEARCH_BASE_URL": f"{stub.url}/anthropic/v1"}
    term = spawn_terminal(DSH, env, workdir, home)
    stub.enqueue(calls(("web_search", {"queries": ["dsh"]})), Answer("found"))
    term.send_turn("search it")
    term.child.expect_exact("[tool web_search] dsh")
    term.child.expect_exact("[tool web_search done]")
    term.child.expect_exact("found")
    assert term.leave() == 0
    (result,) = term.events("tool/result")
    assert "https://example.com/dsh/1" in result["content"]


def test_a_background_command_says_it_keeps_running_and_ends_with_dsh(
    term: Terminal, stub: StubServer
) -> None:
    marker = _marker()
    stub.enqueue(
        calls(("bash", {"command": f"sleep {marker}", "run_in_background": True})),
        Answer("it runs"),
    )
    term.send_turn("start the server")
    term.child.expect(
        r"Allow bash\? \$ sleep [0-9.]+ \((?:not )?sandboxed[^\r\n]*keeps running in the "
        r"background until it ends or the session does\)"
    )
    term.child.expect_exact('[a]lways for "sleep ..." in the background: ')
    term.keys("y\r")
    term.child.expect_exact("it runs")
    wait_until(lambda: len(_alive(marker)) == 1, "the job to run")
    term.send_turn("/jobs")
    term.child.expect(rf"bash-1  running [0-9.]+ s  0 bytes  \$ sleep {marker}")
    term.child.expect_exact("> ")
    term.keys("\x04")
    term.child.expect(pexpect.EOF)
    term.child.close()
    wait_until(lambda: _alive(marker) == [], "the job to end with dsh")
