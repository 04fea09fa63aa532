"""``dsh`` and ``python -m dsh_stdio``: pick the mode, run it, exit with its status.

stdin and stdout both terminals -> the prompt_toolkit REPL; otherwise one turn per input line;
arguments -> one turn (one-shot). prompt_toolkit is imported only for the REPL.
"""

from __future__ import annotations

import signal

# Until main() runs, Ctrl-C ends the process as the signal itself (status 130 in a shell)
# instead of raising KeyboardInterrupt in the middle of an import, with a traceback.
signal.signal(signal.SIGINT, signal.SIG_DFL)

import asyncio
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from dsh_core.chain import error_chain
from dsh_core.errors import HarnessError
from dsh_core.loop import DEFAULT_INPUT_LIMIT

from .config import Config, StartupError, parse_config
from .pipe import Overlong, read_piped_stdin, run_one_shot, run_pipe
from .render import neutralise
from .status import EXIT_INTERNAL, EXIT_USAGE
from .tty import STDIN

__all__ = ["leave", "main", "run"]


def _startup_failed(exc: BaseException) -> int:
    if sys.stderr is not None:
        sys.stderr.write(f"dsh: startup failed: {neutralise(error_chain(exc))}\n")
    return EXIT_USAGE


def _fill_closed_descriptors() -> None:
    """Give a closed stdin or stderr /dev/null, as daemons do.

    Otherwise the next file dsh opens (the runtime log) would become descriptor 0 or 2, and
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


async def _run(config: Config, terminal: bool, piped: str | Overlong | None) -> int:
    from .runtime import Runtime

    out, err = sys.stdout, sys.stderr
    try:
        runtime = Runtime.open(config, out=out, err=err)
    except (HarnessError, OSError) as exc:
        return _startup_failed(exc)
    try:
        if terminal:
            from .repl import run_repl

            try:
                return await run_repl(runtime, out)
            except StartupError as exc:  # the history file cannot be used
                return _startup_failed(exc)
        if config.question is not None:
            return await run_one_shot(runtime, config.question, piped, out)
        return await run_pipe(runtime, STDIN, out)
    finally:
        await runtime.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run dsh; the process exits with the returned status."""
    _fill_closed_descriptors()
    try:
        config = parse_config(sys.argv[1:] if argv is None else argv)
    except StartupError as exc:
        return _startup_failed(exc)
    if sys.stdout is None:
        return _startup_failed(StartupError("standard output is closed: answers would be lost"))
    terminal = os.isatty(STDIN) and sys.stdout.isatty()
    if not terminal:
        # Like cat: a reader that went away ends us quietly. Every durable line is already
        # on disk, and the next load closes the open turn as interrupted.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # From here on Ctrl-C is ours: KeyboardInterrupt until asyncio.run installs its handler,
    # then the modes install theirs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        piped = None
        if config.question is not None:
            piped = read_piped_stdin(STDIN, DEFAULT_INPUT_LIMIT)
        run_session = _run(config, terminal and config.question is None, piped)
        try:
            return asyncio.run(run_session)
        finally:
            # If Ctrl-C came before asyncio.run started it, close it quietly: otherwise
            # Python warns, at exit, that a coroutine was never awaited.
            run_session.close()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one clear line, never a traceback
        sys.stderr.write(f"dsh: internal error: {error_chain(exc)}\n")
        return EXIT_INTERNAL


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``dsh`` entry point: run, then :func:`leave` with the status."""
    leave(main(argv))


def leave(status: int) -> NoReturn:
    """Flush stdout and stderr, then exit without interpreter teardown.

    Teardown costs about 40 ms and does nothing for us: the runtime log is closed and every
    durable line fsynced before ``main`` returns. It could also hang on the stdin thread.
    """
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # a closed pipe has nowhere to go
                stream.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
