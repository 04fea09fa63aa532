"""SPEC 10.7: a model-chosen argument cannot freeze dsh; Ctrl-C ends any running tool (review
finding 4).

The review froze dsh without any grant: ``glob {"pattern": "{" * 40000 + "x"}`` spent 73 s in
the glob's brace translation (quadratic, in ``prepare``, on the event loop: Ctrl-C waited),
and ``grep`` with that as its ``glob`` 85 s; ``read`` of a 50 GB sparse file at offset 10^12
read all of it to find the line, synchronously on the event loop (SIGINT waited 138 s). Each
attack here runs the call as the loop does, in-process: what is refused is refused in
``prepare`` at once, and a long read is cancelled while it runs. Nothing is timed; the run's
own timeout is the only bound (on the reviewed code these tests hang until it).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from dsh_core.tools import Invocation, ToolError, ToolOutput, read
from tests.dsh_core.tools.test_builtin import Tools, tools

__all__ = ["tools"]

BRACES = "{" * 40000 + "x"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("glob", {"pattern": BRACES}),
        ("grep", {"pattern": "x", "glob": BRACES}),
        ("grep", {"pattern": "(x|" * 20000 + "y"}),
        ("read", {"file_path": "a/" * 20000 + "x"}),
    ],
    ids=["glob", "grep-glob", "grep-pattern", "read-path"],
)
def test_an_argument_made_to_take_minutes_is_refused_in_prepare(
    tools: Tools, name: str, arguments: dict[str, str]
) -> None:
    with pytest.raises(ToolError, match=r"^invalid arguments: \w+ is [\d,]+ (characters|bytes)"):
        tools.prepare(name, **arguments)


def test_nested_braces_are_translated_in_one_pass(tools: Tools) -> None:
    (tools.root / "x").write_text("x\n")
    deep = "{a," * 32 + "x" + "}" * 32
    assert tools.run("glob", pattern=deep) == "x"
    with pytest.raises(ToolError, match="nests braces more than 32 deep"):
        tools.prepare("glob", pattern="{a," + deep + "}")
    assert tools.run("glob", pattern="{" * 9999 + "x").startswith("no files match")


def sparse(path: Path, size: int) -> Path:
    """A file of 200 lines of text (more than read's 8 KiB test for a binary file), then holes
    up to ``size`` bytes (no disk used)."""
    with open(path, "wb") as file:
        file.write(b"text first, then holes: a line of the header\n" * 200)
        file.truncate(size)
    return path


def test_an_offset_past_the_end_of_a_huge_file_is_an_error_at_once(tools: Tools) -> None:
    sparse(tools.root / "big", 50 << 30)
    error = tools.error("read", file_path="big", offset=10**12)
    assert error == (
        "Error: cannot read big from line 1,000,000,000,000: it has at most "
        "53,687,091,200 lines (50 GiB)"
    )


def test_ctrl_c_ends_a_read_that_is_passing_a_huge_file(tools: Tools) -> None:
    """The read passes holes to reach its offset; the call is cancelled while it does (as
    Ctrl-C cancels the turn): the cancellation is at once, and the reading stops by itself."""
    sparse(tools.root / "big", 1 << 40)
    invocation = tools.prepare("read", file_path="big", offset=10**11)

    async def main(invocation: Invocation) -> None:
        async def run() -> ToolOutput:
            return await invocation.run()

        task = asyncio.create_task(run())
        while not any(thread.name == "dsh-read" for thread in threading.enumerate()):
            assert not task.done(), task.result()  # (the reviewed code never got here)
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main(invocation))
    for thread in threading.enumerate():
        if thread.name == "dsh-read":
            thread.join()  # stops at its next block: it was told to


def test_a_read_does_not_pass_more_than_its_limit_to_find_its_line(
    tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read, "MAX_SKIP_BYTES", 16 << 20)  # 1 GiB: the same, slower
    sparse(tools.root / "big", 8 << 30)
    error = tools.error("read", file_path="big", offset=10**9)
    assert error == (
        "Error: cannot read big from line 1,000,000,000: its first 16 MiB hold 200 lines, and "
        "read looks no further for the line to start from; grep finds text anywhere in a file "
        "this large"
    )
