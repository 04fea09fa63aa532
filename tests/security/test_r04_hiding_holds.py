"""SPEC 10.4 inside the sandbox, where the review undid the hiding (findings 7 and 5b).

Finding 7: only the directories above *read-only* paths were pinned, so a command could rename
the parent of a hidden one, and the next command (which hid the names that no longer existed)
read what had been hidden: with the working directory at ``~``, ``mv .config .cfg`` then ``cat
.cfg/gcloud/credentials.db``; with ``--home`` inside it, ``mv state state2`` then every session
log. A credential symlink swapped by a command (``~/.ssh -> dotfiles/ssh``) did the same.

Finding 5b: a sandboxed command read the key from ``~/.bashrc`` and sent it to the model
base64-encoded, past the masking of its exact value. Files that hold the key (shell start-up
files, ``.env*``) are now empty inside the sandbox.

Each attack runs two commands of one session, in-process, under the real bubblewrap.
"""

from __future__ import annotations

import base64

import pytest

from dsh_core.masking import hide
from tests.security._support_fixfiles import Attacker, attacker_fixture
from tests.security._support_sandbox import needs_bwrap
from tests.support import CANARY_KEY

__all__ = ["attacker_fixture"]

pytestmark = needs_bwrap

SECRET = "dsh-test-secret-of-the-credential-store"


def test_renaming_the_parent_of_a_hidden_credential_directory_does_not_uncover_it(
    attacker: Attacker,
) -> None:
    attacker.home = attacker.work  # dsh run in the home directory
    store = attacker.work / ".config" / "gcloud"
    store.mkdir(parents=True)
    (store / "credentials.db").write_text(f"{SECRET}\n")
    moved = attacker.bash("mv .config .cfg; echo moved")
    read = attacker.bash("cat .cfg/gcloud/credentials.db .config/gcloud/credentials.db")
    assert SECRET not in read
    assert "mv: cannot move '.config' to '.cfg': Device or resource busy" in moved, moved
    assert (attacker.work / ".config" / "gcloud" / "credentials.db").exists()


def test_renaming_the_directory_above_dsh_home_does_not_uncover_the_sessions(
    attacker: Attacker,
) -> None:
    attacker.dsh_home = attacker.work / "state" / "dsh"  # --home state/dsh
    log = attacker.dsh_home / "sessions" / "s" / "session.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(f'{{"type": "user/message", "text": "{SECRET}"}}\n')
    moved = attacker.bash("mv state state2; echo moved")
    read = attacker.bash("grep -r dsh-test-secret state2 state; echo done")
    assert SECRET not in read
    assert "Device or resource busy" in moved, moved
    assert log.exists()


def test_a_credential_symlink_swapped_by_a_command_does_not_uncover_where_it_led(
    attacker: Attacker,
) -> None:
    attacker.home = attacker.work  # dotfiles kept in the home directory, ~/.ssh a link
    keys = attacker.work / "dotfiles" / "ssh"
    keys.mkdir(parents=True)
    (keys / "id_ed25519").write_text(f"{SECRET}\n")
    (attacker.work / ".ssh").symlink_to("dotfiles/ssh")
    attacker.bash("rm .ssh && ln -s /nonexistent .ssh && echo swapped")
    read = attacker.bash("cat dotfiles/ssh/id_ed25519")
    assert SECRET not in read, read


@pytest.mark.parametrize("where", ["home", "work"], ids=["bashrc", "dot-env"])
def test_a_file_holding_the_key_reads_as_empty_so_no_encoding_of_it_leaves(
    attacker: Attacker, where: str
) -> None:
    # Review 5b: `grep -ho 'sk-[a-z0-9-]*' ~/.bashrc | base64` returned the key in base64.
    hide(CANARY_KEY)  # as dsh does at start: the key is the secret it masks
    if where == "home":
        path = attacker.home / ".bashrc"
        shown = "~/.bashrc"
    else:
        path = attacker.work / ".env"
        shown = ".env"
    path.write_text(f"alias ll='ls -l'\nexport DEEPSEEK_API_KEY={CANARY_KEY}\n")
    result = attacker.bash(f"grep -ho 'sk-[a-z0-9-]*' {shown} | base64; wc -c < {shown}")
    assert base64.b64encode(f"{CANARY_KEY}\n".encode()).decode() not in result
    assert result.endswith("0\n"), result  # empty, as /dev/null is
    assert path.read_text().endswith(f"{CANARY_KEY}\n")  # the user's file is untouched
