"""What the in-process attacks of the review's findings 1, 2, 4, 6, 7 and 10 share.

The file tools' policy and the sandbox are dsh_core code, and the real ``dsh`` process adds
nothing to what they decide: an attack here is the call a hostile model asks for, prepared,
decided and run as the agent loop does it (``Conversation._run_call``: ``Toolbox.prepare``,
``ApprovalPolicy.decide``, the refusal or ``run``), with the grants of a ``--allow`` flag and no
terminal (a pipe: nobody to ask). ``bash`` runs under the real bubblewrap. The consequence is
checked where it would happen: the user's own ``git`` after the session (with the key in its
environment, as a shell has it), the next session's system prompt.

Directories live under ``/var/tmp``: the sandbox has a private ``/tmp``, so a target or a
marker under the host's ``/tmp`` would prove nothing. A *marker* is a file outside the
working directory that a planted payload writes the key into when it runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_core.agent.approval import ApprovalPolicy, Grant, allowed
from dsh_core.masking import mask
from dsh_core.model.seam import ToolCall
from dsh_core.tools import Launcher, Toolbox, ToolOutput, builtin_tools
from dsh_core.trust.sandbox import choose_launcher
from dsh_core.trust.workspace import Workspace
from tests.support import CANARY_KEY

__all__ = ["Attacker", "attacker_fixture", "evil_script", "git_env", "payload", "remove_tree"]


def payload(marker: Path) -> str:
    """Python that writes the environment's key into ``marker``: what an attacker wants."""
    return f"import os; open({str(marker)!r}, 'w').write(os.environ.get('DEEPSEEK_API_KEY', ''))"


def evil_script(marker: Path) -> str:
    """A shell script that runs :func:`payload`: a hook, an fsmonitor, a pager."""
    return f"#!/bin/sh\n{sys.executable} -c {shlex.quote(payload(marker))}\nexit 1\n"


def git_env(home: Path) -> dict[str, str]:
    """The user's shell after the session: the key, their home, an identity for commits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "DSH_"))}
    env.update(
        HOME=str(home),
        DEEPSEEK_API_KEY=CANARY_KEY,
        GIT_AUTHOR_NAME="user",
        GIT_AUTHOR_EMAIL="user@example.com",
        GIT_COMMITTER_NAME="user",
        GIT_COMMITTER_EMAIL="user@example.com",
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


@dataclass
class Attacker:
    """One attack's world: a working directory, a home, and dsh's tools in it."""

    base: Path
    """A fresh directory under ``/var/tmp`` holding the rest; removed afterwards."""
    work: Path
    home: Path
    dsh_home: Path
    marker: Path
    installation: tuple[Path, ...] | None = None
    """dsh's installation as the workspace sees it (None: this process's own)."""
    calls: int = 0
    _workspace: Workspace | None = field(default=None, repr=False)
    _launcher: Launcher | None = field(default=None, repr=False)

    @property
    def workspace(self) -> Workspace:
        """The session's workspace, made at the first call (after the test set the scene)."""
        if self._workspace is None:
            self._workspace = Workspace(
                Path(os.path.realpath(self.work)),
                self.dsh_home / "tool-output",
                environment={
                    k: v for k, v in git_env(self.home).items() if k != "DEEPSEEK_API_KEY"
                },
                dsh_home=self.dsh_home,
                home=self.home,
                installation=self.installation,
            )
        return self._workspace

    def launcher(self) -> Launcher:
        if self._launcher is None:
            self._launcher = choose_launcher("on", workspace=self.workspace)
        return self._launcher

    def call(
        self, name: str, grants: Iterable[Grant] = ("write", "shell"), **arguments: Any
    ) -> str:
        """What the model reads back for one call, on a pipe granted ``grants``."""
        box = Toolbox(builtin_tools(self.workspace, launcher=self.launcher))
        self.calls += 1
        call = ToolCall(f"call_{self.calls}", name, json.dumps(arguments))
        policy = ApprovalPolicy.granting(grants)

        async def run() -> ToolOutput:
            try:
                invocation = box.prepare(call)
            except Exception as exc:
                return ToolOutput.failed(exc)
            outcome = await policy.decide(call, invocation)
            if not allowed(outcome):
                assert outcome is not None
                return ToolOutput.failed(policy.refusal(call, invocation.access, outcome))
            try:
                return await invocation.run()
            except Exception as exc:
                return ToolOutput.failed(exc)

        return mask(asyncio.run(run()).content)

    def read_then_write(self, path: str, content: str, **grants: Any) -> str:
        """``read`` then ``write``, as a model must to replace a file: the write's result."""
        self.call("read", file_path=path)
        return self.call("write", file_path=path, content=content, **grants)

    def bash(self, command: str) -> str:
        """A sandboxed command under ``--allow shell``: what the model reads back."""
        return self.call("bash", command=command)

    def git(self, directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """The user's own ``git`` in ``directory``, after the session."""
        return subprocess.run(
            ["git", *args], cwd=directory, env=git_env(self.home), capture_output=True, text=True
        )

    def repository(self, path: Path) -> Path:
        """A repository with one commit at ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        for args in (("init", "-q"), ("commit", "-q", "--allow-empty", "-m", "first")):
            done = self.git(path, *args)
            assert done.returncode == 0, done.stderr
        return path

    def ran(self) -> bool:
        """Whether a planted payload ran (and what it wrote holds the key)."""
        if not self.marker.exists():
            return False
        assert self.marker.read_text() == CANARY_KEY
        return True


def remove_tree(base: Path) -> None:
    """``shutil.rmtree``, also where an attack made a directory unwritable (``chmod 555``):
    as an ordinary user that would stop the removal."""

    def writable_again(function: Any, path: str, exc: object) -> None:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        function(path)

    for directory, names, _ in os.walk(base):
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    shutil.rmtree(base, onerror=writable_again)


@pytest.fixture(name="attacker")
def attacker_fixture() -> Iterator[Attacker]:
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="dsh-attack-", dir="/var/tmp")))
    try:
        for name in ("work", "home", "dsh-home"):
            (base / name).mkdir()
        yield Attacker(base, base / "work", base / "home", base / "dsh-home", base / "payload-ran")
    finally:
        remove_tree(base)
