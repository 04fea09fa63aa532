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

from .config import Config, StartupError, parse_config

__all__ = ["main", "run"]

EXIT_USAGE = 2
EXIT_INTERNAL = 1


def _startup_failed(exc: BaseException) -> int:
    sys.stderr.write(f"dsh: startup failed: {error_chain(exc)}\n")
    return EXIT_USAGE


async def _run(config: Config) -> int:
    # Imported here so that a bad flag or a missing key answers before httpx is loaded.
    from .app import Session, stdio_is_terminal

    terminal = config.question is None and stdio_is_terminal()
    out, err = sys.stdout, sys.stderr
    try:
        session = Session.open(config, out=out, err=err)
    except (HarnessError, OSError) as exc:
        return _startup_failed(exc)
    try:
        if terminal:
            from .repl import run_repl

            return await run_repl(session, out, err)
        from .pipe import read_piped_stdin, run_one_shot, run_pipe

        if config.question is not None:
            piped = read_piped_stdin(sys.stdin.buffer)
            return await run_one_shot(session, config.question, piped, out, err)
        return await run_pipe(session, sys.stdin.buffer, out, err)
    finally:
        await session.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run dsh; the process exits with the returned status."""
    try:
        config = parse_config(sys.argv[1:] if argv is None else argv)
    except StartupError as exc:
        return _startup_failed(exc)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Like cat: a reader that went away ends us quietly. Every durable line is already
        # on disk, and the next load closes the open turn as interrupted.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # From here on Ctrl-C is ours: asyncio.run installs its handler over the default one,
    # and the modes install theirs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return asyncio.run(_run(config))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one clear line, never a traceback
        sys.stderr.write(f"dsh: internal error: {error_chain(exc)}\n")
        return EXIT_INTERNAL


def run() -> NoReturn:
    """The ``dsh`` entry point: flush, then leave without interpreter teardown.

    Teardown costs about 40 ms and does nothing for us: the session log is closed and every
    durable line fsynced before ``main`` returns.
    """
    status = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe has nothing to flush to
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
