"""Paths the file tools are given: resolved, confined, shown; and the argument checks."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dsh_core.tools import Access, ToolError
from dsh_core.tools.paths import (
    bool_argument,
    display_path,
    int_argument,
    is_within,
    list_name,
    real_path,
    resolve,
    string_argument,
)
from dsh_core.trust.workspace import Workspace
from tests.dsh_core.tools.test_builtin import Tools, tools

__all__ = ["tools"]  # the fixture, shared


def test_a_relative_path_inside(tools: Tools) -> None:
    (tools.root / "src").mkdir()
    target = resolve(tools.workspace, "src/app.py")
    assert target.real == str(tools.root / "src" / "app.py")
    assert (target.inside, target.outside, target.shown) == (True, (), "src/app.py")
    assert tools.prepare("read", file_path="src/app.py").access == Access("read")


def test_an_absolute_path_inside_is_shown_relative(tools: Tools) -> None:
    absolute = str(tools.root / "src" / "app.py")
    target = resolve(tools.workspace, absolute)
    assert (target.inside, target.shown) == (True, "src/app.py")
    assert tools.describe("read", file_path=absolute) == "src/app.py"
    assert tools.prepare("read", file_path=absolute).summary == "src/app.py"


def test_dot_dot_escapes_are_outside(tools: Tools) -> None:
    invocation = tools.prepare("read", file_path="../../etc/passwd")
    real = os.path.realpath(tools.root / "../../etc/passwd")
    assert invocation.access == Access("read", outside=(real,))
    assert tools.describe("read", file_path="../../etc/passwd") == "../../etc/passwd"
    assert invocation.summary == f"{real} (outside the working directory)"
    escaped = tools.prepare("write", file_path="../escape.txt", content="x")
    assert escaped.access == Access("write", outside=(str(tools.root.parent / "escape.txt"),))


def test_an_absolute_path_outside(tools: Tools) -> None:
    invocation = tools.prepare("read", file_path="/etc/passwd")
    assert invocation.access.outside == (os.path.realpath("/etc/passwd"),)
    assert tools.describe("read", file_path="/etc/passwd") == "/etc/passwd"


def test_a_symlink_inside_that_points_out_is_outside(tools: Tools, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s\n")
    (tools.root / "link.txt").symlink_to(secret)
    (tools.root / "dir").symlink_to(tmp_path)
    invocation = tools.prepare("read", file_path="link.txt")
    assert invocation.access == Access("read", outside=(str(secret),))
    assert invocation.summary == f"link.txt -> {secret} (outside the working directory)"
    assert tools.describe("read", file_path="link.txt") == "link.txt"
    tools.run("read", file_path="dir/secret.txt")  # approving is the loop's job, not theirs
    through = tools.prepare("edit", file_path="dir/secret.txt", old_string="s", new_string="t")
    assert through.access.outside == (str(secret),)
    assert tools.prepare("grep", pattern="s", path="dir").access.outside == (str(tmp_path),)
    assert tools.prepare("glob", pattern="dir/*.txt").access.outside == (str(tmp_path),)


def test_a_symlink_that_stays_inside_is_inside(tools: Tools) -> None:
    (tools.root / "real.txt").write_text("r\n")
    (tools.root / "alias.txt").symlink_to("real.txt")
    invocation = tools.prepare("read", file_path="alias.txt")
    assert invocation.access == Access("read")
    assert tools.run("read", file_path="alias.txt") == "     1\tr"


def test_the_working_directory_reached_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")
    tools = Tools(tmp_path / "via")
    assert tools.workspace.root == tmp_path / "real"
    assert tools.prepare("read", file_path=str(tmp_path / "real" / "a")).access == Access("read")


def test_home_is_expanded(tools: Tools) -> None:
    home = os.path.expanduser("~")
    target = resolve(tools.workspace, "~/notes.txt")
    assert target.real == os.path.realpath(os.path.join(home, "notes.txt"))
    assert target.shown == "~/notes.txt"
    assert resolve(tools.workspace, "~user/x").real == str(tools.root / "~user" / "x")


def test_names_with_a_newline_or_an_escape_sequence(tools: Tools) -> None:
    for name in ("new\nline.txt", "\x1b[31mred\x1b[0m.txt", "tab\there.txt"):
        (tools.root / name).write_text("text\n")
        assert tools.describe("read", file_path=name) == name  # the front door neutralises
        assert tools.prepare("read", file_path=name).access == Access("read")
        assert tools.run("read", file_path=name) == "     1\ttext"
        assert tools.run("edit", file_path=name, old_string="text", new_string="more") == (
            f"replaced 1 occurrence in {name} (line 1)"
        )
        assert (tools.root / name).read_text() == "more\n"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Error: invalid arguments: file_path is required"),
        ({"file_path": None}, "Error: invalid arguments: file_path is required"),
        ({"file_path": ""}, "Error: invalid arguments: file_path is empty"),
        ({"file_path": 7}, "Error: invalid arguments: file_path must be a string, not a number"),
        (
            {"file_path": ["a"]},
            "Error: invalid arguments: file_path must be a string, not an array",
        ),
        ({"file_path": "a\x00b"}, "Error: invalid arguments: file_path contains a NUL character"),
    ],
)
def test_bad_path_arguments(tools: Tools, arguments: dict[str, object], message: str) -> None:
    for name in ("read", "write", "edit"):
        extra: dict[str, object] = {}
        if name == "write":
            extra = {"content": ""}
        elif name == "edit":
            extra = {"old_string": "a", "new_string": "b"}
        assert tools.error(name, **arguments, **extra) == message


def test_a_lone_surrogate_is_no_file_name(tools: Tools) -> None:
    message = tools.error("read", file_path="bad\ud800.txt")
    assert message.startswith("Error: invalid arguments: file_path is not a valid file name: ")
    # A byte that is not UTF-8 in a real name arrives as os.fsdecode's escape: that works.
    raw = os.fsdecode(b"latin\xe9.txt")
    (tools.root / raw).write_text("x\n")
    assert tools.run("read", file_path=raw) == "     1\tx"


def test_describe_needs_no_disk_and_falls_back_for_bad_arguments(tools: Tools) -> None:
    assert tools.describe("read", file_path="missing/file.txt", offset=30) == (
        "missing/file.txt from line 30"
    )
    assert tools.describe("read", file_path=3) == '{"file_path": 3}'
    assert tools.describe("edit", file_path="a", replace_all=True) == "a (every occurrence)"
    assert tools.describe("grep", pattern="def (\\w+)", path="src", glob="*.py") == (
        "/def (\\w+)/ in src (*.py)"
    )
    assert tools.describe("glob", pattern="**/*.py", path="src") == "**/*.py in src"


def test_is_within() -> None:
    assert is_within("/a/b", "/a/b") and is_within("/a/b/c", "/a/b")
    assert not is_within("/a/bc", "/a/b") and not is_within("/a", "/a/b")
    assert is_within("/anything", "/")  # a working directory at the root holds everything


def test_display_path_is_lexical() -> None:
    root = Path("/work/project")
    assert display_path(root, "/work/project/src/a.py") == "src/a.py"
    assert display_path(root, "/work/project") == "."
    assert display_path(root, "/work/other/a.py") == "/work/other/a.py"
    assert display_path(root, "./src/../a.py") == "./src/../a.py"  # as given


def test_list_name_quotes_only_what_would_break_a_line() -> None:
    assert list_name("src/app.py") == "src/app.py"
    assert list_name("dir with spaces/ü.txt") == "dir with spaces/ü.txt"
    assert list_name("a\nb.txt") == '"a\\nb.txt"'
    assert list_name("a\x1b[31m") == '"a\\u001b[31m"'
    assert list_name('q"\\\r') == '"q\\"\\\\\\r"'
    assert list_name(os.fsdecode(b"x\xff")) == '"x\\xff"'
    assert list_name("a\u2028b") == '"a\\u2028b"'


def test_argument_helpers() -> None:
    assert int_argument({"n": 3.0}, "n", 1, minimum=1) == 3
    assert int_argument({}, "n", 5, minimum=1) == 5
    assert int_argument({"n": None}, "n", 5, minimum=1) == 5
    for bad, message in [
        (True, "n must be an integer, not a boolean"),
        ("3", "n must be an integer, not a string"),
        (2.5, "n must be an integer, not a number"),
        (0, "n must be at least 1, not 0"),
    ]:
        with pytest.raises(ToolError) as caught:
            int_argument({"n": bad}, "n", 1, minimum=1)
        assert str(caught.value) == f"invalid arguments: {message}"
    assert bool_argument({"b": False}, "b", True) is False
    with pytest.raises(ToolError, match="b must be true or false, not 'yes'"):
        bool_argument({"b": "yes"}, "b", False)
    assert string_argument({"s": ""}, "s", required=False) is None  # "" means "not given"
    assert string_argument({"s": ""}, "s", empty=True) == ""


# The trust policy (SPEC 10.2-10.4), as the file tools apply it: in-process; the attacks on the
# real process are in tests/security/.


def test_real_path_resolves_as_realpath_does(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "up").symlink_to("..")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("dir/up/dir")
    for path in ("dir/up/dir/x", "loop/x", "a/../a/x", "missing/../dir", "a", "/proc/self/cwd/.."):
        full = os.path.join(tmp_path, path)
        assert real_path(full)[0] == os.path.realpath(full), path


def test_every_spelling_of_dsh_s_own_process_is_refused(tools: Tools) -> None:
    pid = os.getpid()
    (tools.root / "env").symlink_to("/proc/self/environ")
    (tools.root / "fd").symlink_to("/dev/fd")
    spellings = [
        "/proc/self/environ",
        "/proc/thread-self/environ",
        f"/proc/{pid}/environ",
        f"/proc/{pid}/task/{pid}/environ",
        f"/proc/{threading.get_native_id()}/environ",  # a thread's id names the process too
        "/dev/fd/0",
        "/dev/stdin",
        "/proc/self/cwd/../../etc/passwd",  # leaves /proc, but went through it
        "env",
        "fd/../environ",
    ]
    for path in spellings:
        for tool, extra in (("read", {}), ("write", {"content": "x"}), ("grep", {})):
            arguments = {"path": path, "pattern": "x"} if tool == "grep" else {"file_path": path}
            message = tools.error(tool, **arguments, **extra)
            assert "dsh's own process files" in message, (tool, path, message)
    assert tools.prepare("read", file_path="/proc/1/status").access.outside  # another's: asked


def test_credentials_are_guarded_wherever_they_lead(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key\n")
    (home / "keys").mkdir()
    (home / ".aws").symlink_to(home / "keys")  # a location that is a symlink: both count
    dsh_home = tmp_path / "dsh"
    workspace = Workspace.at(home, tmp_path / "dsh" / "sessions" / "s" / "tool-output")
    workspace = Workspace(workspace.root, workspace.output_dir, dsh_home=dsh_home, home=home)
    (home / "alias").symlink_to(".ssh/id_ed25519")
    key = resolve(workspace, "alias")
    assert (key.inside, key.credentials, key.leads) == (True, "~/.ssh", ".ssh/id_ed25519")
    assert key.guarded(writing=False) == ("alias -> .ssh/id_ed25519 (credentials: ~/.ssh)",)
    assert resolve(workspace, "keys/x").credentials == "~/.aws"
    assert resolve(workspace, str(dsh_home / "config.toml")).credentials == str(dsh_home)
    # The command output a result names is in DSH_HOME, and readable.
    assert resolve(workspace, str(workspace.output_dir / "bash-1.txt")).credentials is None
    assert resolve(workspace, "/proc/1/environ").credentials == "a process's environment"
    assert resolve(workspace, "notes.txt").guarded(writing=True) == ()
    assert workspace.credentials.within(str(home)) == {
        ".ssh": "~/.ssh",
        ".aws": "~/.aws",
        "keys": "~/.aws",
        **{name: f"~/{name}" for name in (".gnupg", ".azure", ".kube", ".docker", ".netrc")},
        **{name: f"~/{name}" for name in (".git-credentials", ".npmrc", ".pypirc", ".pgpass")},
        **{name: f"~/{name}" for name in (".bash_history", ".zsh_history", ".histfile")},
        **{name: f"~/{name}" for name in (".python_history", ".node_repl_history")},
        **{name: f"~/{name}" for name in (".psql_history", ".mysql_history", ".sqlite_history")},
        **{name: f"~/{name}" for name in (".sh_history", ".history", ".irb_history")},
        **{name: f"~/{name}" for name in (".ipython", ".lesshst", ".viminfo")},
    }


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (".git/config", ".git/config"),
        (".git/hooks/pre-commit", ".git/hooks/"),
        ("vendor/lib/.git/hooks/post-checkout", ".git/hooks/"),
        (".git/modules/lib/config", ".git/config"),  # a submodule's repository
        (".git/modules/lib/hooks/pre-push", ".git/hooks/"),
        (".dsh/config.toml", ".dsh/"),
        ("docs/.agents/skills/x/SKILL.md", ".agents/"),
        (".git/HEAD", ".git/"),  # anything in a git directory
        (".git", ".git"),  # a .git file: a pointer to a planted git directory
        ("src/.git", ".git"),
        ("docs/AGENTS.md", "AGENTS.md"),
        ("config", None),
        ("hooks/pre-commit", None),
        (".github/workflows/ci.yml", None),
    ],
)
def test_protected_paths(tools: Tools, path: str, reason: str | None) -> None:
    target = resolve(tools.workspace, path)
    assert target.protected == reason
    assert target.guarded(writing=False) == ()  # reading them is not guarded
    expected = () if reason is None else (f"{path} (protected: {reason})",)
    assert target.guarded(writing=True) == expected


def test_a_symlink_is_judged_and_shown_by_where_it_leads(tools: Tools) -> None:
    (tools.root / ".git").mkdir()
    (tools.root / ".git" / "config").write_text("[core]\n")
    (tools.root / "notes.md").symlink_to(".git/config")
    tools.run("read", file_path="notes.md")
    invocation = tools.prepare("write", file_path="notes.md", content="x")
    shown = "notes.md -> .git/config (protected: .git/config)"
    assert invocation.access == Access("write", protected=(shown,))
    assert invocation.summary == shown
    assert not invocation.access.may_remember
