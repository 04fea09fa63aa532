"""SPEC 10.11 for ``grep`` and ``glob``: a directory swapped for a symlink during the walk is not
followed (issue 31, class 10).

``read`` opens what it checked (the descriptor is compared with the resolved path); the walk of
``grep`` and ``glob`` listed each directory by its path, so a directory renamed away and
replaced by a link to ``~/.ssh`` between two listings (a command left running, or any process
of the model's) was listed and read through: the key's lines came back as matches, inside the
working directory, without a question. Now the walk holds each directory it lists and opens
the next from it without following a link; a file named by the call is opened the same way.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from dsh_core.tools.tree.walk import Walk
from tests.security._support_fixfiles import Attacker, attacker_fixture

__all__ = ["attacker_fixture"]

SECRET = "dsh-test-secret-ssh-key-material"


def keys(attacker: Attacker) -> Path:
    """``~/.ssh`` holding a private key with :data:`SECRET` in it."""
    ssh = attacker.home / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    return ssh


def test_a_directory_swapped_for_a_link_to_ssh_between_two_listings_is_not_followed(
    attacker: Attacker,
) -> None:
    # The swap made where it always lands: after the walk listed the top, before it lists b/.
    ssh = keys(attacker)
    for name in ("a", "b"):
        (attacker.work / name).mkdir()
        (attacker.work / name / "notes.txt").write_text(f"{name} notes\n")
    walk = Walk(threading.Event(), (str(attacker.work),), attacker.workspace.credentials)
    read: list[str] = []
    for relative, entry in walk.files(str(attacker.work), ()):
        if relative == "a/notes.txt":
            (attacker.work / "b").rename(attacker.work / "b-moved")
            (attacker.work / "b").symlink_to(ssh)
        name, held = walk.reach(entry)
        with open(os.open(name, os.O_RDONLY, dir_fd=held)) as file:
            read.append(f"{relative}: {file.read()}")
    assert not any(SECRET in text for text in read), read
    assert read == ["a/notes.txt: a notes\n"]
    assert walk.notes() == [
        "[skipped: 1 directory replaced by a symlink while searched, not followed: b]"
    ]


def test_grep_racing_a_swap_to_ssh_never_reads_the_key(attacker: Attacker) -> None:
    # The same as a race, through the tool: another process flips sub/ between the real
    # directory and a link to ~/.ssh while the model greps the working directory.
    ssh = keys(attacker)
    sub, real = attacker.work / "sub", attacker.work / "real"
    real.mkdir()
    for n in range(40):
        (real / f"f{n}.txt").write_text("nothing here\n")
    sub.symlink_to(ssh)
    done = threading.Event()

    def swap() -> None:
        spare = attacker.work / "spare"
        while not done.is_set():
            os.rename(real, spare)  # real dir -> spare
            os.replace(sub, attacker.work / "link")  # link -> link (sub gone)
            os.rename(spare, sub)  # sub is the real directory now
            os.rename(sub, spare)
            os.rename(attacker.work / "link", sub)  # sub is the link to ~/.ssh again
            os.rename(spare, real)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        results = [attacker.call("grep", pattern="OPENSSH|secret", path=".") for _ in range(150)]
    finally:
        done.set()
        swapper.join()
    assert not any(SECRET in result for result in results), [r for r in results if SECRET in r][:1]
