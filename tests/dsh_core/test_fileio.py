"""The shared file helpers: sizes as shown, whole reads, durable directory entries."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dsh_core.fileio import format_size, fsync_directory, read_up_to


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 bytes"),
        (812, "812 bytes"),
        (1023, "1,023 bytes"),
        (1024, "1 KiB"),
        (1025, "1.1 KiB"),  # rounded up: just over 1 KiB never reads as 1 KiB
        (300 * 1024, "300 KiB"),
        (300 * 1024 + 1, "300.1 KiB"),
        (1024**2 - 1, "1024 KiB"),
        (16 * 1024**2, "16 MiB"),
        (10 * 1024**2 + 1, "10.1 MiB"),
        (2 * 1024**3 - 1, "2 GiB"),
        (5 * 1024**4 + 1, "5.1 TiB"),
    ],
)
def test_format_size(size: int, shown: str) -> None:
    assert format_size(size) == shown


def test_read_up_to_reads_on_past_short_reads() -> None:
    read_end, write_end = os.pipe()
    sent = [b"a" * 100_000, b"b" * 100_000]

    def write() -> None:
        # Two writes: a pipe hands the first to a read before the second arrives.
        for part in sent:
            os.write(write_end, part)
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_up_to(read_end, 150_000) == b"a" * 100_000 + b"b" * 50_000
        assert read_up_to(read_end, 150_000) == b"b" * 50_000  # fewer only at the end
        assert read_up_to(read_end, 10) == b""
    finally:
        writer.join()
        os.close(read_end)


def test_fsync_directory(tmp_path: Path) -> None:
    (tmp_path / "new").write_text("x")
    fsync_directory(tmp_path)
    fsync_directory(str(tmp_path))
    with pytest.raises(NotADirectoryError):
        fsync_directory(tmp_path / "new")
