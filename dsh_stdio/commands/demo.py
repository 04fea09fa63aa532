"""``dsh --demo``: dsh against the bundled loopback stub server; offline, no key.

    dsh --demo                     # the REPL on a terminal, one turn per line on a pipe
    dsh --demo --down              # point at a closed port: every turn fails TRANSPORT
    dsh --demo --long-deltas 1000  # the answer to 'long' has this many deltas

Words in a message make the stub misbehave or ask for tools (the banner lists them). The demo
runs in a fresh temporary directory holding ``demo.txt`` (the tool triggers read and edit it),
with sessions in a temporary ``DSH_HOME`` unless one is set; both are removed when it ends.
Other flags are passed to dsh as they are.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..tty import Streams

__all__ = ["DEMO_FILE_TEXT", "DEMO_KEY", "run_demo"]

DEMO_KEY = "demo-key-for-the-offline-stub"
"""The stub accepts any key; this one is not a secret."""

DEMO_FILE_TEXT = "Hello from the dsh demo.\nThis file lives in a temporary directory.\n"
"""``demo.txt``, which the tool triggers read and edit."""

_USAGE = """\
usage: dsh --demo [--down] [--long-deltas N] [dsh flags...]

  --down            point dsh at a closed port (the TRANSPORT cause chain)
  --long-deltas N   deltas in the answer to a message with the word 'long' (default 20000)
"""


def _banner(base_url: str, home: str, workdir: str) -> str:
    from dsh_core.testing import TRIGGERS

    width = max(len(word) for word in TRIGGERS)
    lines = [f"  {word.ljust(width)}  {what}" for word, what in TRIGGERS.items()]
    return "\n".join(
        [
            f"dsh demo: stub server at {base_url}",
            f"  working directory {workdir} (holds demo.txt), sessions in {home}",
            "Type anything for an answer; a message with one of these words shows an outcome:",
            *lines,
            "Tools ask before they change anything; Ctrl-C cancels a running turn.",
            "",
        ]
    )


def _options(argv: Sequence[str]) -> tuple[bool, int, list[str]] | str:
    """(--down, --long-deltas, the rest), or what is wrong with them."""
    down, deltas, rest = False, 20_000, []
    items = iter(argv)
    for arg in items:
        if arg == "--down":
            down = True
        elif arg == "--long-deltas" or arg.startswith("--long-deltas="):
            value = arg.partition("=")[2] if "=" in arg else next(items, "")
            if not (value.isascii() and value.isdigit() and int(value) > 0):
                return f"--long-deltas needs a positive whole number, not {value!r}"
            deltas = int(value)
        else:
            rest.append(arg)
    return down, deltas, rest


def run_demo(argv: Sequence[str], main: Callable[[Sequence[str]], int], streams: Streams) -> int:
    """Start the stub, point ``main`` (dsh itself, on ``streams``) at it, and clean up afterwards.

    ``main`` should not offer the session for resuming: its working directory (and, unless
    ``DSH_HOME`` was set, the session itself) is removed when the demo ends.
    """
    err = streams.err
    if {"-h", "--help"} & set(argv):
        streams.out.write(_USAGE)
        return 0
    from ..render import neutralise

    parsed = _options(argv)
    if isinstance(parsed, str):
        err.write(f"dsh: startup failed: {neutralise(parsed)} (see dsh --demo --help)\n")
        return 2
    down, deltas, rest = parsed
    from dsh_core.chain import error_chain

    from ..config import StartupError, parse_config

    try:  # dsh's own flags, checked before a server starts and the banner is printed
        parse_config(rest, {**os.environ, "DEEPSEEK_BASE_URL": "http://127.0.0.1"})
    except StartupError as exc:
        err.write(f"dsh: startup failed: {neutralise(error_chain(exc))}\n")
        return 2
    from dsh_core.testing import StubServer, closed_port

    own_home = not os.environ.get("DSH_HOME")
    made: list[str] = []
    try:
        home = tempfile.mkdtemp(prefix="dsh-demo-home-") if own_home else os.environ["DSH_HOME"]
        made += [home] if own_home else []
        workdir = tempfile.mkdtemp(prefix="dsh-demo-")
        made.append(workdir)
        with open(os.path.join(workdir, "demo.txt"), "w", encoding="utf-8") as file:
            file.write(DEMO_FILE_TEXT)
        previous = os.getcwd()
        server = StubServer(long_deltas=deltas)
        server.start()
    except OSError as exc:  # no temporary directory, no port: one line, not a traceback
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        chain = neutralise(error_chain(exc))
        err.write(f"dsh: startup failed: the demo cannot start: {chain}\n")
        return 2
    os.environ["DSH_HOME"] = home
    os.environ["DEEPSEEK_API_KEY"] = DEMO_KEY
    try:
        base_url = f"http://127.0.0.1:{closed_port()}" if down else server.url
        os.environ["DEEPSEEK_BASE_URL"] = base_url
        os.chdir(workdir)
        err.write(neutralise(_banner(base_url, home, workdir)))  # DSH_HOME is anything
        if down:
            err.write("(--down: nothing listens there; every turn fails TRANSPORT)\n")
        err.flush()
        status = main(rest)
        removed = "directory and sessions are" if own_home else "directory is"
        with contextlib.suppress(OSError, ValueError):
            err.write(f"dsh demo: over; its temporary {removed} removed\n")
        return status
    finally:
        server.stop()
        os.chdir(previous)
        shutil.rmtree(workdir, ignore_errors=True)  # a demo leaves nothing behind
        if own_home:
            shutil.rmtree(home, ignore_errors=True)
