"""The offline demo: dsh against the bundled loopback stub server, no network, no key.

    python scripts/demo_repl.py          # the REPL on a terminal, one turn per line on a pipe
    python scripts/demo_repl.py --down   # point at a closed port to see the transport chain

Words in a message make the stub misbehave (the banner lists them). Sessions go to a temporary
``DSH_HOME`` unless one is set. Other flags are passed to dsh as they are.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile

from dsh_core.stub_server import TRIGGERS, StubServer
from dsh_stdio.__main__ import main

DEMO_KEY = "demo-key-for-the-offline-stub"
"""The stub accepts any key; this one is not a secret."""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _banner(base_url: str, home: str) -> str:
    width = max(len(word) for word in TRIGGERS)
    lines = [f"  {word.ljust(width)}  {what}" for word, what in TRIGGERS.items()]
    return "\n".join(
        [
            f"dsh demo: stub server at {base_url}, sessions in {home}",
            "Type anything for an answer; a message with one of these words shows an outcome:",
            *lines,
            "Ctrl-C cancels a running turn; Ctrl-D or /exit leaves.",
            "",
        ]
    )


def demo(argv: list[str]) -> int:
    down = "--down" in argv
    rest = [arg for arg in argv if arg != "--down"]
    home = os.environ.get("DSH_HOME") or tempfile.mkdtemp(prefix="dsh-demo-")
    os.environ["DSH_HOME"] = home
    os.environ["DEEPSEEK_API_KEY"] = DEMO_KEY
    with StubServer() as server:
        base_url = f"http://127.0.0.1:{_closed_port()}" if down else server.url
        os.environ["DEEPSEEK_BASE_URL"] = base_url
        sys.stderr.write(_banner(base_url, home))
        if down:
            sys.stderr.write("(--down: nothing listens there; every turn fails with TRANSPORT)\n")
        sys.stderr.flush()
        return main(rest)


if __name__ == "__main__":
    sys.exit(demo(sys.argv[1:]))
