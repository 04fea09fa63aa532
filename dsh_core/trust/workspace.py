"""Where tools work: the working directory, the session's output files, the child environment.

One :class:`Workspace` per conversation: the files read in it (``write`` and ``edit`` refuse a
file that was not read, or that changed on disk since) belong to that session, and a fresh
session (``/new``) starts with none: its :class:`ReadTracker` holds them. It also knows the
user's credential locations (:class:`~.credentials.Credentials`), which file tools do not open
without a person's yes.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..masking import secrets_of

if TYPE_CHECKING:
    from .credentials import Credentials
    from .policy import Kept, Protection

__all__ = ["SECRET_VARIABLES", "Fingerprint", "ReadTracker", "Workspace", "child_environment"]

SECRET_VARIABLES = ("DEEPSEEK_API_KEY",)
"""Variables never passed to a child process."""


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without the API key.

    The key is dropped under any name: a variable whose value holds it (in any case, or an
    encoding of it: what masking finds, :meth:`dsh_core.masking.Secrets.holds`) is removed too,
    so a user's ``export OPENAI_API_KEY=$DEEPSEEK_API_KEY`` does not hand it to a command
    either. A key too short to be masked (``x``) is looked for only under its own name: every
    variable holding an ``x`` would go otherwise (:func:`dsh_core.masking.maskable`).
    """
    source = os.environ if environ is None else environ
    keys = secrets_of(*(source.get(name, "") for name in SECRET_VARIABLES))
    return {
        name: value
        for name, value in source.items()
        if name not in SECRET_VARIABLES and not keys.holds(value)
    }


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a file looked like on disk: a change of any field means it changed since.

    Timestamps are as fine as the file system keeps them (nanoseconds on ext4, xfs, btrfs,
    tmpfs, but the kernel's clock ticks in milliseconds): a rewrite to the same size within one
    tick is not seen. Replacing the file (a new inode) is.
    """

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, status: os.stat_result) -> Fingerprint:
        return cls(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)

    def change(self, now: Fingerprint) -> str:
        """How the file changed from this fingerprint to ``now``, in words; "" when it did not."""
        if (self.device, self.inode) != (now.device, now.inode):
            return "it was replaced by another file"
        if self.size != now.size:
            return f"its size went from {self.size:,} to {now.size:,} bytes"
        if self.mtime_ns != now.mtime_ns:
            return "it was modified"
        return ""


class ReadTracker:
    """The files read in one session, by real path (symlinks followed), as they were then."""

    def __init__(self) -> None:
        self._files: dict[str, Fingerprint] = {}

    def record(self, path: str, fingerprint: Fingerprint) -> None:
        """``path`` was read (or written) and looked like ``fingerprint``."""
        self._files[path] = fingerprint

    def fingerprint(self, path: str) -> Fingerprint | None:
        """How ``path`` looked when last read or written in this session; None if never."""
        return self._files.get(path)

    def __len__(self) -> int:
        return len(self._files)


@dataclass
class Workspace:
    """The working directory tools act in, and what they share within one session."""

    root: Path
    """The working directory, resolved (symlinks followed): what "inside" means."""
    output_dir: Path
    """Where a command's whole output goes when the result is cut (created 0700 on demand)."""
    environment: dict[str, str] = field(default_factory=child_environment)
    """The environment of every child process: no API key."""
    read_files: ReadTracker = field(default_factory=ReadTracker)
    """Files read in this session: ``write`` and ``edit`` change only these, unchanged since."""
    dsh_home: Path | None = None
    """``DSH_HOME``: a credential location like ``~/.ssh`` (its sessions, its configuration),
    except for :attr:`output_dir`, which the model is told to read."""
    home: Path = field(default_factory=Path.home)
    """The user's home directory, where the other credential locations are."""
    installation: tuple[Path, ...] | None = None
    """dsh's installation (:func:`~.policy.installation_paths`); None: this process's own."""
    started: tuple[Kept, ...] = ()
    """What dsh's MCP servers run from (:func:`dsh_core.extensions.mcp.launch.server_files`):
    protected where inside, like dsh's installation."""
    skill_folders: set[str] = field(default_factory=set)
    """The folders of the skills loaded in this session (resolved): ``read`` opens their files
    without a question, wherever they are (SPEC 13)."""

    @classmethod
    def at(
        cls,
        cwd: Path,
        output_dir: Path,
        *,
        dsh_home: Path | None = None,
        started: tuple[Kept, ...] = (),
    ) -> Workspace:
        return cls(Path(os.path.realpath(cwd)), output_dir, dsh_home=dsh_home, started=started)

    @functools.cached_property
    def credentials(self) -> Credentials:
        """The credential locations, resolved once per session."""
        from .credentials import Credentials  # the policy loads with the first tool, not at startup

        return Credentials.of(self.home, self.dsh_home)

    def in_skill(self, real: str) -> bool:
        """Whether the resolved path ``real`` is in the folder of a skill loaded in this session."""
        return any(os.path.commonpath([real, folder]) == folder for folder in self.skill_folders)

    @functools.cached_property
    def protection(self) -> Protection:
        """What only a person may let ``write`` and ``edit`` change here, and what the sandbox
        keeps read-only: one :class:`~.policy.Protection`, its scan shared by both."""
        from .policy import Protection, inside, installation_paths
        from .repositories import RepositoryScan

        everywhere = installation_paths() if self.installation is None else self.installation
        installation = tuple(path for path in everywhere if inside(path, self.root))
        scan = RepositoryScan(self.root, skip=installation)
        home = Path(os.path.realpath(self.home))
        return Protection(self.root, installation, scan=scan, home=home, started=self.started)

    def names_output(self, real: str) -> bool:
        """Whether the resolved path ``real`` is a file dsh named in this session: one of its
        saved whole outputs, which ``read`` opens without a question (issue 29).

        That is a regular file directly in this session's own :attr:`output_dir`, with one
        link, owned by this user. Only dsh writes there (the directory is in ``DSH_HOME``, which
        the model cannot write: SPEC 10.14), and each file in it is named in a result or a
        stub. A symlink planted there was resolved away already (``real`` is where it leads);
        a hard link to another file has a second link; a subdirectory, another session's
        outputs and the log beside them are not in it; names starting with ``.`` are
        dsh's temporary files."""
        if os.path.dirname(real) != self.own_output or os.path.basename(real).startswith("."):
            return False
        try:
            status = os.lstat(real)
        except OSError:
            return False
        return (
            stat.S_ISREG(status.st_mode) and status.st_nlink == 1 and status.st_uid == os.geteuid()
        )

    @functools.cached_property
    def own_output(self) -> str:
        """:attr:`output_dir`, resolved: readable although it is in ``DSH_HOME``."""
        return os.path.realpath(self.output_dir)
