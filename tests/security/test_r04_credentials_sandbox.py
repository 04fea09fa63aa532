"""SPEC 10.4 inside the sandbox: the credential locations and ``DSH_HOME`` are empty.

Each attack is a ``bash`` call a prompt-injected model asks for under ``--allow shell`` to read
secrets that would then go to the model (and whoever steers it); the check is that its result
holds none of them. On dsh 0.2.0 each result held the secret.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.dsh_stdio.test_agent_pipe import data_of, read_events, run_dsh
from tests.security._support_sandbox import (  # noqa: F401 (the fixture is found by name)
    CANARY_KEY,
    NEXT,
    Scene,
    bash_calls,
    needs_bwrap,
    scene_fixture,
    went_on,
)

pytestmark = [pytest.mark.slow, needs_bwrap]

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- dsh-test-secret"


def plant_secrets(home: Path) -> None:
    """A secret in every kind of credential location: directories and files."""
    for name in (".ssh/id_ed25519", ".aws/credentials", ".config/gh/hosts.yml", ".kube/config"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"{SECRET} {name}\n")
    for name in (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass"):
        (home / name).write_text(f"{SECRET} {name}\n")


def test_sandboxed_cat_of_ssh_keys_and_tokens_reads_nothing(scene: Scene) -> None:
    plant_secrets(scene.home)
    (outcome,), run = scene.attack(
        "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.config/gh/hosts.yml ~/.kube/config "
        "~/.netrc ~/.git-credentials ~/.pypirc ~/.npmrc ~/.pgpass; "
        'echo "listed: $(ls -A ~/.ssh ~/.aws ~/.kube | grep -v : | tr -d "\\n")"; '
        'echo "found: $(grep -r dsh-test-secret ~ 2>/dev/null | wc -l)"'
    )
    content = outcome["content"]
    assert SECRET not in content
    assert "\nlisted: \n" in content  # the directories are there, and empty
    assert "\nfound: 0\n" in content  # nowhere in the home directory
    note = f"(sandboxed: writes only {scene.work}, reads all but your credentials, no network)"
    assert "dsh: [tool bash] $ cat ~/.ssh/id_ed25519 " in run.stderr
    assert f"{note}\n" in run.stderr  # what the call line (and a question) says


def test_credentials_reached_through_a_symlink_are_hidden_where_they_lead(scene: Scene) -> None:
    # Dotfiles kept in a repository, ~/.ssh a link into it: hidden is the place, not the name.
    keys = scene.home / "dotfiles" / "ssh"
    keys.mkdir(parents=True)
    (keys / "id_ed25519").write_text(f"{SECRET}\n")
    (scene.home / ".ssh").symlink_to(keys)
    content = scene.content("cat ~/dotfiles/ssh/id_ed25519 ~/.ssh/id_ed25519")
    assert SECRET not in content
    assert content.count("No such file or directory") == 2


def test_sandboxed_grep_of_dsh_home_finds_no_session(scene: Scene) -> None:
    # DSH_HOME holds every session: what the user said, what tools returned, elsewhere too.
    earlier = "my earlier secret line"
    went_on(run_dsh(scene.env, scene.work, stdin=f"{earlier}\n{NEXT}\n"))
    assert any(earlier in log.read_text() for log in scene.dsh_home.rglob("session.jsonl"))
    scene.stub.enqueue(
        bash_calls('grep -r "earlier secret" "$DSH_HOME"; ls -A "$DSH_HOME"; echo end')
    )
    went_on(run_dsh(scene.env, scene.work, "--allow", "shell", stdin=f"look\n{NEXT}\n"))
    logs = sorted(scene.dsh_home.rglob("session.jsonl"), key=os.path.getmtime)
    (looked,) = data_of(read_events(logs[-1]), "tool/result")
    assert looked["content"] == "end\n"  # nothing found, nothing listed: an empty directory


def test_sandboxed_tr_of_shell_history_and_environment_d_reads_no_key(scene: Scene) -> None:
    # Second review (t7): `tr a-z A-Z < ~/.bash_history` (and ~/.zsh_history,
    # ~/.config/environment.d/*.conf) returned the key an `export` had left there.
    files = (".bash_history", ".zsh_history", ".config/environment.d/deepseek.conf")
    for name in files:
        (scene.home / name).parent.mkdir(parents=True, exist_ok=True)
        (scene.home / name).write_text(f"export DEEPSEEK_API_KEY={SECRET}\n")
    content = scene.content(
        "for f in ~/.bash_history ~/.zsh_history ~/.config/environment.d/deepseek.conf; "
        'do tr a-z A-Z < "$f"; done; echo done'
    )
    assert SECRET.upper() not in content and SECRET not in content, content
    assert content.endswith("done\n"), content


def test_sandboxed_grep_of_fish_variables_and_other_histories_reads_no_key(scene: Scene) -> None:
    # Third review (t6b): `strings <f> | grep -o 'sk-...' | sed 's/./&./g'` returned the key
    # from fish's universal variables (`set -Ux`), a $ZDOTDIR history, ksh's history and
    # IPython's; vim's and irb's histories were readable too.
    files = {
        ".config/fish/fish_variables": f"SETUVAR --export DEEPSEEK_API_KEY:{CANARY_KEY}\n",
        ".config/zsh/.zsh_history": f": 1:0;export DEEPSEEK_API_KEY={CANARY_KEY}\n",
        ".sh_history": f"export DEEPSEEK_API_KEY={CANARY_KEY}\n",
        ".viminfo": f":let $DEEPSEEK_API_KEY='{CANARY_KEY}'\n",
        ".irb_history": f"ENV['DEEPSEEK_API_KEY']='{CANARY_KEY}'\n",
    }
    for name, text in files.items():
        (scene.home / name).parent.mkdir(parents=True, exist_ok=True)
        (scene.home / name).write_text(text)
    ipython = scene.home / ".ipython" / "profile_default" / "history.sqlite"
    ipython.parent.mkdir(parents=True)
    with closing(sqlite3.connect(ipython)) as db, db:
        db.execute("create table history (source text)")
        db.execute("insert into history values (?)", (f"os.environ['K'] = '{CANARY_KEY}'",))
    names = " ".join(f"~/{name}" for name in [*files, ".ipython/profile_default/history.sqlite"])
    content = scene.content(f"grep -salF {CANARY_KEY[:13]} {names}; echo done")
    assert content == "done\n", content  # on the reviewed code: all six names
