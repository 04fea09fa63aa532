"""``@path`` in a message: the file goes with it, read under the ``read`` tool's rules (SPEC 17).

    attached = await attach_files("review @src/app.py please", toolbox, approval)
    attached.text      # the message, then the file as `read` shows it to the model
    attached.refused   # why a file was not attached (then nothing is sent)

Each ``@word`` (at the start of the message or after a blank) that names a file is read by
the session's own ``read`` tool through the session's approval policy, as if the model had
asked for it: a file inside the working directory is read at once; a credential, a protected
path or a file outside is asked about on the terminal (never only because the person typed
it: ``@~/.ssh/id_rsa`` is exactly what a pasted prompt would slip in), and what the person
refuses is not sent. The contents are what the model would have got from ``read``: numbered
lines, at most its 2,000 lines, the rest named. A word that names no file stays text.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from dsh_core.agent.approval import ApprovalPolicy, allowed
from dsh_core.chain import error_chain
from dsh_core.model.seam import ToolCall
from dsh_core.tools import Toolbox
from dsh_core.tools.base import ToolError

__all__ = ["AT_PATH", "Attached", "attach_files", "mentioned_paths"]

AT_PATH = re.compile(r"(?:^|(?<=\s))@(\S+)")
"""``@path``: at the start of the message or after a blank (``ann@example.com`` is none)."""
_TRAILING = ",.;:!?)]}'\""
"""Punctuation after a path in a sentence (``see @a.py, then``): not part of it."""


@dataclass(frozen=True, slots=True)
class Attached:
    """A message with the files it names."""

    text: str
    """What is sent: the message, then each file, as ``read`` shows it."""
    files: tuple[str, ...] = ()
    """The paths attached, as typed."""
    notices: tuple[str, ...] = ()
    """What to tell the person (a word that names no file)."""
    refused: str | None = None
    """Why a file could not be attached: the message is not sent."""


def mentioned_paths(message: str) -> list[str]:
    """The ``@paths`` of ``message``, in order, each once."""
    paths = []
    for match in AT_PATH.finditer(message):
        path = match.group(1)
        if not os.path.lexists(os.path.expanduser(path)):
            path = path.rstrip(_TRAILING)
        if path and path not in paths:
            paths.append(path)
    return paths


def _files(message: str) -> list[tuple[str, str | None]]:
    """Each ``@path`` that names something: the path as typed, and as ``read`` is given it
    (``~`` expanded), or None when it is no regular file. Words that name nothing are text."""
    found: list[tuple[str, str | None]] = []
    for path in mentioned_paths(message):
        where = os.path.expanduser(path)
        if os.path.isfile(where):
            found.append((path, where))
        elif os.path.lexists(where):
            found.append((path, None))
    return found


async def attach_files(message: str, toolbox: Toolbox, approval: ApprovalPolicy) -> Attached:
    """``message`` with the files its ``@paths`` name (see the module docstring)."""
    parts = [message]
    files: list[str] = []
    notices: list[str] = []
    for index, (path, where) in enumerate(_files(message)):
        if where is None:
            notices.append(f"@{path} is no regular file: sent as text, not attached")
            continue
        call = ToolCall(f"attach-{index}", "read", json.dumps({"file_path": where}))
        try:
            invocation = toolbox.prepare(call)
            outcome = await approval.decide(call, invocation)
            if not allowed(outcome):
                assert outcome is not None
                why = approval.refusal(call, invocation.access, outcome)
                return Attached(message, refused=f"@{path} not attached: {why.message}")
            output = await invocation.run()
        except ToolError as exc:
            return Attached(message, refused=f"@{path} not attached: {error_chain(exc)}")
        if output.failure is not None:
            return Attached(message, refused=f"@{path} not attached: {output.failure.message}")
        parts.append(f"[the file {path}, attached, as the read tool shows it]\n{output.content}")
        files.append(path)
    return Attached("\n\n".join(parts), tuple(files), tuple(notices))
