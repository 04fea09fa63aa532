"""The ``read`` tool: numbered lines, the limits and their markers, and every file it refuses."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from dsh_core.chain import error_chain
from dsh_core.tools import Access
from dsh_core.tools.specs import MAX_OUTPUT_BYTES
from dsh_core.trust.workspace import Fingerprint
from tests.dsh_core.tools.test_builtin import Tools, tools

__all__ = ["tools"]


def lines(count: int, width: int = 0) -> str:
    return "".join(f"line {n}".ljust(width) + "\n" for n in range(1, count + 1))


def test_numbered_like_cat_n(tools: Tools) -> None:
    (tools.root / "a.txt").write_text("first\n\n  indented\tand tab\nlast, no newline")
    assert tools.run("read", file_path="a.txt") == (
        "     1\tfirst\n     2\t\n     3\t  indented\tand tab\n     4\tlast, no newline"
    )
    assert tools.prepare("read", file_path="a.txt").access == Access("read")


def test_offset_and_limit(tools: Tools) -> None:
    (tools.root / "a.txt").write_text(lines(10))
    assert tools.run("read", file_path="a.txt", offset=9) == "     9\tline 9\n    10\tline 10"
    assert tools.run("read", file_path="a.txt", offset=3, limit=2) == (
        "     3\tline 3\n     4\tline 4\n"
        "[read stopped at line 4 of 10 (limit=2); read on with offset=5]"
    )
    assert tools.run("read", file_path="a.txt", offset=9, limit=2) == (
        "     9\tline 9\n    10\tline 10"  # nothing left: no marker
    )
    # Models count from 0 as often as from 1: offset 0 is line 1.
    assert tools.run("read", file_path="a.txt", offset=0, limit=1).startswith("     1\tline 1\n")
    assert tools.prepare("read", file_path="a.txt", offset=5).summary == "a.txt from line 5"


def test_an_offset_past_the_end(tools: Tools) -> None:
    (tools.root / "a.txt").write_text(lines(10))
    assert tools.error("read", file_path="a.txt", offset=11) == (
        "Error: cannot read a.txt from line 11: it has only 10 lines"
    )
    (tools.root / "b.txt").write_text("one\ntwo")  # the last line has no newline
    assert tools.error("read", file_path="b.txt", offset=4) == (
        "Error: cannot read b.txt from line 4: it has only 2 lines"
    )
    assert tools.run("read", file_path="b.txt", offset=2) == "     2\ttwo"


def test_bad_offsets_and_limits(tools: Tools) -> None:
    (tools.root / "a.txt").write_text("a\n")
    assert tools.error("read", file_path="a.txt", offset=-1) == (
        "Error: invalid arguments: offset must be at least 0, not -1"
    )
    assert tools.error("read", file_path="a.txt", limit=0) == (
        "Error: invalid arguments: limit must be at least 1, not 0"
    )
    assert tools.error("read", file_path="a.txt", limit="ten") == (
        "Error: invalid arguments: limit must be an integer, not a string"
    )


def test_an_empty_file(tools: Tools) -> None:
    (tools.root / "empty.txt").write_text("")
    assert tools.run("read", file_path="empty.txt") == "[empty.txt is empty]"
    assert tools.run("read", file_path="empty.txt", offset=5) == "[empty.txt is empty]"


def test_two_thousand_lines_then_a_marker_with_the_total(tools: Tools) -> None:
    (tools.root / "big.txt").write_text(lines(5123))
    shown = tools.run("read", file_path="big.txt").split("\n")
    assert len(shown) == 2001
    assert shown[1999] == "  2000\tline 2000"
    assert shown[2000] == (
        "[read stopped at line 2,000 of 5,123 (2,000-line limit); read on with offset=2001]"
    )
    # A limit above the cap is the cap.
    assert tools.run("read", file_path="big.txt", limit=9999).split("\n")[-1] == shown[-1]
    last = tools.run("read", file_path="big.txt", offset=4001).split("\n")
    assert (len(last), last[-1]) == (1123, "  5123\tline 5123")


def test_fifty_kib_then_a_marker(tools: Tools) -> None:
    (tools.root / "wide.txt").write_text(lines(1000, width=100))
    shown = tools.run("read", file_path="wide.txt")
    numbered, marker = shown.rsplit("\n", 1)
    stopped = int(numbered.rsplit("\n", 1)[1].split("\t")[0])
    assert len(numbered.encode()) <= MAX_OUTPUT_BYTES
    assert len(numbered.encode()) > MAX_OUTPUT_BYTES - 120  # no line that still fit was left
    assert marker == (
        f"[read stopped at line {stopped} of 1,000 (50 KiB output limit); "
        f"read on with offset={stopped + 1}]"
    )
    follow = tools.run("read", file_path="wide.txt", offset=stopped + 1)
    assert follow.startswith(f"{stopped + 1:>6}\tline {stopped + 1} ")


def test_a_very_long_line_is_cut_with_a_marker(tools: Tools) -> None:
    (tools.root / "min.js").write_text("a" * 100_000 + "\nshort\n" + "é" * 3000 + "\n")
    first, second, third = tools.run("read", file_path="min.js").split("\n")
    assert first == "     1\t" + "a" * 2000 + " … [line cut: 100,001 bytes in all]"
    assert second == "     2\tshort"
    assert third == "     3\t" + "é" * 2000 + " … [line cut: 6,001 bytes in all]"


def test_a_long_line_cut_inside_a_character(tools: Tools) -> None:
    # 8004 bytes are read of a long line: make the cut fall inside a 4-byte character.
    (tools.root / "emoji.txt").write_text("ab" + "😀" * 3000 + "\n")
    (shown,) = tools.run("read", file_path="emoji.txt").split("\n")
    assert shown == "     1\tab" + "😀" * 1998 + " … [line cut: 12,003 bytes in all]"
    assert "\ufffd" not in shown


def test_crlf_lines_are_shown_without_the_cr(tools: Tools) -> None:
    (tools.root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    assert tools.run("read", file_path="dos.txt") == "     1\tone\n     2\ttwo"


def test_binary_files_are_refused(tools: Tools) -> None:
    (tools.root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert tools.error("read", file_path="image.png") == (
        "Error: cannot read image.png: it is a binary file (a NUL byte at offset 8)"
    )
    (tools.root / "latin1.txt").write_bytes("café au lait\n".encode("latin-1"))
    assert tools.error("read", file_path="latin1.txt") == (
        "Error: cannot read latin1.txt: it is not UTF-8 text (byte 0xe9 at offset 3); "
        "it may be binary, or text in another encoding"
    )
    assert tools.workspace.read_files.fingerprint(str(tools.root / "image.png")) is None


def test_a_character_cut_by_the_8_kib_boundary_is_text(tools: Tools) -> None:
    (tools.root / "edge.txt").write_text("x" * 8191 + "é\n")
    assert tools.run("read", file_path="edge.txt") == (
        "     1\t" + "x" * 2000 + " … [line cut: 8,194 bytes in all]"
    )


def test_bad_bytes_after_the_start_are_shown_as_replacement(tools: Tools) -> None:
    (tools.root / "mixed.txt").write_bytes(b"ok\n" * 5000 + b"caf\xe9\n")
    shown = tools.run("read", file_path="mixed.txt", offset=5001)
    assert shown == (
        "  5001\tcaf\ufffd\n"
        "[some bytes in these lines are not valid UTF-8; they are shown as \ufffd]"
    )


def test_a_two_gigabyte_sparse_file_is_refused_at_once(tools: Tools) -> None:
    path = tools.root / "huge.bin"
    path.touch()
    os.truncate(path, 2 * 1024**3)
    tracemalloc.start()
    try:
        message = tools.error("read", file_path="huge.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message == "Error: cannot read huge.bin: it is a binary file (a NUL byte at offset 0)"
    assert peak < 1024 * 1024  # it never read more than the first few KiB


def test_a_two_gigabyte_file_is_read_a_piece_at_a_time(tools: Tools) -> None:
    path = tools.root / "huge.log"
    path.write_text(lines(10_000))
    os.truncate(path, 2 * 1024**3)  # text first, then a hole of zeros
    tracemalloc.start()
    try:
        shown = tools.run("read", file_path="huge.log", offset=9000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    shown_lines = shown.split("\n")
    assert shown_lines[0] == "  9000\tline 9000"
    assert shown_lines[1000] == " 10000\tline 10000"
    # The hole is one line of zeros without end: reading stops in it, having looked at 1 MiB.
    assert shown_lines[1001] == (
        " 10001\t" + "\0" * 2000 + " … [line cut: no line break in 1,048,576 bytes]"
    )
    assert shown_lines[1002] == (
        "[read stopped inside line 10,001: no line break in its first 1 MiB, and 2 GiB "
        "more follow; this is no file to read by lines: grep finds text in it]"
    )
    assert len(shown_lines) == 1003
    assert peak < 4 * 1024 * 1024


def test_a_big_file_with_lines_is_read_from_any_offset(tools: Tools) -> None:
    path = tools.root / "big.log"
    path.write_text(lines(300_000))  # 3.4 MB
    shown = tools.run("read", file_path="big.log", offset=299_999).split("\n")
    assert shown == ["299999\tline 299999", "300000\tline 300000"]
    middle = tools.run("read", file_path="big.log", offset=150_000, limit=1).split("\n")
    assert middle == [
        "150000\tline 150000",
        "[read stopped at line 150,000 of 300,000 (limit=1); read on with offset=150001]",
    ]


def test_a_directory_is_refused(tools: Tools) -> None:
    (tools.root / "src").mkdir()
    assert tools.error("read", file_path="src") == (
        "Error: cannot read src: it is a directory (glob lists the files in it)"
    )
    assert tools.error("read", file_path=".") == (
        "Error: cannot read .: it is a directory (glob lists the files in it)"
    )


def test_a_fifo_is_refused_without_blocking(tools: Tools) -> None:
    os.mkfifo(tools.root / "pipe")
    # Opening a FIFO for reading waits for a writer: if read opened it, this test would hang.
    assert tools.error("read", file_path="pipe") == (
        "Error: cannot read pipe: it is a named pipe (FIFO), not a regular file"
    )
    (tools.root / "to-pipe").symlink_to("pipe")
    assert "named pipe" in tools.error("read", file_path="to-pipe")


def test_a_socket_and_a_device_are_refused(tools: Tools) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tools.root / "sock"))
        assert tools.error("read", file_path="sock") == (
            "Error: cannot read sock: it is a socket, not a regular file"
        )
    assert tools.error("read", file_path="/dev/zero") == (
        "Error: cannot read /dev/zero: it is a device, not a regular file"
    )


def test_a_missing_file(tools: Tools) -> None:
    assert tools.error("read", file_path="nope.txt") == (
        f"Error: cannot read nope.txt: [Errno 2] No such file or directory: "
        f"'{tools.root / 'nope.txt'}'"
    )
    (tools.root / "file").write_text("")
    assert "[Errno 20] Not a directory" in tools.error("read", file_path="file/below")


def test_a_symlink_loop(tools: Tools) -> None:
    (tools.root / "a").symlink_to("b")
    (tools.root / "b").symlink_to("a")
    assert "Too many levels of symbolic links" in tools.error("read", file_path="a")


def as_nobody(work: Callable[[], str]) -> str:
    """What ``work`` returns in a forked child that gave up root (uid and gid 65534).

    Root reads any file whatever its mode, so "no permission" can only be seen without root; a
    fork keeps the interpreter and imports that a fresh ``nobody`` process could not reach.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            result = work()
        except BaseException as exc:
            result = f"raised {error_chain(exc)}"
        os.write(write_end, result.encode("utf-8", "replace"))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        result = pipe.read().decode()
    os.waitpid(pid, 0)
    return result


def test_a_file_without_read_permission(tmp_path: Path) -> None:
    # As root the test runs in a child that is not: mkdtemp's directory is one it can enter.
    work = Path(tempfile.mkdtemp(prefix="dsh-perm-"))
    try:
        work.chmod(0o755)
        secret = work / "secret.txt"
        secret.write_text("s\n")
        secret.chmod(0)

        def attempt() -> str:
            return Tools(work).error("read", file_path="secret.txt")

        message = as_nobody(attempt) if os.geteuid() == 0 else attempt()
        assert message == (
            f"Error: cannot read secret.txt: [Errno 13] Permission denied: '{secret}'"
        )
    finally:
        (work / "secret.txt").unlink()
        work.rmdir()


def test_a_read_records_the_fingerprint(tools: Tools) -> None:
    path = tools.root / "a.txt"
    path.write_text(lines(3000))
    tools.run("read", file_path="a.txt", offset=2500, limit=1)  # any part counts
    recorded = tools.workspace.read_files.fingerprint(str(path))
    assert recorded == Fingerprint.of(path.stat())
    assert stat.S_ISREG(path.stat().st_mode)
