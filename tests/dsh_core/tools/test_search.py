"""The ``glob`` and ``grep`` tools: matching, limits, order, and what the walk leaves out."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import threading
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.tools import Access, ToolError, search
from dsh_core.tools.linear import linear_regex
from dsh_core.tools.literals import required_literals
from dsh_core.tools.specs import MAX_GLOB_PATHS, MAX_GREP_MATCHES
from dsh_core.tools.stoppable import in_daemon_thread
from tests.dsh_core.tools.test_builtin import Tools, tools

__all__ = ["tools"]


def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def aged(root: Path, names: list[str]) -> None:
    """Give the files mtimes in the order named: the first is the newest."""
    for age, name in enumerate(names):
        os.utime(root / name, (1_700_000_000 - age * 100, 1_700_000_000 - age * 100))


# --- glob -----------------------------------------------------------------------------------


def test_glob_star_stays_in_a_level_and_double_star_goes_down(tools: Tools) -> None:
    make(tools.root, {"a.py": "", "b.txt": "", "src/c.py": "", "src/deep/d.py": ""})
    aged(tools.root, ["a.py", "src/c.py", "src/deep/d.py", "b.txt"])
    assert tools.run("glob", pattern="*.py") == "a.py"
    assert tools.run("glob", pattern="**/*.py") == "a.py\nsrc/c.py\nsrc/deep/d.py"
    assert tools.run("glob", pattern="src/**/*.py") == "src/c.py\nsrc/deep/d.py"
    assert tools.run("glob", pattern="src/*/*.py") == "src/deep/d.py"
    assert tools.run("glob", pattern="**/*.py", path="src") == "src/c.py\nsrc/deep/d.py"
    assert tools.run("glob", pattern="*.{py,txt}") == "a.py\nb.txt"
    assert tools.run("glob", pattern="[ab].*") == "a.py\nb.txt"
    assert tools.run("glob", pattern="[!a].*") == "b.txt"
    assert tools.run("glob", pattern="?.py") == "a.py"
    assert tools.run("glob", pattern="src/deep/d.py") == "src/deep/d.py"
    assert tools.run("glob", pattern="./src/*.py") == "src/c.py"


def test_glob_says_when_nothing_matches(tools: Tools) -> None:
    make(tools.root, {"src/c.py": ""})
    assert tools.run("glob", pattern="*.py") == (
        "no files match *.py in . (* stays in one directory: **/*.py matches at any depth)"
    )
    assert tools.run("glob", pattern="src/*.rs") == "no files match src/*.rs in src"


def test_glob_newest_first_at_most_100(tools: Tools) -> None:
    names = [f"f{n:03}.txt" for n in range(150)]
    make(tools.root, dict.fromkeys(names, ""))
    aged(tools.root, names)
    shown = tools.run("glob", pattern="*.txt").split("\n")
    assert shown[:MAX_GLOB_PATHS] == names[:MAX_GLOB_PATHS]
    assert shown[MAX_GLOB_PATHS:] == [
        "[100 of 150 matching files shown, newest first; narrow the pattern or path for the rest]"
    ]


def test_glob_breaks_ties_by_name(tools: Tools) -> None:
    make(tools.root, {"b": "", "a": "", "c": ""})
    for name in "abc":
        os.utime(tools.root / name, (1_700_000_000, 1_700_000_000))
    assert tools.run("glob", pattern="*") == "a\nb\nc"


def test_glob_lists_files_not_directories_or_special_files(tools: Tools) -> None:
    make(tools.root, {"dir/inner.txt": ""})
    os.mkfifo(tools.root / "pipe")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tools.root / "sock"))
        assert tools.run("glob", pattern="*") == "no files match * in . " + (
            "(* stays in one directory: **/* matches at any depth)"
        )
        assert tools.run("glob", pattern="**") == "dir/inner.txt"


def test_glob_outside_and_with_an_absolute_pattern(tools: Tools, tmp_path: Path) -> None:
    make(tmp_path, {"other/x.py": ""})
    invocation = tools.prepare("glob", pattern="*.py", path="../other")
    assert invocation.access == Access("read", outside=(str(tmp_path / "other"),))
    assert invocation.summary == (
        f"*.py in ../other (outside the working directory: {tmp_path / 'other'})"
    )
    assert tools.run("glob", pattern="*.py", path="../other") == "../other/x.py"
    absolute = tools.prepare("glob", pattern=f"{tmp_path}/other/*.py")
    assert absolute.access.outside == (str(tmp_path / "other"),)
    assert tools.run("glob", pattern=f"{tmp_path}/other/*.py") == f"{tmp_path}/other/x.py"
    make(tools.root, {"in.py": ""})
    inside = tools.prepare("glob", pattern=f"{tools.root}/*.py")
    assert inside.access == Access("read")
    assert tools.run("glob", pattern=f"{tools.root}/*.py") == "in.py"


def test_glob_argument_errors(tools: Tools) -> None:
    make(tools.root, {"file.txt": ""})
    assert tools.error("glob", pattern="") == "Error: invalid arguments: pattern is empty"
    assert tools.error("glob", pattern="src/") == (
        "Error: invalid arguments: pattern 'src/' names no files; add a file pattern, e.g. src/**/*"
    )
    assert tools.error("glob", pattern="*", path="file.txt") == (
        "Error: cannot glob in file.txt: it is not a directory"
    )
    assert tools.error("glob", pattern="*", path="missing") == (
        f"Error: cannot glob in missing: [Errno 2] No such file or directory: "
        f"'{tools.root / 'missing'}'"
    )


def test_glob_quotes_names_that_would_break_the_list(tools: Tools) -> None:
    make(tools.root, {"new\nline.py": "", "plain.py": "", "\x1b[31mred.py": ""})
    aged(tools.root, ["new\nline.py", "plain.py", "\x1b[31mred.py"])
    assert tools.run("glob", pattern="*.py") == '"new\\nline.py"\nplain.py\n"\\u001b[31mred.py"'


# --- what the walk leaves out ---------------------------------------------------------------


def test_an_ignored_file_asked_for_by_name_is_searched(tools: Tools) -> None:
    make(tools.root, {".gitignore": "*.log\n", "app.log": "error here"})
    assert tools.run("grep", pattern="error", path="app.log") == "app.log:1:error here"


def test_special_files_in_the_tree_never_block(tools: Tools) -> None:
    make(tools.root, {"a.txt": "hit"})
    os.mkfifo(tools.root / "pipe")
    (tools.root / "to-pipe").symlink_to("pipe")
    assert tools.run("grep", pattern="hit") == "a.txt:1:hit"


def test_a_cancelled_search_is_cancelled(tools: Tools) -> None:
    make(tools.root, {f"d{n}/f{m}.txt": "x\n" * 100 for n in range(30) for m in range(30)})
    invocation = tools.prepare("grep", pattern="y")

    async def main() -> None:
        task = asyncio.ensure_future(invocation.run())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancelled_search_still_busy_does_not_hold_up_the_exit(
    tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A search that never gets back to checking for the cancel (a pathological regex), stood
    # in for by one that waits for an event set only after asyncio.run returned.
    make(tools.root, {"a.txt": "a\n"})
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def stuck(*args: object) -> bool:
        started.set()
        release.wait()
        finished.append(True)
        return False

    monkeypatch.setattr(search, "_search", stuck)
    invocation = tools.prepare("grep", pattern="a")

    async def main() -> None:
        task = asyncio.ensure_future(invocation.run())
        await asyncio.to_thread(started.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    # A bound for a broken test, not a measurement: asyncio.run joining the worker would wait
    # for this, then the assertion below fails.
    watchdog = threading.Timer(60, release.set)
    watchdog.start()
    try:
        asyncio.run(main())
        assert not release.is_set(), "asyncio.run waited for the search's thread"
    finally:
        release.set()
        watchdog.cancel()
    workers = [thread for thread in threading.enumerate() if thread.name == "dsh-search"]
    for worker in workers:
        worker.join()
    assert finished == [True]


def test_in_daemon_thread_passes_on_the_result_and_the_exception() -> None:
    def fail(message: str) -> str:
        raise ValueError(message)

    async def main() -> None:
        assert await in_daemon_thread(str.upper, "abc") == "ABC"
        with pytest.raises(ValueError, match=r"^no$"):
            await in_daemon_thread(fail, "no")

    asyncio.run(main())


# --- grep -----------------------------------------------------------------------------------


def test_grep_shows_path_line_text(tools: Tools) -> None:
    make(tools.root, {"src/a.py": "import os\n\ndef main():\n    os.exit(1)\n", "b.md": "os\n"})
    invocation = tools.prepare("grep", pattern=r"\bos\b")
    assert invocation.access == Access("read")
    assert invocation.summary == r"/\bos\b/ in ."
    assert tools.run("grep", pattern=r"\bos\b") == (
        "b.md:1:os\nsrc/a.py:1:import os\nsrc/a.py:4:    os.exit(1)"
    )
    assert tools.run("grep", pattern="^def", path="src") == "src/a.py:3:def main():"
    assert tools.run("grep", pattern=r"\)$") == "src/a.py:4:    os.exit(1)"
    assert tools.run("grep", pattern=r":$|\($") == "src/a.py:3:def main():"


def test_grep_in_one_file(tools: Tools) -> None:
    make(tools.root, {"a.txt": "one\ntwo\nthree\n"})
    assert tools.run("grep", pattern="t", path="a.txt") == "a.txt:2:two\na.txt:3:three"
    assert tools.run("grep", pattern="t", path="a.txt", glob="*.md") == (
        "no matches for /t/ in a.txt"
    )


def test_grep_glob_filters_names_or_paths(tools: Tools) -> None:
    make(tools.root, {"a.py": "x", "a.js": "x", "src/b.py": "x", "src/c/d.ts": "x"})
    assert tools.run("grep", pattern="x", glob="*.py") == "a.py:1:x\nsrc/b.py:1:x"
    assert tools.run("grep", pattern="x", glob="*.{js,ts}") == "a.js:1:x\nsrc/c/d.ts:1:x"
    assert tools.run("grep", pattern="x", glob="src/**/*.ts") == "src/c/d.ts:1:x"
    assert tools.run("grep", pattern="x", glob="") == tools.run("grep", pattern="x")


def test_grep_stops_at_250_matches(tools: Tools) -> None:
    make(tools.root, {"a.txt": "hit\n" * 200, "b.txt": "hit\n" * 200})
    shown = tools.run("grep", pattern="hit").split("\n")
    assert len(shown) == MAX_GREP_MATCHES + 1
    assert shown[199] == "a.txt:200:hit" and shown[249] == "b.txt:50:hit"
    assert shown[-1] == (
        "[stopped at 250 matches; there are more: narrow the pattern, path or glob]"
    )
    make(tools.root, {"b.txt": "hit\n" * 50})
    assert len(tools.run("grep", pattern="hit").split("\n")) == 250  # exactly: no marker


def test_grep_one_line_per_matching_line(tools: Tools) -> None:
    make(tools.root, {"a.txt": "aaa\nbab\n\nccc"})
    assert tools.run("grep", pattern="a") == "a.txt:1:aaa\na.txt:2:bab"
    # A pattern that matches the empty string matches every line, and no line after the last.
    assert tools.run("grep", pattern="x*") == "a.txt:1:aaa\na.txt:2:bab\na.txt:3:\na.txt:4:ccc"
    make(tools.root, {"a.txt": "one\n", "empty.txt": ""})
    assert tools.run("grep", pattern="^") == "a.txt:1:one"
    # A match that spans lines is shown at the line where it starts.
    make(tools.root, {"a.txt": "first\nsecond\n"})
    assert tools.run("grep", pattern=r"st\nsec") == "a.txt:1:first"


def test_grep_bad_patterns(tools: Tools) -> None:
    make(tools.root, {"a.txt": "[["})
    assert tools.run("grep", pattern="[[]") == "a.txt:1:[["  # no FutureWarning on stderr
    assert tools.error("grep", pattern="(unclosed") == (
        "Error: invalid arguments: pattern is not valid RE2 syntax: missing ): (unclosed"
    )
    assert tools.error("grep", pattern="") == "Error: invalid arguments: pattern is empty"
    assert tools.error("grep", pattern="x", path="missing") == (
        f"Error: cannot search missing: [Errno 2] No such file or directory: "
        f"'{tools.root / 'missing'}'"
    )


def test_grep_skips_binary_files_and_says_so(tools: Tools) -> None:
    (tools.root / "a.bin").write_bytes(b"hit\x00\x01")
    make(tools.root, {"b.txt": "hit"})
    assert tools.run("grep", pattern="hit") == "b.txt:1:hit\n[skipped: 1 binary file]"
    assert tools.run("grep", pattern="nothing") == (
        "no matches for /nothing/ in .\n[skipped: 1 binary file]"
    )


def test_grep_searches_text_that_is_not_utf8(tools: Tools) -> None:
    (tools.root / "latin.txt").write_bytes("café\nnaïve\n".encode("latin-1"))
    assert tools.run("grep", pattern="caf") == "latin.txt:1:caf\ufffd"
    # As in GNU grep, a byte that is not UTF-8 is no character: "." does not match it.
    assert tools.run("grep", pattern="na.ve") == "no matches for /na.ve/ in ."
    assert tools.run("grep", pattern="ve$") == "latin.txt:2:na\ufffdve"


def test_grep_cuts_long_lines_around_the_match(tools: Tools) -> None:
    make(tools.root, {"min.js": "a" * 5000 + "NEEDLE" + "b" * 5000 + "\n"})
    (shown,) = tools.run("grep", pattern="NEEDLE").split("\n")
    prefix, text = shown.split(":1:", 1)
    assert prefix == "min.js"
    assert text == "… " + "a" * 100 + "NEEDLE" + "b" * 294 + " … [line cut: 10,006 characters]"
    make(tools.root, {"min.js": "NEEDLE" + "b" * 5000})
    assert tools.run("grep", pattern="NEEDLE") == (
        "min.js:1:NEEDLE" + "b" * 394 + " … [line cut: 5,006 characters]"
    )


def test_grep_crlf_lines(tools: Tools) -> None:
    (tools.root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    assert tools.run("grep", pattern="two") == "dos.txt:2:two"


def test_grep_counts_lines_across_the_pieces_of_a_big_file(tools: Tools) -> None:
    lines = [f"line {n}" for n in range(1_500_000)]  # about 16 MB: two pieces and more
    lines[3] = "hit early"
    lines[1_200_000] = "hit late"
    lines[-1] = "hit last"
    (tools.root / "big.log").write_text("\n".join(lines))
    assert tools.run("grep", pattern="^hit") == (
        "big.log:4:hit early\nbig.log:1200001:hit late\nbig.log:1500000:hit last"
    )


def test_grep_case_insensitive_and_unicode(tools: Tools) -> None:
    make(tools.root, {"a.txt": "Straße\nSTRASSE\nstraße\n"})
    assert tools.run("grep", pattern="(?i)straße") == "a.txt:1:Straße\na.txt:3:straße"
    assert tools.run("grep", pattern=r"\w+ß") == "a.txt:1:Straße\na.txt:3:straße"


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet="ab.*+?|^$()[]{}\\,0123-", max_size=10),
    st.text(alphabet="ab\n.*()0123", max_size=40),
)
def test_required_literals_never_hide_a_match(pattern: str, text: str) -> None:
    """More of this in test_literals.py."""
    try:
        regex = linear_regex(pattern, "pattern", multiline=True)
    except ToolError:
        return
    literals = required_literals(pattern)
    if literals and regex.search(text.encode(), 0) is not None:
        assert any(literal in text.encode() for literal in literals), (pattern, text, literals)


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet="ab.*+?|^$()[]", max_size=8),
    st.text(alphabet="ab\n.*()", max_size=40),
)
def test_grep_finds_the_lines_python_re_finds(pattern: str, text: str) -> None:
    """RE2 and ``re`` agree on this small syntax (leftmost-first, ``(?m)``): the lines grep
    shows from its byte search are the lines where ``re`` finds a match starting."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            expected_regex = re.compile(pattern, re.MULTILINE)
        regex = linear_regex(pattern, "pattern", multiline=True)
    except (re.error, ToolError):
        return
    expected: list[int] = []
    position = 0
    while position <= len(text):
        match = expected_regex.search(text, position)
        if match is None or (match.start() == len(text) and text[-1:] in ("", "\n")):
            break
        line_start = text.rfind("\n", 0, match.start()) + 1
        expected.append(text.count("\n", 0, line_start) + 1)
        line_end = text.find("\n", match.start())
        position = len(text) + 1 if line_end < 0 else line_end + 1
    found = [number for number, _ in search._matching_lines(regex, text.encode(), 1)]
    assert found == expected, (pattern, text)


def test_grep_patterns_are_re2_and_a_refusal_says_why(tools: Tools) -> None:
    make(tools.root, {"a.txt": "abcabc\n"})
    assert tools.error("grep", pattern=r"(abc)\1") == (
        "Error: invalid arguments: pattern is not valid RE2 syntax: invalid escape sequence: "
        "\\1 (RE2 has no backreferences)"
    )
    assert tools.error("grep", pattern="a(?=b)") == (
        "Error: invalid arguments: pattern is not valid RE2 syntax: invalid perl operator: (?= "
        "(RE2 has no lookahead or lookbehind)"
    )
    assert tools.error("grep", pattern="x", glob="[z-a]") == (
        "Error: invalid arguments: glob is not valid RE2 syntax: invalid character class range: z-a"
    )
    assert tools.run("grep", pattern="(?P<name>abc){2}") == "a.txt:1:abcabc"
    assert tools.run("grep", pattern="(a+)+$") == "no matches for /(a+)+$/ in ."


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs GNU grep to compare with")
def test_grep_finds_what_grep_rn_finds(tools: Tools) -> None:
    words = ["alpha", "beta", "gamma", "delta", "TODO: fix", "x = 1", ""]
    files = {
        f"d{n % 4}/f{n}.txt": "\n".join(words[(n * k) % len(words)] for k in range(20)) + "\n"
        for n in range(10)
    }
    make(tools.root, files)
    for pattern in ["TODO", "^$", "a$", "[0-9]"]:
        ours = tools.run("grep", pattern=pattern).split("\n")
        theirs = subprocess.run(
            ["grep", "-rn", pattern, "."], cwd=tools.root, capture_output=True, text=True
        ).stdout.split("\n")
        assert sorted(ours) == sorted(line.removeprefix("./") for line in theirs if line)
