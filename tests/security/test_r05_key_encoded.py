"""SPEC 10.5: the key reaches neither the model nor a person, encoded or not.

The attack review got the key to the model in encoded form: an unsandboxed command read dsh's
own start-up environment (``/proc/$PPID/environ``, which root reads even from a non-dumpable
process) and reversed it; a sandboxed one found it in a shell start-up file and base64-encoded
it; masking knew only the exact value. Each test is one such attack: on the real ``dsh``
where the point is the process (its ``/proc/<pid>/environ``), in process where it is what a
result holds (the real ``bash`` tool and the real loop, commands really run).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.loop import Conversation
from dsh_core.masking import hide
from dsh_core.model.seam import Finish, TextDelta, ToolCall, ToolCallRequest
from dsh_core.session import SessionStore
from dsh_core.testing import ScriptedModel, StubServer, ToolCalls
from dsh_core.tools import Toolbox, Workspace
from dsh_core.tools.shell import BashTool
from tests.support import CANARY_KEY, DSH, child_env, wait_blocked_reading

KEY = CANARY_KEY
ENCODINGS = {
    "reversed": "rev",
    "base64": "base64 -w0",
    "base64, one byte in": "(printf x; cat) | base64 -w0",
    "base64, two bytes in": "(printf xy; cat) | base64 -w0",
    "base64 url-safe": "base64 -w0 | tr '+/' '-_'",
    "hex": "od -An -tx1 -v | tr -d ' \\n'",
    "hex, upper case": "od -An -tx1 -v | tr -d ' \\n' | tr a-f A-F",
    "percent-encoded": "od -An -tx1 -v | tr -d '\\n' | sed 's/ /%/g'",
    "upper case": "tr a-z A-Z",
    "mixed case": "sed 's/\\(.\\)\\(.\\)/\\U\\1\\E\\2/g'",
    "reversed, upper case": "rev | tr a-z A-Z",
}


@pytest.fixture
def leaked(tmp_path: Path) -> Iterator[Path]:
    """A working directory holding a shell start-up file that exports the key."""
    (tmp_path / ".bashrc").write_text(f"export DEEPSEEK_API_KEY={KEY}\n")
    hide(KEY)
    yield tmp_path


def _result_of(work: Path, command: str) -> tuple[str, str]:
    """What the model is sent, and what the log holds, after the real loop ran ``command``
    with the real ``bash`` tool (``--allow shell``)."""
    model = ScriptedModel()
    model.enqueue(
        [
            ToolCallRequest(ToolCall("c1", "bash", json.dumps({"command": command}))),
            Finish("tool-calls"),
        ],
        [TextDelta("done"), Finish("stop")],
    )
    workspace = Workspace.at(work, work / ".out")
    store = SessionStore(work / ".home")
    with store.create(work) as log:
        conversation = Conversation(
            model,
            log,
            model_name="m",
            toolbox=Toolbox([BashTool(workspace)]),
            approval=ApprovalPolicy.granting(["shell"]),
        )
        asyncio.run(conversation.run_turn("look"))
        return repr(model.requests[-1]), log.path.read_text()


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_command_that_encodes_the_key_from_a_startup_file_gets_it_masked(
    leaked: Path, encoding: str
) -> None:
    extract = "grep -o 'sk-[a-z0-9-]*' .bashrc | tr -d '\\n' | "
    sent, stored = _result_of(leaked, extract + ENCODINGS[encoding])
    control = subprocess.run(
        ["bash", "-c", extract + ENCODINGS[encoding]], cwd=leaked, capture_output=True, text=True
    ).stdout
    assert control and control != KEY  # the command does print the key, encoded
    core = control.strip("%")[2:-3]  # the part no neighbour decides
    assert core not in sent and core not in stored, f"{encoding}: {control}"
    assert "[DEEPSEEK_API_KEY" in sent


# -- the process's own start-up environment --------------------------------------------------------


def test_dshs_start_up_environment_holds_no_key_even_for_root(tmp_path: Path) -> None:
    """Root reads any process's ``/proc/<pid>/environ``; dsh overwrote the key in it."""
    with StubServer() as stub:
        env = child_env(stub.url, tmp_path / "home", COPY_OF_IT=f"key={KEY}")
        child = subprocess.Popen(
            DSH, env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        try:
            wait_blocked_reading(child.pid)
            environ = Path(f"/proc/{child.pid}/environ").read_bytes()
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait()
    assert KEY.encode() not in environ
    assert b"DEEPSEEK_BASE_URL=" + stub.url.encode() in environ  # the rest is still there


@pytest.mark.slow
def test_an_unsandboxed_command_reading_dshs_environment_gets_no_key(tmp_path: Path) -> None:
    """The review's attack: ``tr '\\0' '\\n' < /proc/$PPID/environ | grep DEEPSEEK_API | rev``."""
    work = tmp_path / "work"
    work.mkdir()
    command = "tr '\\0' '\\n' < /proc/$PPID/environ | grep DEEPSEEK_API | rev"
    with StubServer() as stub:
        stub.enqueue(ToolCalls((("bash", json.dumps({"command": command})),)))
        env = child_env(stub.url, tmp_path / "home")
        run = subprocess.run(
            [*DSH, "--sandbox", "off", "--allow", "shell"],
            env=env,
            cwd=work,
            input=b"go\n",
            capture_output=True,
            timeout=120,
        )
        sent = json.dumps(stub.requests)
    assert run.returncode == 0, run.stderr
    if os.geteuid() == 0:
        assert "=YEK_IPA_KEESPEED" in sent  # the command ran and found the variable
    else:  # dsh is not dumpable: an ordinary user's command cannot read its environ at all
        assert "Permission denied" in sent
    assert KEY not in sent and KEY[::-1] not in sent
