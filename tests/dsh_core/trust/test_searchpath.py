"""``search_path``: ``PATH``'s directories, resolved, and which a command could have written."""

from __future__ import annotations

import os
from pathlib import Path

from dsh_core.trust.searchpath import SearchDirectory, search_path


def test_relative_entries_and_those_under_the_working_directory_are_writable(
    tmp_path: Path,
) -> None:
    root = Path(os.path.realpath(tmp_path)) / "work"
    (root / "bin").mkdir(parents=True)
    (root / "link").symlink_to("/usr/bin")  # leads out: not writable
    path = os.pathsep.join([f"{root}/bin", "bin", "", f"{root}/link", "/usr/bin"])
    assert search_path(path, root) == [
        SearchDirectory(f"{root}/bin", f"{root}/bin", True),
        SearchDirectory("bin", f"{root}/bin", True),
        SearchDirectory("", str(root), True),
        SearchDirectory(f"{root}/link", os.path.realpath("/usr/bin"), False),
        SearchDirectory("/usr/bin", os.path.realpath("/usr/bin"), False),
    ]
    assert [d.writable for d in search_path(f"{root}/bin:bin", None)] == [False, True]


def test_a_program_is_an_executable_file_named_as_path_spells_it(tmp_path: Path) -> None:
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "data").write_text("")
    (tmp_path / "dir").mkdir()
    (tmp_path / "tool").chmod(0o755)
    (directory,) = search_path(str(tmp_path), None)
    assert directory.program("tool") == f"{tmp_path}/tool"
    assert [directory.program(n) for n in ("data", "dir", "missing")] == [None, None, None]
