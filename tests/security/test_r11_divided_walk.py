"""SPEC 10.11 and 10.4 for a ``grep`` whose walk divided between two processes (issue 32).

A long walk forks (:mod:`dsh_core.tools.tree.divided`): the child walks the last directories with
the descriptors it inherited. The attacks: a directory of the child's part swapped for a link to
``~/.ssh`` just as it starts (it must still open each directory from the one it holds, without
following a link), and dsh's own ``/proc`` files, which are the child's parent's, not its own
(the fence is by process id).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_core.tools.tree import divided
from dsh_core.trust.credentials import own_process_reason
from tests.security._support_fixfiles import Attacker, attacker_fixture

__all__ = ["attacker_fixture"]

SECRET = "dsh-test-secret-ssh-key-material"

_SWAP: list[tuple[Path, Path]] = []
"""(directory, link target) for the next forked child to swap before it walks on."""
_FORKS: list[int] = []


def _swap_in_child() -> None:
    if _SWAP:
        directory, target = _SWAP[0]
        directory.rename(directory.with_name(directory.name + "-moved"))
        directory.symlink_to(target)


os.register_at_fork(after_in_parent=lambda: _FORKS.append(1), after_in_child=_swap_in_child)


def test_a_directory_of_the_childs_part_swapped_for_a_link_to_ssh_is_not_followed(
    attacker: Attacker, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh = attacker.home / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    for n in range(6):
        (attacker.work / f"top{n}").mkdir()
        (attacker.work / f"top{n}" / "notes.txt").write_text(f"top{n} notes, no secret\n")
    monkeypatch.setattr(divided, "FILES_FIRST", 1)
    _SWAP.append((attacker.work / "top5", ssh))  # walked last: the child's
    forks = len(_FORKS)
    try:
        result = attacker.call("grep", pattern="OPENSSH|secret", path=".")
    finally:
        _SWAP.clear()
    assert len(_FORKS) > forks, "the walk did not divide"
    assert SECRET not in result, result
    assert "replaced by a symlink while searched, not followed: top5" in result
    assert "top4/notes.txt:1:top4 notes, no secret" in result


def test_dshs_proc_files_are_fenced_in_the_child_that_dsh_forked() -> None:
    # The child's own id is not dsh's: fenced by its own id alone, dsh's environ (the key)
    # and its threads' directories would be open to it.
    dsh = os.getpid()
    thread = os.listdir(f"/proc/{dsh}/task")[-1]
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reading)
        answers = [
            own_process_reason(f"/proc/{dsh}/environ"),
            own_process_reason(f"/proc/{thread}/environ"),
            own_process_reason(f"/proc/{os.getpid()}/environ"),
        ]
        os.write(writing, repr(answers).encode())
        os._exit(0)
    os.close(writing)
    with os.fdopen(reading) as heard:
        said = heard.read()
    os.waitpid(child, 0)
    assert said == repr([f"/proc/{dsh}", f"/proc/{thread}", f"/proc/{child}"])
