"""The offline demo: dsh against the bundled loopback stub server, no network, no key.

    python scripts/demo_repl.py          # the REPL on a terminal, one turn per line on a pipe
    python scripts/demo_repl.py --down   # point at a closed port to see the transport chain

Words in a message make the stub misbehave (the banner lists them). Sessions go to a temporary
``DSH_HOME`` unless one is set. Other flags are passed to dsh as they are.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from dsh_core.testing.stub_server import TRIGGERS, StubServer, closed_port
from dsh_stdio.__main__ import leave, main

DEMO_KEY = "demo-key-for-the-offline-stub"
"""The stub accepts any key; this one is not a secret."""


def _banner(base_url: str, home: str, own_home: bool) -> str:
    width = max(len(word) for word in TRIGGERS)
    lines = [f"  {word.ljust(width)}  {what}" for word, what in TRIGGERS.items()]
    return "\n".join(
        [
            f"dsh demo: stub server at {base_url}, sessions in {home}"
            + (" (removed when the demo ends)" if own_home else ""),
            "Type anything for an answer; a message with one of these words shows an outcome:",
            *lines,
            "Ctrl-C cancels a running turn.",
            "",
        ]
    )


def demo(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        sys.stdout.write("demo: --down points dsh at a closed port (the TRANSPORT chain).\n")
    down = "--down" in argv
    rest = [arg for arg in argv if arg != "--down"]
    own_home = not os.environ.get("DSH_HOME")
    home = tempfile.mkdtemp(prefix="dsh-demo-") if own_home else os.environ["DSH_HOME"]
    os.environ["DSH_HOME"] = home
    os.environ["DEEPSEEK_API_KEY"] = DEMO_KEY
    try:
        with StubServer() as server:
            base_url = f"http://127.0.0.1:{closed_port()}" if down else server.url
            os.environ["DEEPSEEK_BASE_URL"] = base_url
            sys.stderr.write(_banner(base_url, home, own_home))
            if down:
                sys.stderr.write("(--down: nothing listens there; every turn fails TRANSPORT)\n")
            sys.stderr.flush()
            return main(rest)
    finally:
        if own_home:
            shutil.rmtree(home, ignore_errors=True)  # a demo leaves nothing behind


if __name__ == "__main__":
    # As dsh itself leaves: no interpreter teardown, which could wait on the stdin thread.
    leave(demo(sys.argv[1:]))
