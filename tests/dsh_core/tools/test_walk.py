"""The walk under ``glob`` and ``grep``: glob patterns, what .gitignore leaves out, symlinks."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec

from dsh_core.tools.tree import walk
from dsh_core.tools.tree.globs import glob_regex, glob_test
from dsh_core.tools.tree.walk import IgnoreRules, Walk
from tests.dsh_core.tools.test_builtin import Tools, tools
from tests.dsh_core.tools.test_read import as_nobody
from tests.dsh_core.tools.test_search import make

__all__ = ["tools"]


def test_glob_regex() -> None:
    cases = {
        "*.py": (["a.py", ".hidden.py"], ["d/a.py", "a.pyc"]),
        "*": (["a", ".x"], ["d/a"]),
        "**/*": (["a", "d/e/a"], []),
        "**/*.py": (["a.py", "d/a.py", "d/e/a.py"], ["a.pyc"]),
        "**": (["a", "d/e/f"], []),
        "d/**": (["d/a", "d/e/f"], ["d", "x/a"]),
        "a/**/b": (["a/b", "a/x/b", "a/x/y/b"], ["a/xb", "ab"]),
        "a**b": (["ab", "axxb"], ["a/b"]),
        "*.{js,ts}": (["x.js", "x.ts"], ["x.rs", "x.{js,ts}"]),
        "{src/**/,}*.md": (["a.md", "src/a.md", "src/d/a.md"], ["doc/a.md"]),
        "[a-c]?": (["a1", "cz"], ["d1", "a/"]),
        "[!a]": (["b"], ["a", "/"]),
        "[]]": (["]"], ["a"]),
        "\\*": (["*"], ["a"]),
        "{a}": (["{a}"], ["a"]),  # no comma: a literal, as in bash
        "a[": (["a["], ["a"]),
        "(x).py": (["(x).py"], ["x.py"]),
    }
    for pattern, (matching, other) in cases.items():
        regex, test = glob_regex(pattern), glob_test(pattern)  # a suffix test for "*.py"
        for path in matching:
            assert regex.fullmatch(path) and test(path), (pattern, path)
        for path in other:
            assert not regex.fullmatch(path) and not test(path), (pattern, path)


def test_dot_git_and_gitignored_files_are_skipped(tools: Tools) -> None:
    make(
        tools.root,
        {
            ".gitignore": "build/\n*.log\n!keep.log\n/top.txt\n",
            ".git/config": "TODO",
            "build/out.py": "TODO",
            "src/build/gen.py": "TODO",
            "app.log": "TODO",
            "keep.log": "TODO",
            "top.txt": "TODO",
            "src/top.txt": "TODO",
            "src/app.py": "TODO",
        },
    )
    files = sorted(tools.run("glob", pattern="**/*").split("\n"))
    assert files == [".gitignore", "keep.log", "src/app.py", "src/top.txt"]
    matches = sorted(tools.run("grep", pattern="TODO").split("\n"))
    assert matches == ["keep.log:1:TODO", "src/app.py:1:TODO", "src/top.txt:1:TODO"]


def test_a_nested_gitignore_rules_its_subtree(tools: Tools) -> None:
    make(
        tools.root,
        {
            ".gitignore": "*.gen\n",
            "a/.gitignore": "!keep.gen\nlocal/\n",
            "a/keep.gen": "",
            "a/drop.gen": "",
            "a/local/x": "",
            "b/keep.gen": "",
            "b/local/x": "",
        },
    )
    files = sorted(tools.run("glob", pattern="**/*").split("\n"))
    assert files == [".gitignore", "a/.gitignore", "a/keep.gen", "b/local/x"]


def test_rules_above_the_search_directory_apply(tools: Tools) -> None:
    make(
        tools.root,
        {".gitignore": "*.tmp\n", "sub/a.tmp": "x", "sub/b.txt": "x", ".git/info/exclude": "b*\n"},
    )
    assert tools.run("glob", pattern="*", path="sub") == "no files match * in sub " + (
        "(* stays in one directory: **/* matches at any depth)"
    )
    os.unlink(tools.root / ".git" / "info" / "exclude")
    assert tools.run("glob", pattern="*", path="sub") == "sub/b.txt"


def test_the_repository_top_above_the_working_directory_counts(tmp_path: Path) -> None:
    make(tmp_path, {"repo/.gitignore": "*.o\n", "repo/src/a.o": "", "repo/src/a.c": ""})
    (tmp_path / "repo" / ".git").mkdir()
    tools = Tools(tmp_path / "repo" / "src")
    assert tools.run("glob", pattern="*") == "a.c"


def test_an_ignored_directory_asked_for_by_name_is_searched(tools: Tools) -> None:
    make(tools.root, {".gitignore": "vendor/\n", "vendor/lib.py": "TODO", "app.py": "TODO"})
    assert tools.run("grep", pattern="TODO") == "app.py:1:TODO"
    assert tools.run("grep", pattern="TODO", path="vendor") == "vendor/lib.py:1:TODO"
    assert tools.run("glob", pattern="vendor/*.py") == "vendor/lib.py"


def test_a_gitignore_that_is_a_symlink_or_a_fifo_is_not_read(tools: Tools) -> None:
    make(tools.root, {"rules": "*.py\n", "a.py": "", "sub/b.py": ""})
    (tools.root / ".gitignore").symlink_to("rules")
    os.mkfifo(tools.root / "sub" / ".gitignore")
    files = sorted(tools.run("glob", pattern="**/*.py").split("\n"))
    assert files == ["a.py", "sub/b.py"]


def test_directory_symlinks_are_not_followed(tools: Tools, tmp_path: Path) -> None:
    make(tools.root, {"src/a.py": "TODO"})
    make(tmp_path, {"outside/secret.py": "TODO"})
    (tools.root / "loop").symlink_to(tools.root)
    (tools.root / "out").symlink_to(tmp_path / "outside")
    assert tools.run("glob", pattern="**/*.py") == "src/a.py"
    assert tools.run("grep", pattern="TODO") == (
        "src/a.py:1:TODO\n[skipped: 1 symlink leading outside]"
    )


def test_file_symlinks_outside_are_listed_but_never_read(tools: Tools, tmp_path: Path) -> None:
    make(tmp_path, {"secret.txt": "password=hunter2"})
    make(tools.root, {"real.txt": "password=inside"})
    (tools.root / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (tools.root / "alias.txt").symlink_to("real.txt")
    assert sorted(tools.run("glob", pattern="*.txt").split("\n")) == [
        "alias.txt",
        "leak.txt",
        "real.txt",
    ]
    assert tools.run("grep", pattern="password") == (
        "alias.txt:1:password=inside\nreal.txt:1:password=inside\n"
        "[skipped: 1 symlink leading outside]"
    )


def test_an_approved_outside_search_follows_links_within_it(tools: Tools, tmp_path: Path) -> None:
    make(tmp_path, {"other/a.txt": "hit", "elsewhere/b.txt": "hit"})
    (tmp_path / "other" / "link.txt").symlink_to(tmp_path / "other" / "a.txt")
    (tmp_path / "other" / "far.txt").symlink_to(tmp_path / "elsewhere" / "b.txt")
    assert tools.run("grep", pattern="hit", path="../other") == (
        "../other/a.txt:1:hit\n../other/link.txt:1:hit\n[skipped: 1 symlink leading outside]"
    )


def test_what_cannot_be_read_is_named(tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="dsh-perm-"))  # a directory nobody can enter
    try:
        work.chmod(0o755)
        make(work, {"a.txt": "hit", "closed/b.txt": "hit", "locked.txt": "hit"})
        (work / "closed").chmod(0)
        (work / "locked.txt").chmod(0)

        def attempt() -> str:
            return Tools(work).run("grep", pattern="hit")

        result = as_nobody(attempt) if os.geteuid() == 0 else attempt()
        assert result == "a.txt:1:hit\n[skipped: 2 unreadable: locked.txt, closed/]"
    finally:
        (work / "closed").chmod(0o755)
        shutil.rmtree(work)


def test_a_stopped_walk_ends(tools: Tools) -> None:
    make(tools.root, {f"d{n}/f.txt": "" for n in range(20)})
    stop = threading.Event()
    walk = Walk(stop, (str(tools.root),))
    seen = []
    for relative, _ in walk.files(str(tools.root), (), None):
        seen.append(relative)
        stop.set()
    assert len(seen) == 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="ab*?/![]!\n", min_size=1, max_size=6), min_size=1, max_size=4),
    st.lists(st.text(alphabet="ab./\n", min_size=1, max_size=6), min_size=1, max_size=8),
)
def test_one_search_per_directory_decides_as_pathspec_does(
    lines: list[str], names: list[str]
) -> None:
    """What the walk ignores, asking RE2 once for a directory's names, is what pathspec says
    name by name."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            spec = GitIgnoreSpec.from_lines(lines, backend="re2")
    except ValueError:  # a line git would not take either: the walk ignores that file
        return
    if not spec.patterns or all(p.regex is None for p in spec.patterns):
        return
    rules = (IgnoreRules.of("/top", spec),)
    expected = {n for n, name in enumerate(names) if spec.check_file(f"sub/{name}").include}
    assert walk._ignored_in(rules, "/top/sub", names) == expected


def test_a_gitignore_line_re_warns_about_is_read_quietly(tools: Tools) -> None:
    # pathspec compiles "[[]" with re, which warns (FutureWarning) about a future Python:
    # printed raw on dsh's stderr, or an error under pytest, unless the walk hushes it.
    make(tools.root, {".gitignore": "[[]\nx.log\n", "a.txt": "hit", "x.log": "hit"})
    assert tools.run("grep", pattern="hit") == "a.txt:1:hit"
