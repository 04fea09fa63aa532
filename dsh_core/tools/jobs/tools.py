"""``job_output``, ``job_list`` and ``job_kill``: the model's hold on its background jobs.

    jobs = JobTable(log, output_dir)
    toolbox = Toolbox([..., JobOutputTool(jobs), JobListTool(jobs), JobKillTool(jobs)])

Names and arguments as the reference harness has them (its ``dsh-tool-jobs``). They touch only
the jobs this session started, which the person approved when they started: no approval, and
they may run beside reads. An unknown id is an ``Error:`` naming the jobs there are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...model.seam import ToolSpec
from .. import specs
from ..base import Access, Invocation, ToolError, ToolOutput
from ..specs import MAX_JOB_WAIT_S
from .table import JobTable

__all__ = ["JobKillTool", "JobListTool", "JobOutputTool", "job_tools"]


def _job_id(arguments: Mapping[str, Any], allowed: set[str]) -> str:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise ToolError(f"invalid arguments: unknown argument {unknown[0]!r}")
    job_id = arguments.get("job_id")
    if not isinstance(job_id, str) or not job_id.strip():
        raise ToolError("invalid arguments: job_id must be a job's id (bash-1)")
    return job_id.strip()


class JobOutputTool:
    """``job_output {job_id, wait?, timeout_ms?}``."""

    def __init__(self, jobs: JobTable) -> None:
        self._jobs = jobs

    @property
    def spec(self) -> ToolSpec:
        return specs.JOB_OUTPUT

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("job_id", ""))

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        job_id = _job_id(arguments, {"job_id", "wait", "timeout_ms"})
        wait = arguments.get("wait")
        if wait is not None and not isinstance(wait, bool):
            raise ToolError("invalid arguments: wait must be true or false")
        timeout_ms = arguments.get("timeout_ms")
        seconds = float(MAX_JOB_WAIT_S)
        if timeout_ms is not None:
            if (
                isinstance(timeout_ms, bool)
                or not isinstance(timeout_ms, int | float)
                or not math.isfinite(timeout_ms)
                or timeout_ms < 0
            ):
                raise ToolError("invalid arguments: timeout_ms must be a number of milliseconds")
            seconds = min(seconds, timeout_ms / 1000)

        async def run() -> ToolOutput:
            job = self._jobs.get(job_id)
            if wait:
                await self._jobs.wait(job, seconds)
            return ToolOutput(self._jobs.output(job))

        return Invocation(Access("read"), job_id + (" (waiting)" if wait else ""), run)


class JobListTool:
    """``job_list {}``."""

    def __init__(self, jobs: JobTable) -> None:
        self._jobs = jobs

    @property
    def spec(self) -> ToolSpec:
        return specs.JOB_LIST

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return "background jobs"

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        if arguments:
            raise ToolError(f"invalid arguments: job_list takes none, not {sorted(arguments)[0]!r}")

        async def run() -> ToolOutput:
            return ToolOutput(self._jobs.listing(seen=True))

        return Invocation(Access("read"), "background jobs", run)


class JobKillTool:
    """``job_kill {job_id, reason?}``."""

    def __init__(self, jobs: JobTable) -> None:
        self._jobs = jobs

    @property
    def spec(self) -> ToolSpec:
        return specs.JOB_KILL

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("job_id", ""))

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        job_id = _job_id(arguments, {"job_id", "reason"})
        reason = arguments.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ToolError("invalid arguments: reason must be a string")
        said = " ".join((reason or "").split())[:200]

        async def run() -> ToolOutput:
            job = self._jobs.get(job_id)
            if not job.running:
                return ToolOutput(f"{job_id} had ended already.\n{self._jobs.output(job)}")
            await self._jobs.kill(job, f"job_kill: {said}" if said else "job_kill")
            return ToolOutput(self._jobs.output(job))

        return Invocation(Access("read"), job_id + (f": {said}" if said else ""), run)


def job_tools(jobs: JobTable) -> list[JobOutputTool | JobListTool | JobKillTool]:
    """The three tools over ``jobs``."""
    return [JobOutputTool(jobs), JobListTool(jobs), JobKillTool(jobs)]
