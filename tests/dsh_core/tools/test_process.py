"""The process module on its own: the capped output, and waiting for a child without a pidfd.

The ``bash`` tool's tests (``test_tools_shell.py``) run the rest on real commands.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from pathlib import Path

import pytest

from dsh_core.tools.process import CappedOutput, Completion, run_child, signal_name


def capped(spill_dir: Path, *chunks: bytes, limit: int = 10) -> CappedOutput:
    output = CappedOutput(spill_dir, limit=limit, prefix="test-")
    for chunk in chunks:
        output.feed(chunk)
    output.close()
    return output


def test_short_output_is_kept_whole_without_a_file(tmp_path: Path) -> None:
    output = capped(tmp_path / "out", b"0123", b"456789")
    assert output.text() == "0123456789"
    assert (output.truncated, output.output_file, output.chars) == (False, None, 10)
    assert not (tmp_path / "out").exists()


def test_a_character_split_between_reads_stays_whole(tmp_path: Path) -> None:
    snowman = "☃".encode()
    output = capped(tmp_path, b"a" + snowman[:1], snowman[1:2], snowman[2:] + b"b\xff", b"\xe2")
    # An invalid byte, and a sequence the output ends inside, are each one U+FFFD.
    assert output.text() == "a☃b\ufffd\ufffd"


def test_long_output_keeps_head_and_tail_and_saves_the_rest(tmp_path: Path) -> None:
    spill_dir = tmp_path / "home" / "out"
    data = [b"line 1\n", b"line 2\n", b"line 3\n", b"line 4\n"]
    output = capped(spill_dir, *data, limit=14)
    assert output.truncated and output.output_file is not None
    path = output.output_file
    assert output.text() == (
        f"line 1\n[... 14 of 28 characters cut here; the whole output is in {path}]\nline 4\n"
    )
    assert path.read_bytes() == b"".join(data)
    assert path.parent == spill_dir and path.name.startswith("test-")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(spill_dir.stat().st_mode) == 0o700


def test_the_cut_is_on_its_own_line(tmp_path: Path) -> None:
    # A head that ends mid-line gets a newline before the marker; a first chunk over the limit.
    output = capped(tmp_path, b"abcdefghijklmnopqrstuvwxyz", limit=10)
    assert output.text() == (
        f"abcde\n[... 16 of 26 characters cut here; the whole output is in {output.path}]\nvwxyz"
    )


def test_a_file_that_cannot_be_made_is_said(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    output = capped(blocker / "out", b"0123456789abcdef", limit=10)
    assert output.truncated and output.output_file is None
    text = output.text()
    assert text.startswith("01234\n[... 6 of 16 characters cut here; ")
    assert "the whole output could not be saved: [Errno 20] Not a directory" in text
    assert text.endswith("]\nbcdef")


def test_signal_names() -> None:
    assert (signal_name(9), signal_name(2), signal_name(1000)) == ("SIGKILL", "SIGINT", "1000")


def test_without_pidfd_a_thread_waits_for_the_child(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    seen: list[bytes] = []

    async def main(command: str, time_limit: float) -> Completion:
        argv = ["/bin/sh", "-c", command]
        return await run_child(argv, cwd=tmp_path, env={}, sink=seen.append, time_limit=time_limit)

    assert asyncio.run(main("echo hi; exit 2", 60)) == Completion(2, "exited")
    assert b"".join(seen) == b"hi\n"
    # It never ends by itself: a timeout (SIGTERM ends sleep at once; SIGKILL follows 2 s on).
    ended = asyncio.run(main("exec sleep 1000", 0.01))
    assert (ended.returncode, ended.ended, ended.signals[0]) == (
        -signal.SIGTERM,
        "timed-out",
        signal.SIGTERM,
    )
