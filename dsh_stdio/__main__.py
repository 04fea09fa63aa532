"""``dsh`` and ``python -m dsh_stdio``: pick the mode, run it, exit with its status.

stdin and stdout both terminals -> the prompt_toolkit REPL; otherwise one turn per input line;
arguments -> one turn (one-shot). prompt_toolkit is imported only for the REPL and for an
approval question a one-shot run at a terminal asks.

:func:`main` runs on the process's own streams; a test passes its own (:class:`Streams`) and a
clock, and drives the same code in-process (``tests/harness.py``).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # `python -m dsh_stdio` put the working directory first on sys.path: a `signal.py`,
    # `httpx.py` or `dsh_core/` planted there would be imported instead of ours and run with the
    # key (SPEC 10.1). Dropped before any other import (`os` is loaded already, by the start-up).
    import os

    try:
        _cwd = os.path.realpath(os.getcwd())
    except OSError:  # the working directory is gone: nothing can be planted in it
        _cwd = ""
    sys.path[:] = [entry for entry in sys.path if entry and os.path.realpath(entry) != _cwd]

# httpx imports its command-line interface (click, pygments, rich) whenever they are installed,
# and mcp's server half brings click: 15-25 ms of every start for code dsh never runs. An
# entry of None makes that import fail, which httpx takes as "no CLI" (before httpx loads).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import signal

# Until main() runs, Ctrl-C ends the process as the signal itself (status 130 in a shell)
# instead of raising KeyboardInterrupt in the middle of an import, with a traceback.
signal.signal(signal.SIGINT, signal.SIG_DFL)

import asyncio
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from dsh_core.agent.compaction import REPL_WINDOW_ADVICE
from dsh_core.agent.loop import DEFAULT_INPUT_LIMIT, Conversation
from dsh_core.chain import error_chain
from dsh_core.clock import LOOP_CLOCK, Clock
from dsh_core.errors import HarnessError, UsageError
from dsh_core.model.seam import ToolCall

from .config import Config, StartupError, parse_config, with_servers
from .pipe import PIPE_WINDOW_ADVICE, Overlong, read_piped_stdin, run_one_shot, run_pipe
from .render import neutralise
from .run.spending import run_result, run_status, startup_result
from .status import EXIT_INTERNAL, EXIT_USAGE
from .tty import Streams

__all__ = ["leave", "main", "run"]


def _startup_failed(exc: BaseException, err: TextIO | None, json_out: TextIO | None = None) -> int:
    """``dsh: startup failed: <chain>``, exit status 2; with ``--json`` (``json_out``, stdout)
    the run's one ``result`` line says it too (SPEC 15: MISSING_CREDENTIAL included)."""
    if err is not None:
        err.write(f"dsh: startup failed: {neutralise(error_chain(exc))}\n")
    if json_out is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed stdout has nowhere to go
            json_out.write(startup_result(exc))
            json_out.flush()
    return EXIT_USAGE


def _fill_closed_descriptors() -> None:
    """Give a closed stdin or stderr /dev/null, as daemons do.

    Otherwise the next file dsh opens (the session log) would become descriptor 0 or 2, and
    input would be read from it, or errors written into it.
    """
    for fd, stream in ((0, sys.stdin), (2, sys.stderr)):
        if stream is None:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - lives as long as the process


async def _run(
    config: Config,
    terminal: bool,
    piped: str | Overlong | None,
    streams: Streams,
    clock: Clock,
    *,
    name_session: bool,
) -> int:
    from .run.runtime import Runtime

    out, err = streams.out, streams.err
    json_out = out if config.json else None
    try:
        runtime = await Runtime.open(
            config,
            out=out,
            err=err,
            terminal=out.isatty(),
            stdin=streams.stdin,
            clock=clock,
            window_advice=REPL_WINDOW_ADVICE if terminal else PIPE_WINDOW_ADVICE,
        )
    except (HarnessError, OSError) as exc:
        return _startup_failed(exc, err, json_out)
    status = EXIT_INTERNAL  # unless the mode returns one
    try:
        if terminal:
            from .terminal.repl import run_repl

            try:
                status = await run_repl(runtime, out)
            except StartupError as exc:  # the history file cannot be used
                status = _startup_failed(exc, err)
        elif config.question is not None:
            status = await run_one_shot(runtime, config.question, piped, out)
        else:
            status = await run_pipe(runtime, streams.stdin, out)
        status = run_status(status, runtime.tally)
        return status
    finally:
        session_id = runtime.conversation.log.id
        if await runtime.close() and name_session and not config.quiet:
            # Say which session this was, so that it can be found again.
            named = f"dsh: session {session_id} (dsh -r {session_id} to resume)\n"
            with contextlib.suppress(OSError, ValueError):
                (out if terminal else err).write(named)
        if runtime.json_view is not None:  # the last line of every --json run (SPEC 15)
            runtime.json_view.result(run_result(runtime, status))


def _stored(config: Config, streams: Streams) -> int:
    """``--sessions``, ``--show`` and ``--changes``: read the store, write nothing to it;
    ``--undo``: a session's last change to files taken back, without a model."""
    from dsh_core.extensions.skills import SkillCatalog, SkillTool
    from dsh_core.extensions.subagent import SubagentTool
    from dsh_core.tools import Toolbox, Workspace, builtin_tools

    from .commands.sessions import list_sessions, show_session

    out, err = streams.out, streams.err
    terminal = out.isatty()
    if config.action == "undo":  # it writes: files, and the session log
        from .commands.undo import undo_session

        return undo_session(config, out, err)
    if not terminal:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `dsh --show last | head` ends quietly
    if config.action == "sessions":
        return list_sessions(config, out, terminal=terminal, err=err)
    if config.action == "changes":
        from .commands.undo import print_changes

        return print_changes(config, out, err, terminal=terminal)
    assert config.show is not None
    # Tool lines as the live transcript showed them: each call summarised by its tool.
    workspace = Workspace.at(Path.cwd(), output_dir=config.home)  # describe() writes nothing
    # Only describe() is used: these run nothing here.
    subagent = SubagentTool(_no_child, config.home)
    tools = [*builtin_tools(workspace), SkillTool(SkillCatalog(), workspace), subagent]
    describe = Toolbox(tools).describe
    return show_session(config, config.show, out, terminal=terminal, err=err, describe=describe)


def _no_child(call: ToolCall) -> Conversation:
    raise UsageError("--show and --sessions run no subagent")


def _scrub_the_key_at_start() -> None:
    """The key out of ``/proc/<dsh>/environ`` (SPEC 10.5): the variables a command is not
    given (the key, and any holding its value) are overwritten in the block dsh started with;
    ``os.environ`` keeps them for dsh."""
    from dsh_core.trust.startenv import scrub_start_environment
    from dsh_core.trust.workspace import child_environment

    given = child_environment(os.environ)
    scrub_start_environment([name for name in os.environ if name not in given])


def main(
    argv: Sequence[str] | None = None,
    *,
    name_session: bool = True,
    streams: Streams | None = None,
    clock: Clock = LOOP_CLOCK,
) -> int:
    """Run dsh; the process exits with the returned status.

    ``name_session=False`` (the demo, which deletes its sessions and directory when it ends)
    does not offer to resume the session. ``streams``: where to read and write instead of the
    process's own; ``clock``: the model's time (its timeouts and retry waits).
    """
    if streams is None:  # the process's own: what it was started with is dsh's to tidy
        _fill_closed_descriptors()
        _scrub_the_key_at_start()
        if sys.stdout is None:
            return _startup_failed(
                StartupError("standard output is closed: answers would be lost"), sys.stderr
            )
        streams = Streams.of_process()
    err = streams.err
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "--demo" in arguments:
        from .commands.demo import run_demo

        def dsh(rest: Sequence[str]) -> int:
            return main(rest, name_session=False, streams=streams, clock=clock)

        return run_demo([a for a in arguments if a != "--demo"], dsh, streams)
    try:
        config = parse_config(arguments)
    except StartupError as exc:  # a bad value of --json's own run still ends in its result
        return _startup_failed(exc, err, streams.out if "--json" in arguments else None)
    terminal = os.isatty(streams.stdin) and streams.out.isatty()
    if config.action != "chat":
        try:
            return _stored(config, streams)
        except (HarnessError, OSError) as exc:
            return _startup_failed(exc, err)
    try:
        config = with_servers(config)
    except HarnessError as exc:
        return _startup_failed(exc, err, streams.out if config.json else None)
    if config.json and terminal and config.question is None:
        return _startup_failed(
            StartupError('--json is for pipes and one-shot runs: dsh --json "question"'), err
        )
    # From here on Ctrl-C is ours: KeyboardInterrupt until asyncio.run installs its handler,
    # then the modes install theirs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        piped = None
        if config.question is not None:
            piped = read_piped_stdin(streams.stdin, DEFAULT_INPUT_LIMIT)
        # SIGPIPE stays ignored (Python's default): a reader that went away (`dsh | head`)
        # is a failed write, which ends the turn as aborted, "output closed", in the log.
        repl = terminal and config.question is None
        run_session = _run(config, repl, piped, streams, clock, name_session=name_session)
        try:
            return asyncio.run(run_session)
        finally:
            # If Ctrl-C came before asyncio.run started it, close it quietly: otherwise
            # Python warns, at exit, that a coroutine was never awaited.
            run_session.close()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one clear line, never a traceback
        err.write(f"dsh: internal error: {neutralise(error_chain(exc))}\n")
        return EXIT_INTERNAL


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``dsh`` entry point: run, then :func:`leave` with the status."""
    leave(main(argv))


def leave(status: int) -> NoReturn:
    """Flush stdout and stderr, then exit without interpreter teardown.

    Teardown costs about 40 ms and does nothing for us: the session log is closed and every
    durable line fsynced before ``main`` returns. It could also hang on the stdin thread.
    """
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # a closed pipe has nowhere to go
                stream.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
