"""The ``write`` and ``edit`` tools: the read-first rule, atomic replacement, modes, diffs."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

import pytest

from dsh_core.tools import Access, ToolError, ToolOutput
from dsh_core.tools.specs import MAX_EDIT_BYTES
from dsh_core.trust.workspace import Fingerprint
from tests.dsh_core.tools.test_builtin import Tools, complete, tools

__all__ = ["tools"]


def run_failing(tools: Tools, name: str, **arguments: object) -> str:
    """Prepare (which must work), then run (which must fail): the model's ``Error:`` text."""
    invocation = tools.prepare(name, **arguments)
    try:
        complete(invocation)
    except ToolError as exc:
        return ToolOutput.failed(exc).content
    raise AssertionError("the run did not fail")


def changed_on_disk(path: Path, text: str) -> None:
    """Change ``path`` as another program would, visibly even on a coarse-clock file system."""
    before = path.stat()
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))


def leftovers(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if ".dsh-tmp" in name]


# --- write ----------------------------------------------------------------------------------


def test_write_creates_a_file_with_the_umask_mode(tools: Tools) -> None:
    old = os.umask(0o027)
    try:
        result = tools.run("write", file_path="new.txt", content="a\nb\n")
    finally:
        os.umask(old)
    path = tools.root / "new.txt"
    assert result == "created new.txt (2 lines)"
    assert path.read_text() == "a\nb\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert tools.workspace.read_files.fingerprint(str(path)) == Fingerprint.of(path.stat())


def test_write_creates_missing_parent_directories(tools: Tools) -> None:
    result = tools.run("write", file_path="src/pkg/mod.py", content="x = 1")
    assert result == (
        "created directory src/, created directory src/pkg/, created src/pkg/mod.py (1 line)"
    )
    assert (tools.root / "src" / "pkg" / "mod.py").read_text() == "x = 1"


def test_write_refuses_a_parent_that_is_a_file(tools: Tools) -> None:
    (tools.root / "file").write_text("")
    assert tools.error("write", file_path="file/x.txt", content="") == (
        f"Error: cannot write file/x.txt: [Errno 20] Not a directory: "
        f"'{tools.root / 'file' / 'x.txt'}'"
    )


def test_write_to_an_existing_file_needs_a_read(tools: Tools) -> None:
    path = tools.root / "a.txt"
    path.write_text("old\n")
    assert tools.error("write", file_path="a.txt", content="new\n") == (
        "Error: cannot write a.txt: it was not read in this session; "
        "read it first (any part), then write it"
    )
    tools.run("read", file_path="a.txt")
    assert tools.run("write", file_path="a.txt", content="new\n") == "wrote 1 line to a.txt"
    assert path.read_text() == "new\n"


def test_write_keeps_the_mode_of_the_file_it_replaces(tools: Tools) -> None:
    path = tools.root / "run.sh"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o751)
    tools.run("read", file_path="run.sh")
    tools.run("write", file_path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.read_text() == "#!/bin/sh\necho hi\n"


def test_write_keeps_the_owner_when_root_writes_for_someone(tools: Tools) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another owner")
    path = tools.root / "theirs.txt"
    path.write_text("x\n")
    os.chown(path, 65534, 65534)
    tools.run("read", file_path="theirs.txt")
    tools.run("write", file_path="theirs.txt", content="y\n")
    assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534)


def test_write_refuses_a_file_changed_on_disk_since_the_read(tools: Tools) -> None:
    path = tools.root / "a.txt"
    path.write_text("mine\n")
    tools.run("read", file_path="a.txt")
    changed_on_disk(path, "theirs, longer\n")
    assert tools.error("write", file_path="a.txt", content="new\n") == (
        "Error: cannot write a.txt: it changed on disk since it was read "
        "(its size went from 5 to 15 bytes); read it again first"
    )
    assert path.read_text() == "theirs, longer\n"
    tools.run("read", file_path="a.txt")
    tools.run("write", file_path="a.txt", content="new\n")
    assert path.read_text() == "new\n"


def test_a_change_while_the_question_waits_is_caught_before_the_rename(tools: Tools) -> None:
    path = tools.root / "a.txt"
    path.write_text("mine\n")
    tools.run("read", file_path="a.txt")
    invocation = tools.prepare("write", file_path="a.txt", content="new\n")
    changed_on_disk(path, "mine\n")  # same size, new time
    with pytest.raises(ToolError) as caught:
        complete(invocation)
    assert str(caught.value) == (
        "cannot write a.txt: it changed on disk since it was read (it was modified); "
        "read it again first"
    )
    assert path.read_text() == "mine\n"
    assert leftovers(tools.root) == []


def test_a_file_replaced_since_the_read_is_caught(tools: Tools) -> None:
    path = tools.root / "a.txt"
    path.write_text("mine\n")
    tools.run("read", file_path="a.txt")
    (tools.root / "a.new").write_text("mine\n")
    os.replace(tools.root / "a.new", path)  # another file in its place, same size
    assert "it was replaced by another file" in tools.error("write", file_path="a.txt", content="")
    tools.run("read", file_path="a.txt")
    invocation = tools.prepare("write", file_path="a.txt", content="new\n")
    path.unlink()
    with pytest.raises(ToolError, match="it was deleted since it was read; read it again"):
        complete(invocation)
    assert not path.exists()


def test_a_new_file_that_appears_before_the_run_is_not_clobbered(tools: Tools) -> None:
    invocation = tools.prepare("write", file_path="new.txt", content="mine\n")
    assert invocation.summary == "new.txt (new file)"
    (tools.root / "new.txt").write_text("someone else's\n")
    with pytest.raises(ToolError, match="a file appeared there since this call was made"):
        complete(invocation)
    assert (tools.root / "new.txt").read_text() == "someone else's\n"
    assert leftovers(tools.root) == []


def test_write_through_a_symlink_changes_the_file_it_points_to(tools: Tools) -> None:
    (tools.root / "real.txt").write_text("old\n")
    (tools.root / "link.txt").symlink_to("real.txt")
    tools.run("read", file_path="link.txt")
    tools.run("write", file_path="link.txt", content="new\n")
    assert (tools.root / "link.txt").is_symlink()
    assert (tools.root / "real.txt").read_text() == "new\n"


def test_write_refuses_a_directory_and_special_files(tools: Tools) -> None:
    (tools.root / "dir").mkdir()
    os.mkfifo(tools.root / "pipe")
    assert tools.error("write", file_path="dir", content="") == (
        "Error: cannot write dir: it is a directory (glob lists the files in it)"
    )
    assert tools.error("write", file_path="pipe", content="") == (
        "Error: cannot write pipe: it is a named pipe (FIFO), not a regular file"
    )


def test_write_refuses_text_that_is_not_unicode(tools: Tools) -> None:
    message = tools.error("write", file_path="a.txt", content="half a pair: \ud800")
    assert message.startswith("Error: invalid arguments: content is not valid Unicode text: ")


def test_write_outside_is_outside(tools: Tools, tmp_path: Path) -> None:
    invocation = tools.prepare("write", file_path=str(tmp_path / "out.txt"), content="x")
    assert invocation.access == Access("write", outside=(str(tmp_path / "out.txt"),))
    assert invocation.summary == (
        f"{tmp_path / 'out.txt'} (outside the working directory) (new file)"
    )


def test_write_previews_a_diff(tools: Tools) -> None:
    invocation = tools.prepare("write", file_path="new.py", content="a = 1\nb = 2\n")
    assert invocation.preview == "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2"
    (tools.root / "old.py").write_text("a = 1\nb = 2\nc = 3\n")
    tools.run("read", file_path="old.py")
    invocation = tools.prepare("write", file_path="old.py", content="a = 1\nb = 20\nc = 3\n")
    assert invocation.preview == (
        "--- a/old.py\n+++ b/old.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n c = 3"
    )
    same = tools.prepare("write", file_path="old.py", content="a = 1\nb = 2\nc = 3\n")
    assert same.preview == "(no change: the file already holds this content)"
    empty = tools.prepare("write", file_path="empty.txt", content="")
    assert empty.preview == "(a new, empty file)"


# --- edit -----------------------------------------------------------------------------------


def read_first(tools: Tools, name: str, text: str) -> Path:
    path = tools.root / name
    path.write_text(text)
    tools.run("read", file_path=name)
    return path


def test_edit_replaces_one_exact_match(tools: Tools) -> None:
    path = read_first(tools, "app.py", "def f():\n    return 1\n\ndef g():\n    return 2\n")
    invocation = tools.prepare(
        "edit", file_path="app.py", old_string="    return 2\n", new_string="    return 3\n"
    )
    assert invocation.access == Access("write")
    assert invocation.summary == "app.py"
    assert invocation.preview == (
        "--- a/app.py\n+++ b/app.py\n@@ -2,4 +2,4 @@\n     return 1\n \n def g():\n"
        "-    return 2\n+    return 3"
    )
    assert complete(invocation).content == "replaced 1 occurrence in app.py (line 5)"
    assert path.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"


def test_edit_with_no_match(tools: Tools) -> None:
    read_first(tools, "app.py", "x = 1\n")
    assert tools.error("edit", file_path="app.py", old_string="x = 2", new_string="x = 3") == (
        "Error: cannot edit app.py: old_string was not found in it; read the file again and "
        "copy the text exactly, whitespace and indentation included"
    )


def test_edit_with_two_matches_names_their_lines(tools: Tools) -> None:
    path = read_first(tools, "app.py", "x = 1\ny = 2\nx = 1\n")
    assert tools.error("edit", file_path="app.py", old_string="x = 1", new_string="x = 5") == (
        "Error: cannot edit app.py: old_string occurs 2 times (at lines 1, 3); add surrounding "
        "lines to make it unique, or set replace_all to replace every occurrence"
    )
    many = read_first(tools, "many.py", "x\n" * 12)
    assert "occurs 12 times (at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)" in tools.error(
        "edit", file_path="many.py", old_string="x", new_string="y"
    )
    assert many.read_text() == "x\n" * 12
    result = tools.run(
        "edit", file_path="app.py", old_string="x = 1", new_string="x = 5", replace_all=True
    )
    assert result == "replaced 2 occurrences in app.py (first at line 1)"
    assert path.read_text() == "x = 5\ny = 2\nx = 5\n"


def test_edit_argument_errors(tools: Tools) -> None:
    read_first(tools, "a.txt", "a\n")
    for arguments, message in [
        ({"old_string": "a", "new_string": "a"}, "old_string and new_string are the same"),
        ({"old_string": "", "new_string": "b"}, "old_string is empty"),
        ({"new_string": "b"}, "old_string is required"),
        ({"old_string": "a"}, "new_string is required"),
        ({"old_string": "a", "new_string": "b", "replace_all": "yes"}, "replace_all must be"),
    ]:
        assert tools.error("edit", file_path="a.txt", **arguments).startswith(
            f"Error: invalid arguments: {message}"
        )


def test_edit_can_delete_text(tools: Tools) -> None:
    path = read_first(tools, "a.txt", "keep\ndrop\nkeep\n")
    tools.run("edit", file_path="a.txt", old_string="drop\n", new_string="")
    assert path.read_text() == "keep\nkeep\n"


def test_edit_of_a_missing_file_or_one_not_read(tools: Tools) -> None:
    assert tools.error("edit", file_path="nope.py", old_string="a", new_string="b") == (
        "Error: cannot edit nope.py: it does not exist (write creates files)"
    )
    (tools.root / "unread.py").write_text("a\n")
    assert "it was not read in this session" in tools.error(
        "edit", file_path="unread.py", old_string="a", new_string="b"
    )


def test_edit_refuses_a_file_changed_on_disk(tools: Tools) -> None:
    path = read_first(tools, "a.txt", "one\n")
    changed_on_disk(path, "one\ntwo\n")
    assert tools.error("edit", file_path="a.txt", old_string="one", new_string="1") == (
        "Error: cannot edit a.txt: it changed on disk since it was read "
        "(its size went from 4 to 8 bytes); read it again first"
    )
    read_first(tools, "b.txt", "one\n")
    invocation = tools.prepare("edit", file_path="b.txt", old_string="one", new_string="1")
    changed_on_disk(tools.root / "b.txt", "one\ntwo\n")
    with pytest.raises(ToolError, match="changed on disk since it was read"):
        complete(invocation)
    assert (tools.root / "b.txt").read_text() == "one\ntwo\n"
    assert leftovers(tools.root) == []


def test_edit_keeps_the_mode(tools: Tools) -> None:
    path = read_first(tools, "tool.sh", "echo a\n")
    path.chmod(0o700)
    tools.run("read", file_path="tool.sh")  # chmod changes no fingerprint field; read anyway
    tools.run("edit", file_path="tool.sh", old_string="a", new_string="b")
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_edit_in_a_crlf_file(tools: Tools) -> None:
    path = tools.root / "dos.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    tools.run("read", file_path="dos.txt")  # shows the lines without CR
    tools.run("edit", file_path="dos.txt", old_string="one\ntwo", new_string="1\n2")
    assert path.read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_keeps_bytes_that_are_not_utf8(tools: Tools) -> None:
    path = tools.root / "mixed.txt"
    path.write_bytes(b"ok\n" * 3000 + b"caf\xe9 = 1\nx = 1\n")
    tools.run("read", file_path="mixed.txt")
    tools.run("edit", file_path="mixed.txt", old_string="x = 1", new_string="x = 2")
    assert path.read_bytes() == b"ok\n" * 3000 + b"caf\xe9 = 1\nx = 2\n"


def test_edit_refuses_a_file_over_the_limit(tools: Tools) -> None:
    path = tools.root / "big.txt"
    path.write_text("x\n" * (MAX_EDIT_BYTES // 2) + "y")
    tools.run("read", file_path="big.txt")
    assert tools.error("edit", file_path="big.txt", old_string="x", new_string="y") == (
        "Error: cannot edit big.txt: it is 16.1 MiB, over the 16 MiB edit limit"
    )


def test_the_diff_of_an_edit_deep_in_a_long_file_has_true_line_numbers(tools: Tools) -> None:
    text = "".join(f"line {n}\n" for n in range(1, 20_001))
    read_first(tools, "long.txt", text)
    invocation = tools.prepare(
        "edit", file_path="long.txt", old_string="line 15000\n", new_string="changed\n"
    )
    new = text.replace("line 15000\n", "changed\n")
    expected = difflib.unified_diff(
        text.splitlines(keepends=True), new.splitlines(keepends=True), "a/long.txt", "b/long.txt"
    )
    assert invocation.preview == "".join(expected).rstrip("\n").replace("long.txt\n", "long.txt\n")
    assert "@@ -14997,7 +14997,7 @@" in invocation.preview


def test_a_long_diff_is_whole(tools: Tools) -> None:
    """The question shows what fits and says how much it leaves out (dsh_stdio.terminal.approve)."""
    content = "".join(f"row {n}\n" for n in range(1000))
    preview = tools.prepare("write", file_path="rows.txt", content=content).preview
    shown = preview.split("\n")
    assert len(shown) == 1003
    assert shown[-1] == "+row 999"


def test_a_huge_rewrite_is_summarised_not_diffed(tools: Tools) -> None:
    old = "".join(f"a{n}\n" for n in range(6000))
    read_first(tools, "big.txt", old)
    new = "".join(f"b{n}\n" for n in range(7000))
    assert tools.prepare("write", file_path="big.txt", content=new).preview == (
        "(no line-by-line diff: 6,000 lines replaced by 7,000 lines, from line 1; "
        "the new content has 7,000 lines)"
    )
