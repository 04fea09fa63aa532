"""What the model may not touch, whatever it was granted (SPEC section 10): the policy.

Two mechanisms enforce it, and both read it from here, so they cannot drift apart:

- the sandbox (:mod:`.sandbox`) makes protected paths read-only and credentials empty for
  commands;
- the file tools and the approval policy (:mod:`dsh_core.approval`) ask every time on a
  terminal and refuse on a pipe, whatever ``--allow`` says.

    credential_paths(Path.home(), dsh_home)   # ~/.ssh, ~/.aws, ..., and DSH_HOME itself
    protected_reason(PurePath(".git/hooks/pre-commit"))   # ".git/hooks/"
"""

from __future__ import annotations

from pathlib import Path, PurePath

__all__ = [
    "CREDENTIAL_NAMES",
    "GIT_PROTECTED_NAMES",
    "PROTECTED_DIR_NAMES",
    "credential_paths",
    "protected_reason",
]

CREDENTIAL_NAMES = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
)
"""Relative to the user's home directory: where credentials live (SPEC 10.4)."""

GIT_PROTECTED_NAMES = ("config", "hooks", "commondir", "config.worktree")
"""Inside a ``.git`` directory: what git runs code from at the user's next ``git`` command
(``core.fsmonitor``, ``core.hooksPath``, aliases, filters; hook scripts), and what moves where
it reads those from (``commondir`` names another directory for ``config`` and ``hooks``;
``config.worktree`` is read too once ``extensions.worktreeConfig`` is set)."""

PROTECTED_DIR_NAMES = (".dsh", ".agents")
"""dsh's own project directories: what they hold steers later sessions."""


def credential_paths(home: Path, dsh_home: Path | None = None) -> tuple[Path, ...]:
    """The credential locations under ``home``, then ``dsh_home``: absolute, not resolved."""
    paths = [home / name for name in CREDENTIAL_NAMES]
    if dsh_home is not None:
        paths.append(dsh_home)
    return tuple(paths)


def protected_reason(relative: PurePath) -> str | None:
    """Which protected path ``relative`` (to the working directory, symlinks resolved) is in.

    ``.git/config`` and ``.git/hooks/`` of any repository, nested ones included, and the
    ``.dsh/`` and ``.agents/`` directories at any depth; None when it is none of them.
    """
    parts = relative.parts
    for index, part in enumerate(parts):
        if part in PROTECTED_DIR_NAMES:
            return f"{part}/"
        if part == ".git" and index + 1 < len(parts) and parts[index + 1] in GIT_PROTECTED_NAMES:
            name = parts[index + 1]
            return f".git/{name}/" if name == "hooks" else f".git/{name}"
    return None
