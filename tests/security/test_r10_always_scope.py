"""SPEC 10.10 (and SPEC 12's "always"): an "always" covers what the person saw, nothing more.

``[a]lways for "ls ..."`` lets later commands with the first word ``ls`` run without a
question. The attack review made that cover other programs: the first word was split as
Python splits (at NBSP, U+2003, ``\\x1c``...) while bash takes ``ls<NBSP>/../run.sh`` as one
word, a path to ``./run.sh`` through a directory named ``ls<NBSP>``; and ``[a]`` was offered
for programs whose arguments run code (``git -c core.pager=...``, ``sed 'e ...'``). Each test
is one such attack on the real ``bash`` tool and the real approval policy, in process (what
decides is the policy; the question's layout is ``test_approve.py``'s); the command that
should not run is watched for on disk.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from dsh_core.agent.approval import Answer, ApprovalPolicy, Question
from dsh_core.model.seam import ToolCall
from dsh_core.tools import Workspace
from dsh_core.tools.shell import BashTool
from tests.dsh_core.tools.test_shell import bash_run


class Person:
    """Answers ``always`` to the first question, and records every question asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, question: Question) -> Answer:
        self.asked.append(question.invocation.summary)
        return Answer("always" if len(self.asked) == 1 else "no")


def _decide(policy: ApprovalPolicy, tool: BashTool, command: str) -> str | None:
    call = ToolCall(f"c{command!r}", "bash", json.dumps({"command": command}))
    return asyncio.run(policy.decide(call, tool.prepare({"command": command})))


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A working directory where ``ls<sep>/../run.sh`` reaches an executable ``run.sh``."""
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'pwned'}\n")
    script.chmod(0o755)
    return tmp_path


SEPARATORS = ["\u00a0", "\u2003", "\u3000", "\x1c", "\x1d", "\x1e", "\x1f", "\x0b", "\x0c", "\x85"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=lambda c: f"U+{ord(c):04X}")
def test_always_for_ls_does_not_cover_a_path_that_bash_reads_as_one_word(
    planted: Path, sep: str
) -> None:
    (planted / f"ls{sep}").mkdir()
    person = Person()
    policy = ApprovalPolicy(asker=person)
    tool = BashTool(Workspace.at(planted, planted / ".out"))
    assert _decide(policy, tool, "ls -la") == "allowed-always"
    attack = f"ls{sep}/../run.sh"
    outcome = _decide(policy, tool, attack)
    assert outcome == "rejected", "an always for ls covered a path to ./run.sh"
    assert person.asked == ["$ ls -la", f"$ {attack}"]
    # What it would have done: bash runs ./run.sh (the control, run here on purpose).
    bash_run(tool, attack)
    assert (planted / "pwned").exists()


CODE_RUNNING = [
    "git -c core.pager='touch pwned' log",
    "git -c alias.x='!touch pwned' x",
    "git --config-env=core.pager=X log",
    "git -C ../elsewhere status",
    "git --git-dir=evil/.git status",
    "git config core.fsmonitor 'touch pwned'",
    "git submodule foreach 'touch pwned'",
    "git bisect run ./pwn.sh",
    "git rebase --exec 'touch pwned' HEAD~1",
    "git rebase -x 'touch pwned' HEAD~1",
    "git difftool --extcmd='touch pwned'",
    "git grep -O'touch pwned' x",
    "git grep --open-files-in-pager='touch pwned' x",
    "git fetch --upload-pack='touch pwned' origin",
    "git ls-remote --upload-pack='touch pwned' .",
    "git clone -u 'touch pwned' . x",
    "git push --receive-pack='touch pwned' origin",
    "git archive --remote=. --exec='touch pwned' HEAD",
    "git filter-branch --tree-filter 'touch pwned'",
    "git mergetool",
    'sed -n "1e touch pwned" f',
    "sed -i s/a/b/e f",
    "find . -exec touch pwned ;",
    "find . -delete",
    "awk 'BEGIN{system(\"touch pwned\")}'",
    "gawk 'BEGIN{system(\"touch pwned\")}'",
    "perl -e 'system q(touch pwned)'",
    'python3 -c \'open("pwned","w")\'',
    'python3.11 -c \'open("pwned","w")\'',
    "ruby -e 'system %q(touch pwned)'",
    'node -e \'require("fs").writeFileSync("pwned","")\'',
    "make -f pwn.mk",
    "make --eval='x: ; touch pwned' x",
    "npx cowsay",
    "uvx pwn",
    "pipx run pwn",
    "npm exec pwn",
    "uv run pwn.py",
    "yarn dlx pwn",
    "pnpm dlx pwn",
    "bunx pwn",
    "/usr/bin/env touch pwned",
    "/bin/sh -c 'touch pwned'",
    "./../../usr/bin/xargs touch",
    "tar -cf x.tar --to-command='touch pwned' .",
    "rsync -e 'touch pwned' a b:",
    "ssh -o ProxyCommand='touch pwned' x",
    "man -P 'touch pwned' ls",
    "vim -c '!touch pwned'",
    "less +'!touch pwned' f",
    "busybox sh -c 'touch pwned'",
    "flock /tmp/x touch pwned",
    "setsid touch pwned",
    "strace -o /dev/null touch pwned",
    # The second review (t22): options and programs that run code, after an "always".
    "git clone -q --template=./tpl . y",
    "git init --template=./tpl y",
    "git clone -c core.hooksPath=./tpl/hooks . y",
    "git clone --config=core.hooksPath=./tpl/hooks . y",
    "git clone -qu 'touch pwned' . y",
    "git clone --upl='touch pwned' . y",
    "sort -S 1K --compress-program=./evil.sh big",
    "sort --compress-prog=./evil.sh big",
    "rg --pre ./evil.sh x",
    "rg --pre-glob '*' x",
    "rg --hostname-bin=./evil.sh --hyperlink-format=default x",
    "rg --hostname-b ./evil.sh x",
    "fd -x touch pwned",
    "fd -X touch pwned",
    "fd -Hx touch pwned",
    "fd --exec touch pwned",
    "fd --exec-batch touch pwned",
    "fdfind -x touch pwned",
    "tmux new-session 'touch pwned'",
    "screen -dm touch pwned",
    "expect -c 'spawn touch pwned'",
    "sqlite3 x.db '.shell touch pwned'",
    "direnv exec . touch pwned",
    "coverage run pwn.py",
    # The third review (t5, t16): options that run a program, or write git's configuration.
    "split --filter='sh evil.sh' notes.txt",
    "split --filt='sh evil.sh' notes.txt",
    "git log -1 --output=.git/config --format=x",
    "git diff --output=.git/config",
    "git show --output=.git/hooks/pre-commit",
    "git format-patch -o .git/hooks HEAD~1",
    "git format-patch --output-directory=.git/hooks HEAD~1",
    "git archive -o .git/config HEAD",
    "install --strip-program=./evil.sh -s a b",
    "diff3 --diff-program=./evil.sh a b c",
    "sdiff --diff-program=./evil.sh a b",
    "wget --use-askpass=./evil.sh https://example.com/",
    "wget -e use_askpass=./evil.sh https://example.com/",
    "wget --config=./evil.wgetrc https://example.com/",
    "cpio --rsh-command=./evil.sh -o -F x:y",
    "ctags --xcmd-c=./evil.sh x.c",
    "ssh-keygen -D ./evil.so",
    "ssh-keygen -w ./evil.so -t ed25519-sk",
    "ssh-add -s ./evil.so",
    "ssh-add -S ./evil.so",
    "gcc -wrapper ./evil.sh x.c",
    "gcc -B ./tools x.c",
    "gcc -fplugin=./evil.so x.c",
    "gcc-12 -wrapper ./evil.sh x.c",
    "cc -B ./tools x.c",
    "clang -fplugin=./evil.so x.c",
    "clang-15 -fplugin=./evil.so x.c",
    "g++ -wrapper ./evil.sh x.cc",
    "ld -plugin ./evil.so x.o",
    "openssl engine -pre SO_PATH:./evil.so dynamic",
    "pandoc --filter ./evil.sh x.md",
]


@pytest.mark.parametrize("command", CODE_RUNNING)
def test_always_is_not_offered_for_a_program_whose_arguments_run_code(
    tmp_path: Path, command: str
) -> None:
    tool = BashTool(Workspace.at(tmp_path, tmp_path / ".out"))
    access = tool.prepare({"command": command}).access
    assert access.scope is None, f'[a]lways for "{access.scope} ..." would cover {command}'


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git log -1",
        "git diff --stat",
        "git push -u origin main",
        "ls -la",
        "pytest -q tests",
        "cat x.txt",
        "sort -S 1K big",
        "rg -n --pretty x",
        "fd -H x",
        "split -l 1 notes.txt part-",
        "git grep -o x",
        "install -m 644 a b",
        "diff3 a b c",
        "wget -q https://example.com/",
    ],
)
def test_always_is_still_offered_for_a_plain_command(tmp_path: Path, command: str) -> None:
    tool = BashTool(Workspace.at(tmp_path, tmp_path / ".out"))
    assert tool.prepare({"command": command}).access.scope == command.split()[0]


def test_always_for_git_status_does_not_cover_git_with_a_config_override(tmp_path: Path) -> None:
    person = Person()
    policy = ApprovalPolicy(asker=person)
    tool = BashTool(Workspace.at(tmp_path, tmp_path / ".out"))
    assert _decide(policy, tool, "git status") == "allowed-always"
    assert _decide(policy, tool, "git -c core.pager='touch pwned' log") == "rejected"
    assert _decide(policy, tool, "git log -1") == "allowed-always"


def test_always_for_sort_does_not_cover_sort_with_a_compress_program(tmp_path: Path) -> None:
    # The second review (t22): [a] for "sort big", then sort ran the model's ./evil.sh.
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'pwned'}\ncat\n")
    script.chmod(0o755)
    # Beyond sort's 1K buffer (its least), so it spills, through the program: 500 lines
    # suffice (50,000 made it run the program 7,600 times, for 14 s).
    (tmp_path / "big").write_text("".join(f"{n % 977} line\n" for n in range(500)))
    person = Person()
    policy = ApprovalPolicy(asker=person)
    tool = BashTool(Workspace.at(tmp_path, tmp_path / ".out"))
    assert _decide(policy, tool, "sort big") == "allowed-always"
    attack = "sort -S 1K --compress-program=./evil.sh big"
    assert _decide(policy, tool, attack) == "rejected"
    assert person.asked == ["$ sort big", f"$ {attack}"]
    # What it would have done: sort runs ./evil.sh (the control, run here on purpose).
    bash_run(tool, f"{attack} > /dev/null")
    assert (tmp_path / "pwned").exists()


def _always_then(tmp_path: Path, first: str, attack: str) -> tuple[BashTool, Person]:
    """[a] for ``first``, then the ``attack`` is asked for (and refused): the tool and who
    was asked what."""
    person = Person()
    policy = ApprovalPolicy(asker=person)
    tool = BashTool(Workspace.at(tmp_path, tmp_path / ".out"))
    assert _decide(policy, tool, first) == "allowed-always"
    assert _decide(policy, tool, attack) == "rejected"
    assert person.asked == [f"$ {first}", f"$ {attack}"]
    return tool, person


def test_always_for_split_does_not_cover_split_with_a_filter(tmp_path: Path) -> None:
    # The third review (t5): [a] for "split -l 1 notes.txt part-", then split ran evil.sh.
    (tmp_path / "notes.txt").write_text("a\nb\n")
    (tmp_path / "evil.sh").write_text(f"touch {tmp_path / 'pwned'}; cat > /dev/null\n")
    attack = "split --filter='sh evil.sh' notes.txt"
    tool, _ = _always_then(tmp_path, "split -l 1 notes.txt part-", attack)
    # What it would have done: split runs evil.sh (the control, run here on purpose).
    bash_run(tool, attack)
    assert (tmp_path / "pwned").exists()


def test_always_for_git_status_does_not_cover_git_log_writing_git_config(tmp_path: Path) -> None:
    # The third review (t16): [a] for "git status", then `git log --output=.git/config`
    # wrote a core.fsmonitor there, which the next `git status` ran.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "i"], check=True)
    fsmonitor = f"touch%x20{tmp_path / 'pwned'}"
    attack = f"git log -1 --output=.git/config --format=%x5bcore%x5d%n%x09fsmonitor={fsmonitor}"
    tool, _ = _always_then(tmp_path, "git status", attack)
    # What it would have done (the control, run here on purpose): the next git runs it.
    bash_run(tool, attack)
    bash_run(tool, "git status")
    assert (tmp_path / "pwned").exists()
