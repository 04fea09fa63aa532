"""Skills and subagents end to end: the real ``dsh`` on a pipe against the stub model.

The logic is tested in-process (tests/dsh_core/extensions/test_skills.py, test_subagent.py,
test_calls.py); these runs prove what only the real process shows: where skills are found, what the
system prompt says, what the transcript shows, and how the sessions are listed and shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_pipe import (
    assert_requests_valid,
    data_of,
    read_events,
    run_dsh,
    tool_lines,
)
from tests.dsh_stdio.test_mcp import calls, dsh_env, home, stub, user_home, work
from tests.support import log_problems

__all__ = ["dsh_env", "home", "stub", "user_home", "work"]

pytestmark = pytest.mark.slow


def skill(folder: Path, name: str, description: str, body: str = "Do it well.") -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
    )
    return folder


def test_skills_are_found_in_each_place_listed_and_loaded(
    stub: StubServer, dsh_env: dict[str, str], work: Path, user_home: Path
) -> None:
    (work / ".git").mkdir()  # the repository root; dsh runs in a folder below it
    inner = work / "sub"
    inner.mkdir()
    skill(work / ".agents/skills/review", "review", "Review a change. " + "x" * 600)
    skill(work / ".dsh/skills/release", "release", "Cut a release.")
    home_skill = skill(user_home / ".agents/skills/notes", "notes", "Take notes.", "Read ref.md.")
    (home_skill / "ref.md").write_text("the reference\n")
    skill(user_home / ".dsh/skills/deploy", "deploy", "Deploy it.")
    skill(user_home / ".dsh/skills/review-again", "review", "A second review: loses.")
    broken = work / ".agents/skills/broken/SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("no front matter here\n")
    stub.enqueue(
        calls(("skill", {"name": "notes"})),
        calls(("read", {"file_path": str(home_skill / "ref.md")})),
        Answer("noted"),
    )
    run = run_dsh(dsh_env, inner, stdin="take a note\n")  # no --allow: a pipe asks nobody
    assert run.returncode == 0, run.stderr
    assert f"dsh: skill {broken} left out: it does not begin with a front matter" in run.stderr
    system = stub.requests[0]["messages"][0]["content"]
    listed = [line for line in system.splitlines() if line.startswith("- ")]
    assert [line.split(":")[0] for line in listed] == [
        "- review",
        "- release",
        "- notes",
        "- deploy",
    ]
    assert len(listed[0]) == len("- review: ") + 500  # the description cut to 500 characters
    assert "skill" in [t["function"]["name"] for t in stub.requests[0]["tools"]]
    assert tool_lines(run.stderr) == [
        "dsh: [tool skill] notes",
        "dsh: [tool skill done] 5 lines",
        # Outside, and no question: a loaded skill's file.
        f"dsh: [tool read] {home_skill / 'ref.md'} (outside the working directory)",
        "dsh: [tool read done] 1 line",
    ]
    loaded = stub.requests[1]["messages"][-1]["content"]
    assert loaded.startswith("Read ref.md.\n\n[skill notes: its folder is ")
    assert loaded.endswith("\nSKILL.md\nref.md")
    assert stub.requests[2]["messages"][-1]["content"] == "     1\tthe reference"
    assert_requests_valid(stub)


def test_a_subagent_reads_files_and_its_session_is_listed_under_the_parent(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    (work / "demo.txt").write_text("Hello\n")
    stub.enqueue(
        calls(("subagent", {"description": "look at demo", "prompt": "What does demo.txt say?"})),
        calls(("read", {"file_path": "demo.txt"})),  # the child
        Answer("demo.txt says Hello."),  # the child's answer
        Answer("The subagent says: Hello."),
    )
    run = run_dsh(dsh_env, work, stdin="ask a subagent\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "The subagent says: Hello.\n"
    assert [line for line in run.stderr.splitlines() if "[tool " in line] == [
        "dsh: [tool subagent] look at demo",
        "dsh:   [tool read] demo.txt",
        "dsh:   [tool read done] 1 line",
        "dsh: [tool subagent done] 1 line",
    ]
    (parent_log,) = [p for p in home.rglob("session.jsonl") if "subagents" not in p.parts]
    (child_log,) = parent_log.parent.glob("subagents/*/session.jsonl")
    for path in (parent_log, child_log):
        assert log_problems(path) == []
    parent_events, child_events = read_events(parent_log), read_events(child_log)
    (result,) = data_of(parent_events, "tool/result")
    assert result["content"] == "demo.txt says Hello."
    header = json.loads(child_log.read_text().splitlines()[0])
    assert header["parent"] == {"session": parent_log.parent.name, "call_id": result["call_id"]}
    assert [t["function"]["name"] for t in stub.requests[1]["tools"]] == [
        "read",
        "glob",
        "grep",
        "ask_user_question",  # whose result says nobody can be asked (SPEC 16)
    ]
    assert data_of(child_events, "user/message")[0]["text"] == "What does demo.txt say?"
    # --sessions lists the child under its parent; --show shows it; it cannot be resumed.
    listing = run_dsh(dsh_env, work, "--sessions")
    rows = listing.stdout.splitlines()
    assert rows[1].startswith(parent_log.parent.name)
    assert rows[2].startswith(f"  subagent {child_log.parent.name}")
    assert rows[2].endswith("What does demo.txt say?")
    shown = run_dsh(dsh_env, work, "--show", child_log.parent.name)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (
        "> What does demo.txt say?\n"
        "[tool read] demo.txt\n"
        "[tool read done] 1 line\n"
        "demo.txt says Hello.\n"
    )
    parent_shown = run_dsh(dsh_env, work, "--show", "last")
    assert parent_shown.stdout == (
        "> ask a subagent\n"
        "[tool subagent] look at demo\n"
        "  [tool read] demo.txt\n"
        "  [tool read done] 1 line\n"
        "[tool subagent done] 1 line\n"
        "The subagent says: Hello.\n"
    )
    resumed = run_dsh(dsh_env, work, "-r", child_log.parent.name, stdin="more\n")
    assert resumed.returncode == 2
    assert "is a subagent's" in resumed.stderr
    assert_requests_valid(stub)


def test_three_reads_in_one_step_with_one_failing_are_all_answered_in_order(
    stub: StubServer, dsh_env: dict[str, str], home: Path, work: Path
) -> None:
    for name in ("a.txt", "c.txt"):
        (work / name).write_text(f"{name}\n")
    stub.enqueue(
        calls(
            ("read", {"file_path": "a.txt"}),
            ("read", {"file_path": "missing.txt"}),
            ("read", {"file_path": "c.txt"}),
        ),
        Answer("read them"),
    )
    run = run_dsh(dsh_env, work, stdin="read three\n")
    assert run.returncode == 0, run.stderr
    (log,) = home.rglob("session.jsonl")
    events = read_events(log)
    assert log_problems(log) == []
    answers = [(r["is_error"], r["content"][:40]) for r in data_of(events, "tool/result")]
    assert answers == [
        (False, "     1\ta.txt"),
        (True, "Error: cannot read missing.txt: [Errno 2"),
        (False, "     1\tc.txt"),
    ]
    sent = stub.requests[1]["messages"][-3:]  # the results, right after the calls, in order
    calls_asked = [call["id"] for call in stub.requests[1]["messages"][-4]["tool_calls"]]
    assert [m["tool_call_id"] for m in sent] == calls_asked
    assert_requests_valid(stub)
