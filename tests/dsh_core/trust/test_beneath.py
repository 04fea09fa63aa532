"""Opening a directory beneath the working directory without following a symlink (SPEC 10.11),
by ``openat2`` and by the per-component fallback, each against the real kernel; and the
``write`` tool that relies on it."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core.tools import ToolError
from dsh_core.trust import beneath
from dsh_core.trust.beneath import open_directory
from tests.dsh_core.tools.test_builtin import Tools, complete, tools

__all__ = ["tools"]


@pytest.fixture(params=["openat2", "per component"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs both ways; ``openat2`` only where this kernel has it."""
    if request.param == "per component":
        monkeypatch.setattr(beneath._openat2, "available", False)
    else:
        probe = beneath._Openat2()
        fd = probe(os.open("/", os.O_RDONLY | os.O_DIRECTORY), "tmp") if probe.available else None
        if fd is None:
            pytest.skip("this kernel (or its seccomp filter) has no openat2")
        os.close(fd)
    yield request.param


def opened(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def test_a_directory_is_opened_and_missing_ones_made(tmp_path: Path, way: str) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    fd, created = open_directory(str(tmp_path), "a/b")
    assert (opened(fd), created) == (str(tmp_path / "a" / "b"), [])
    fd, created = open_directory(str(tmp_path), "a/x/y", create=True)
    assert (opened(fd), created) == (str(tmp_path / "a" / "x" / "y"), ["a/x", "a/x/y"])
    fd, created = open_directory(str(tmp_path), "")
    assert (opened(fd), created) == (str(tmp_path), [])
    with pytest.raises(FileNotFoundError):
        open_directory(str(tmp_path), "a/missing")


@pytest.mark.parametrize("target", ["inside", "outside"])
def test_a_symlink_on_the_way_is_never_followed(tmp_path: Path, way: str, target: str) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "link").symlink_to(root / "real" if target == "inside" else tmp_path / "elsewhere")
    for relative in ("link", "link/new"):
        with pytest.raises(OSError) as caught:
            open_directory(str(root), relative, create=True)
        assert caught.value.errno in (errno.ELOOP, errno.EXDEV)
    assert list((tmp_path / "elsewhere").iterdir()) == [] and list((root / "real").iterdir()) == []


def test_a_file_on_the_way_is_not_a_directory(tmp_path: Path, way: str) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        open_directory(str(tmp_path), "file/below", create=True)


def test_a_symlink_there_at_the_check_is_written_through(tools: Tools, way: str) -> None:
    """Judged by where it leads, and written there: only a swap after the check is refused."""
    (tools.root / "real").mkdir()
    (tools.root / "docs").symlink_to("real")
    (tools.root / "notes.md").symlink_to("real/notes.md")
    assert tools.run("write", file_path="docs/a.md", content="a\n") == "created docs/a.md (1 line)"
    assert tools.run("write", file_path="notes.md", content="n\n") == "created notes.md (1 line)"
    tools.run("read", file_path="notes.md")
    tools.run("edit", file_path="notes.md", old_string="n", new_string="m")
    assert (tools.root / "real" / "a.md").read_text() == "a\n"
    assert (tools.root / "real" / "notes.md").read_text() == "m\n"
    assert (tools.root / "notes.md").is_symlink()


def test_a_hard_linked_file_is_not_changed(tools: Tools, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.txt"
    other.write_text("mine\n")
    os.link(other, tools.root / "linked.txt")
    tools.run("read", file_path="linked.txt")
    for call, arguments in [
        ("write", {"content": "theirs\n"}),
        ("edit", {"old_string": "mine", "new_string": "theirs"}),
    ]:
        assert tools.error(call, file_path="linked.txt", **arguments) == (
            f"Error: cannot {call} linked.txt: it is a hard link (2 names share this file, and "
            "another may be outside the working directory); dsh changes only files with one name"
        )
    assert other.read_text() == "mine\n"
    # Made a hard link after the check: refused at the write.
    (tools.root / "single.txt").write_text("one\n")
    tools.run("read", file_path="single.txt")
    invocation = tools.prepare("write", file_path="single.txt", content="two\n")
    os.link(tools.root / "single.txt", tmp_path / "second-name.txt")
    with pytest.raises(ToolError, match="it is a hard link"):
        complete(invocation)
