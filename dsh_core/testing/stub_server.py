"""The stub server's command line: ``python -m dsh_core.testing.stub_server [--port N]``.

A real OpenAI-compatible ``POST /chat/completions`` server on loopback, to fail on demand. Tests
queue behaviours; the demo triggers them with words in the prompt (:data:`TRIGGERS`)::

    with StubServer() as server:
        server.enqueue(HttpError(503, "Server overloaded"), Answer("hello"))
        adapter = DeepSeekAdapter(base_url=server.url, api_key="sk-test")
        ...
        assert len(server.requests) == 2

With the queue empty, a trigger word in the last user message picks the behaviour; else the
answer is ``You said: <last user message>``, streamed in small chunks with usage. A message that
merely extends an earlier one (the agent loop joins a failed turn's message to the next with a
blank line) counts only for what it adds. Every request is first checked against DeepSeek's
tool-call rules (a 400 with DeepSeek's text otherwise).

Tests import it from :mod:`dsh_core.testing`. Where each part lives: :mod:`.behaviours` (what
an answer can be), :mod:`.triggers` (words to behaviours), :mod:`.validation` (the 400 rules),
:mod:`.server` (sockets, HTTP, dispatch), :mod:`.responder` (bytes on the wire).

``python -m dsh_core.testing.stub_server [--port N]`` serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from ..chain import error_chain
from .server import StubServer
from .triggers import TRIGGERS

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C, printing the URL and the trigger words."""
    parser = argparse.ArgumentParser(
        prog="python -m dsh_core.testing.stub_server",
        description="A loopback DeepSeek stand-in that fails on demand.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
    parser.add_argument(
        "--long-deltas",
        type=int,
        default=20_000,
        metavar="N",
        help="deltas in the answer to a prompt with the word 'long' (default: 20000)",
    )
    parser.add_argument(
        "--long-chunk-events",
        type=int,
        default=256,
        metavar="N",
        help="server-sent events per HTTP chunk in that answer (default: 256)",
    )
    parser.add_argument(
        "--long-delta-words",
        type=int,
        default=1,
        metavar="N",
        help="words in each delta of that answer (default: 1)",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        metavar="N",
        help="refuse a request over N tokens (prompt and max_tokens), in DeepSeek's words",
    )
    args = parser.parse_args(argv)
    server = StubServer(
        port=args.port,
        long_deltas=args.long_deltas,
        long_chunk_events=args.long_chunk_events,
        long_delta_words=args.long_delta_words,
        context_window=args.context_window,
    )
    try:
        server.start()
    except OSError as exc:  # a busy port, say: one line, not a traceback
        print(f"stub server: cannot listen: {error_chain(exc)}", file=sys.stderr)  # noqa: T201
        return 1
    try:
        # Ctrl-C is taken from before the banner: whoever waits for it may interrupt at once.
        with contextlib.suppress(KeyboardInterrupt):
            print(f"stub server listening on {server.url}", flush=True)  # noqa: T201
            print("trigger words (in the last user message):", flush=True)  # noqa: T201
            width = max(len(word) for word in TRIGGERS)
            for word, description in TRIGGERS.items():
                print(f"  {word:<{width}}  {description}", flush=True)  # noqa: T201
            while True:
                time.sleep(3600)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
