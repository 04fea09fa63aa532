"""Pipe mode golden test: one input with a line for each outcome, run through dsh's ``main``
in-process (``tests/harness.py``: the same reading of the input, the same writing of stdout and
stderr as on pipes), its retry waits on a clock that jumps.

Regenerate the expected files after an intended change with
``DSH_REGENERATE=1 python -m pytest tests/dsh_stdio/test_pipe_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dsh_core.testing import ManualClock, StubServer
from tests.harness import run_in_process
from tests.support import assert_no_canary

GOLDEN = Path(__file__).parent / "golden"

INPUT = b"".join(
    [
        b"hello\n",
        b"   \n",  # whitespace only: not a turn
        b"\n",
        b"think about it\n",
        b"limit\n",
        b"cut\n",
        b"x" * (300 * 1024) + b"\n",  # over the 256 KiB message limit: rejected, session goes on
        b"malformed\n",
        b"filter\n",
        b"fail\n",
        b"caf\xe9 \x00 ok\n",  # invalid UTF-8 and NUL are replaced, not fatal
        b"crlf line\r\n",
        b"escape\n",  # on a pipe the model's text is data: passed through as it is
        b"bye\n",
        b"auth\n",  # a refused key stops the run: the lines after it are never sent
        b"quota\n",
        b"never sent",
    ]
)


def normalise(text: str, base_url: str) -> str:
    """Replace what changes from run to run: the stub's port, measured seconds, the session,
    and the prompt's tokens (the stub counts what it received, and the system prompt holds the
    date and the working directory; what it cached depends on the requests before), and so
    the dollars and how full the context is."""
    text = text.replace(base_url, "{base_url}")
    text = re.sub(r"tokens in \d+ \(cached \d+\)", "tokens in N (cached N)", text)
    text = re.sub(r"\$\d+(?:,\d{3})*(?:\.\d+)?", "$N", text)
    text = re.sub(r"ctx \d+%", "ctx N%", text)
    text = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b", "{session}", text)
    return re.sub(r"\d+\.\d+ s\b", "N s", text)


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DSH_REGENERATE"):
        path.write_bytes(actual.encode("utf-8"))
    assert actual == path.read_bytes().decode("utf-8")


def test_pipe_transcript(dsh_env: dict[str, str], home: Path, stub: StubServer) -> None:
    result = run_in_process(dsh_env, stdin=INPUT, clock=ManualClock(autojump=True))
    stdout = result.stdout_bytes.decode("utf-8")
    stderr = result.stderr_bytes.decode("utf-8")
    assert result.returncode == 1, stderr
    check("pipe.stdout", normalise(stdout, stub.url))
    check("pipe.stderr", normalise(stderr, stub.url))
    assert_no_canary(home, stdout, stderr)
    (log,) = home.rglob("session.jsonl")
    assert log.stat().st_mode & 0o777 == 0o600
