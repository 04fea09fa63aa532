"""Reading git's configuration: the entries as git itself lists them, what runs code, and the
paths a configuration names."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.trust.gitconfig import NamedPath, read_config

SAMPLES = [
    '[core]\n\tfsmonitor = "echo hi; false"\n\tpager = less -R # a comment\n',
    "[core] hooksPath = .githooks\n[alias]\n\tst = !sh ./x.sh\n\tco = checkout\n",
    '[includeIf "gitdir:~/a.b/"]\n\tpath = x.cfg\n[include]\n\tpath = ../inc.cfg\n',
    '[branch.Main]\n\tremote = o\n[Remote "Up"]\n\tURL = a \\\n  b\n\tpushurl = "x;y" ; c\n',
    '[filter "lfs"]\n\tclean = git-lfs clean -- %f\n\trequired\n; a comment\n# another\n',
    '[diff "x"]\n\ttextconv = tools/conv\\\\x\n\tcommand = "a \\"b\\" \\t c"\n',
    # hypothesis found it: the space before a continuation is kept, the end of the file ends it
    "[core]\n\ta = = \\\n[core]\n\tb = x \\\n  c\n[core]\n\td = y \\",
    "[user]\n\tname = Someone\n\n\t\temail=a@b.c   \n[pager]\n\tlog = false\n",
]


def git_lists(path: Path) -> list[tuple[str, str]]:
    """What ``git config --list`` makes of ``path`` (the oracle)."""
    done = subprocess.run(
        ["git", "config", "--file", str(path), "--list", "--null", "--no-includes"],
        capture_output=True,
        check=True,
    )
    entries = []
    for item in done.stdout.decode().split("\0"):
        if item:
            key, _, value = item.partition("\n")
            entries.append((key, value if "\n" in item else "true"))
    return entries


def ours(path: Path) -> list[tuple[str, str]]:
    return [(e.key, e.value) for e in read_config(path).entries if e.file == path]


@pytest.mark.parametrize("text", SAMPLES)
def test_entries_are_what_git_lists(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    assert ours(path) == git_lists(path)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["core", "alias", 'filter "x y"', "Include", "branch.Main"]),
            st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,8}", fullmatch=True),
            st.text(st.sampled_from('ab ;#"\\/.!-='), max_size=12),
        ),
        max_size=6,
    )
)
def test_any_file_git_accepts_is_read_as_git_reads_it(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[str, str, str]]
) -> None:
    path = tmp_path_factory.mktemp("config") / "config"
    path.write_text("".join(f"[{s}]\n\t{name} = {value}\n" for s, name, value in lines))
    try:
        expected = git_lists(path)
    except subprocess.CalledProcessError:
        return  # git refuses the file (an unbalanced quote): nothing to compare
    assert ours(path) == expected


def test_what_runs_code(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(
        "[core]\n\tfsmonitor = true\n\tpager = less\n\teditor = vim\n[pager]\n\tlog = false\n"
        "\tdiff = delta\n[alias]\n\tco = checkout\n\tx = !rm -rf /\n[user]\n\tname = a\n"
        '[filter "lfs"]\n\tprocess = git-lfs filter-process\n[remote "o"]\n\turl = x\n'
        "[include]\n\tpath = other\n"
    )
    assert read_config(path).runs_code() == [
        "core.pager",
        "core.editor",
        "pager.diff",
        "alias.x",
        "filter.lfs.process",
        "include.path",
    ]


def test_the_paths_a_configuration_names(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    path = top / ".git" / "config"
    path.write_text(
        "[core]\n\thooksPath = .husky/_\n\tfsmonitor = ./tools/watch.sh --flag\n"
        "\tsshCommand = ssh -i ~/.ssh/key -F=/etc/ssh/x\n[alias]\n\tt = !sh tools/t.sh\n"
        "\tu = log\n[include]\n\tpath = ../shared.inc\n[core]\n\tpager = less\n"
    )
    (top / "shared.inc").write_text("[alias]\n\tv = !scripts/v\n")
    home = tmp_path / "home"
    named = read_config(path, home=home).named_paths(top, home)
    shown = [
        (str(n.path.relative_to(tmp_path)), n.directory)
        for n in named
        if n.path.is_relative_to(tmp_path)
    ]
    assert shown == [
        ("repo/.husky/_", True),
        ("repo/tools/watch.sh", False),
        ("home/.ssh/key", False),
        ("repo/tools/t.sh", False),
        ("repo/shared.inc", False),
        ("repo/scripts/v", False),  # from the included file, relative to the repository
    ]
    assert Path("/etc/ssh/x") in [n.path for n in named]
    assert named[0] == NamedPath(top / ".husky/_", f"core.hookspath in {path}", True)


def test_includes_are_followed_to_git_s_depth_and_no_further(tmp_path: Path) -> None:
    (tmp_path / "config").write_text("[include]\n\tpath = config\n[core]\n\tpager = x\n")
    config = read_config(tmp_path / "config")  # includes itself: read once
    assert config.runs_code() == ["include.path", "core.pager"]
    assert config.included == (tmp_path / "config",)
    missing = read_config(tmp_path / "nowhere")
    assert (missing.entries, missing.included) == ((), ())
