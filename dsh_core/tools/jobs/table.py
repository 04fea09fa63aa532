"""A session's background jobs: commands that outlive their call, never the session (SPEC 16).

    jobs = JobTable(log, output_dir)                      # one per session
    job = await jobs.start("npm run dev", launch, cwd=root, env=environment)   # bash-1
    jobs.output("bash-1")          # what it wrote since the last read, and [status: ...]
    await jobs.kill("bash-1")      # SIGINT, SIGTERM at 2 s, SIGKILL at 5 s; waits for the end
    jobs.notes(turn)               # job/end records for the jobs that ended unseen: the loop
                                   # writes them before a request, and the model hears of it
    await jobs.close()             # the session ends: every job ends, at once

Each job is a :func:`~dsh_core.tools.process.run_child` in a task of its own: the same process
group, escalation, pipe reading and reaping as a foreground command, with no timeout unless the
call gave one. Its launch (the sandbox's mounts, or the supervisor that ends an unsandboxed
command with dsh, :mod:`.supervise`) is held open until it ends. Its output goes, masked, to a
0600 file beside the session log, ``job-<id>.txt``, at most
:data:`~dsh_core.tools.process.SAVED_OUTPUT_LIMIT` bytes (then it is said that the rest was not
kept); ``job_output`` reads on from where the last read stopped.

At most :data:`~dsh_core.tools.specs.MAX_JOBS_RUNNING` run at once: one more is an ``Error:``.
``job/start`` is written when a job starts; a resumed session's jobs that never got their
``job/end`` ended with the dsh that ran them, and the model is told so (``lost``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ...errors import TOOL_FAILED
from ...masking import StreamMasker
from ...session import SessionLog
from ...session.events import JobEnded, JobStarted
from ..base import ToolError
from ..specs import MAX_JOBS_RUNNING, OUTPUT_LIMIT, SAVED_OUTPUT_LIMIT

if TYPE_CHECKING:  # running a command loads with the first job: a session makes its table at once
    from ...session.events import Record
    from ...trust.launchers import Launch
    from ..process import Completion, Timings

__all__ = ["NO_TIME_LIMIT", "Job", "JobStatus", "JobTable"]

JobStatus = Literal["running", "exited", "killed", "timed-out", "failed", "lost"]
"""Running; ended by itself; stopped (job_kill, the session's end); past its timeout; could
not run; or ended with the dsh that ran it (found on resume)."""

NO_TIME_LIMIT = 10.0**9
"""A job runs until it ends, is killed, or the session ends (about 30 years, for asyncio)."""
_CLOSE_GRACE_S = 1.0
"""How long the session's end waits for jobs to stop after SIGINT before ending them at once."""


class _Output:
    """A job's output, masked, into its file (0600), up to the cap."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._masker = StreamMasker()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.size = 0
        """Bytes in the file."""
        self.full = False
        """The file stopped at the cap: the output went on past it."""

    def feed(self, data: bytes) -> None:
        self._write(self._masker.feed(self._decoder.decode(data)))

    def close(self) -> None:
        self._write(self._masker.feed(self._decoder.decode(b"", final=True)) + self._masker.flush())
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, text: str) -> None:
        if not text or self._fd is None:
            return
        data = text.encode("utf-8", "surrogatepass")
        room = SAVED_OUTPUT_LIMIT - self.size
        if len(data) > room:
            data = data[:room].decode("utf-8", "ignore").encode("utf-8")
            self.full = True
        try:
            os.write(self._fd, data)
            self.size += len(data)
        except OSError:
            self.full = True  # a full disk: what was written stays, and the read says so
        if self.full:
            os.close(self._fd)
            self._fd = None


@dataclass
class Job:
    """One background command."""

    id: str
    command: str
    output_path: Path
    started: float = field(default_factory=time.monotonic)
    status: JobStatus = "running"
    exit_code: int | None = None
    """How it exited: the shell's status, 128 + N for a signal N."""
    detail: str = ""
    """How it ended, in words: ``exit code 1``, ``killed by SIGINT (job_kill: stuck)``."""
    ended: float | None = None
    read: int = 0
    """Bytes of its output the model has read."""
    reported: bool = False
    """The model has seen how it ended (a read, a kill, a notice): no notice is due."""
    notes: tuple[str, ...] = ()
    """What the sandbox undid after it (a placeholder removed, a git directory set aside)."""
    _output: _Output | None = None
    _task: asyncio.Task[None] | None = None
    _pid: int | None = None
    _end_now: str = "SIGKILL"
    """What ends it at once: SIGKILL to its group, or SIGUSR1 to its supervisor."""
    _kill_reason: str | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def seconds(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    @property
    def size(self) -> int:
        """Bytes it wrote (masked), as its file holds them."""
        if self._output is not None:
            return self._output.size
        try:
            return self.output_path.stat().st_size
        except OSError:
            return 0

    def state(self) -> str:
        """``running``, or how it ended: ``exited 0``, ``killed by SIGINT``, ..."""
        return "running" if self.running else self.detail or self.status


class JobTable:
    """The background jobs of one session, logged in ``log``, their output in ``output_dir``."""

    def __init__(
        self, log: SessionLog, output_dir: Path, *, timings: Timings | None = None
    ) -> None:
        self._log = log
        self._output_dir = output_dir
        self.timings = timings
        """How a job is stopped (job_kill); tests shorten it."""
        self._jobs: dict[str, Job] = {}
        self._number = 0
        self._recover(log)

    def _recover(self, log: SessionLog) -> None:
        """The jobs an earlier dsh started in this session: ended with it, unless logged."""
        started: dict[str, JobStarted] = {}
        ended: set[str] = set()
        for event in log.events:
            record = event.record
            if isinstance(record, JobStarted):
                started[record.job_id] = record
            elif isinstance(record, JobEnded):
                ended.add(record.job_id)
        for job_id, record in started.items():
            number = job_id.rpartition("-")[2]
            if number.isdigit():
                self._number = max(self._number, int(number))
            job = Job(job_id, record.command, Path(record.output_file), status="lost")
            job.detail = "ended with the dsh that ran it"
            job.reported = job_id in ended
            job.ended = job.started
            self._jobs[job_id] = job

    # -- starting --------------------------------------------------------------------------

    async def start(
        self,
        command: str,
        launch: contextlib.AbstractContextManager[Launch],
        *,
        cwd: Path,
        env: Mapping[str, str],
        time_limit: float = NO_TIME_LIMIT,
        supervised: bool = False,
    ) -> Job:
        """Start ``command`` as its ``launch`` says; return once it runs (ToolError if it
        cannot start, or when too many run). ``supervised``: the launch runs it under
        :mod:`.supervise`, which SIGUSR1 ends at once."""
        running = sum(1 for job in self._jobs.values() if job.running)
        if running >= MAX_JOBS_RUNNING:
            raise ToolError(
                f"{running} background jobs are running, the most one session runs: stop one "
                "with job_kill (job_list lists them), or wait for one to end"
            )
        turn = self._log.open_turn()
        if turn is None:
            raise ToolError("a background job starts only as a call of a turn")
        self._number += 1
        job_id = f"bash-{self._number}"
        job = Job(job_id, command, self._output_dir / f"job-{job_id}.txt")
        job._end_now = "SIGUSR1" if supervised else "SIGKILL"
        try:
            job._output = _Output(job.output_path)
        except OSError as exc:
            raise ToolError(f"cannot create the output file {job.output_path}") from exc
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        job._task = asyncio.create_task(
            self._run(job, launch, cwd, env, time_limit, started), name=f"dsh-{job_id}"
        )
        try:
            await asyncio.wait((started, job._task), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            job._task.cancel()  # cancelled as it started: it must not live on unseen
            raise
        if not started.done():  # it could not start: its task says why
            exception = job._task.exception() if not job._task.cancelled() else None
            raise ToolError(f"could not start the background command in {cwd}") from exception
        self._jobs[job_id] = job
        self._log.append(JobStarted(turn, job_id, command, str(job.output_path)), durable=True)
        return job

    async def _run(
        self,
        job: Job,
        launch_context: contextlib.AbstractContextManager[Launch],
        cwd: Path,
        env: Mapping[str, str],
        time_limit: float,
        started: asyncio.Future[None],
    ) -> None:
        from ..process import DEFAULT_TIMINGS, run_child

        output = job._output
        assert output is not None

        def running(pid: int) -> None:
            job._pid = pid
            started.set_result(None)

        completion: Completion | None = None
        try:
            with launch_context as launch:
                completion = await run_child(
                    launch.argv,
                    cwd=cwd,
                    env=env,
                    sink=output.feed,
                    time_limit=time_limit,
                    timings=self.timings or DEFAULT_TIMINGS,
                    pass_fds=launch.pass_fds,
                    signal_group=launch.signal_group,
                    on_start=running,
                )
            job.notes = tuple(launch.notes)
        finally:
            output.close()
            self._ended_as(job, completion)

    def _ended_as(self, job: Job, completion: Completion | None) -> None:
        from ..process import signal_name

        job.ended = time.monotonic()
        job._pid = None
        if completion is None:
            job.status, job.detail = "failed", "could not run"
        else:
            code = completion.returncode
            job.exit_code = code if code >= 0 else 128 - code
            sent = ", then ".join(signum.name for signum in completion.signals)
            if completion.ended == "cancelled":
                job.status = "killed"
                why = f" ({job._kill_reason})" if job._kill_reason else ""
                job.detail = f"killed{why}: sent {sent}" if sent else f"killed{why}"
            elif completion.ended == "timed-out":
                job.status, job.detail = "timed-out", f"timed out: sent {sent}"
            else:
                job.status = "exited"
                job.detail = f"exited {code}" if code >= 0 else f"killed by {signal_name(-code)}"

    # -- reading -----------------------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        """The job ``job_id``; ToolError naming the ones there are."""
        job = self._jobs.get(job_id.strip())
        if job is None:
            known = ", ".join(self._jobs) or "none yet"
            raise ToolError(
                f"no background job {job_id!r} in this session (its jobs: {known}); jobs end "
                "with the dsh that started them",
                TOOL_FAILED,
            )
        return job

    @property
    def jobs(self) -> list[Job]:
        """Every job of the session, in the order they started."""
        return list(self._jobs.values())

    async def wait(self, job: Job, seconds: float) -> None:
        """Until ``job`` ends, at most ``seconds``; cancellable (the job runs on)."""
        if not job.running or job._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(job._task), seconds)

    def output(self, job: Job) -> str:
        """What ``job`` wrote since the last read (the newest :data:`OUTPUT_LIMIT` characters
        of it), then ``[status: ...]``; marks the end as seen when it has ended."""
        size = job.size
        start = job.read
        skipped = 0
        budget = OUTPUT_LIMIT * 4  # bytes enough for OUTPUT_LIMIT characters of any script
        if size - start > budget:
            skipped, start = size - budget - start, size - budget
        try:
            with open(job.output_path, "rb") as file:
                file.seek(start)
                data = file.read(size - start)
        except OSError as exc:
            raise ToolError(f"cannot read {job.output_path}") from exc
        while data and skipped and (data[0] & 0xC0) == 0x80:  # onto a character's start
            data, skipped = data[1:], skipped + 1
        text = data.decode("utf-8", "replace")
        if len(text) > OUTPUT_LIMIT:
            skipped += len(text[:-OUTPUT_LIMIT].encode("utf-8", "surrogatepass"))
            text = text[-OUTPUT_LIMIT:]
        job.read = size
        parts = []
        if skipped:
            parts.append(
                f"[... {skipped:,} bytes since the last read skipped; all of the output is in "
                f"{job.output_path}]"
            )
        if text:
            parts.append(text if text.endswith("\n") else text + "\n")
        elif not skipped:
            parts.append("(no new output)\n")
        if job._output is not None and job._output.full:
            parts.append(f"[the output file stopped at {SAVED_OUTPUT_LIMIT // 2**20} MiB]\n")
        parts.append(f"[status: {self.status_line(job)}]")
        if not job.running:
            job.reported = True
        return "".join(parts)

    def status_line(self, job: Job) -> str:
        """``running 12 s``, ``exited 0 after 3 s``, ``killed (...) after 40 s``."""
        seconds = f"{job.seconds:.1f} s" if job.seconds < 10 else f"{job.seconds:.0f} s"
        if job.running:
            return f"running {seconds}"
        if job.status == "lost":
            return job.detail
        notes = "; ".join(job.notes)
        return f"{job.state()} after {seconds}" + (f"; {notes}" if notes else "")

    def listing(self, *, seen: bool = False) -> str:
        """One line per job: id, status, time, output, command (``/jobs``, ``job_list``);
        ``seen``: the model reads it, and learns how the ended ones ended."""
        if not self._jobs:
            return "no background jobs in this session"
        lines = []
        for job in self._jobs.values():
            command = " ".join(job.command.split())
            command = command if len(command) <= 80 else command[:77] + "..."
            lines.append(f"{job.id}  {self.status_line(job)}  {job.size:,} bytes  $ {command}")
            if seen and not job.running:
                job.reported = True
        return "\n".join(lines)

    # -- stopping ----------------------------------------------------------------------------

    async def kill(self, job: Job, reason: str = "") -> None:
        """Stop ``job`` with the escalation (SIGINT, SIGTERM at 2 s, SIGKILL at 5 s) and wait
        until it has ended; a second cancellation of the caller does not cut it short."""
        if not job.running or job._task is None:
            return
        job._kill_reason = reason or "job_kill"
        job._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(job._task)
        job.reported = True

    def notes(self, turn: int) -> Sequence[Record]:
        """``job/end`` for each job that ended (or was lost) and the model has not seen end."""
        due = [job for job in self._jobs.values() if not job.running and not job.reported]
        records: list[Record] = []
        for job in due:
            job.reported = True
            records.append(JobEnded(turn, job.id, job.status, _notice(job, self), job.exit_code))
        return records

    async def close(self) -> None:
        """End every running job (the session ends): SIGINT, and after a second whatever is
        left at once (SIGKILL to its group; its supervisor's sweep for an unsandboxed one)."""
        running = [job for job in self._jobs.values() if job.running and job._task is not None]
        if not running:
            return
        for job in running:
            job._kill_reason = "the session ended"
            assert job._task is not None
            job._task.cancel()
        tasks = [job._task for job in running if job._task is not None]
        _, pending = await asyncio.wait(tasks, timeout=_CLOSE_GRACE_S)
        for job in running:
            if job._task in pending and job._pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if job._end_now == "SIGUSR1":
                        os.kill(job._pid, signal.SIGUSR1)
                    else:
                        os.killpg(job._pid, signal.SIGKILL)
        if pending:
            await asyncio.wait(pending)


def _notice(job: Job, table: JobTable) -> str:
    """What the model is told of a job that ended: a user message in its next request."""
    unread = max(0, job.size - job.read)
    said = f"{unread:,} bytes of output not read yet" if unread else "its output all read"
    command = " ".join(job.command.split())
    command = command if len(command) <= 200 else command[:197] + "..."
    return (
        f"[dsh: background job {job.id} ($ {command}) {table.status_line(job)}; {said}; all of "
        f"its output is in {job.output_path}]"
    )
