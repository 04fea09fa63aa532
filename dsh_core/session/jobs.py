"""The session log's background-job events (SPEC 16): a job's start and its end.

    job/start {turn, job_id, command, output_file}
    job/end   {turn, job_id, status, notice, exit_code}

:mod:`dsh_core.session.events` makes them records of the log; the job table in
:mod:`dsh_core.tools.jobs` writes them.
"""

from __future__ import annotations

from typing import ClassVar

from ..records import record
from .codec import Codec

__all__ = ["JobEnded", "JobStarted"]


@record
class JobStarted(Codec):
    """A background command started (``bash`` with ``run_in_background``)."""

    TYPE: ClassVar[str] = "job/start"
    turn: int
    job_id: str
    """``bash-1``: what the model names it by, unique in the session."""
    command: str
    output_file: str
    """Where all of its output goes (0600, beside the session log)."""


@record
class JobEnded(Codec):
    """A background job ended, and the model is told so in its next request (fsynced)."""

    TYPE: ClassVar[str] = "job/end"
    turn: int
    job_id: str
    status: str
    """``exited``, ``killed`` (job_kill, or the session ended), ``timed-out``, or ``lost``
    (the dsh that ran it exited before it ended)."""
    notice: str
    """What the model reads, as a user message: the job, how it ended, where its output is."""
    exit_code: int | None = None
