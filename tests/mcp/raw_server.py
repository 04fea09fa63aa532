"""An MCP server spoken by hand (no SDK), for faults no real server shows: ``raw_server.py MODE``.

Modes:

- ``noise``: writes a line that is not JSON-RPC on stdout (a stray ``print``) at start and
  before each answer, escape sequences in it; its ``hello`` answers.
- ``deep``: ``deep`` answers with a result nested 300 levels deep, which the SDK's models do
  not take (and so never hand to the waiting call); ``hello`` answers.
- ``silent``: ``hang`` never answers; ``hello`` answers.

Every mode answers ``initialize`` and ``tools/list``, and leaves at the end of its input.
With ``--sse FILE``: streamable HTTP on a loopback port (written to FILE), each answer an SSE
stream that opens with an event of a hostile name.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "noise"
NOISE = "debug: starting up \x1b]52;c;cHduZWQ=\x07\x1b[2J"
EVIL = "evil\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J"
TOOLS = {"noise": ["hello"], "deep": ["hello", "deep"], "silent": ["hello", "hang"]}[MODE]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(words: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": words}], "isError": False}


def reply(request: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to one request; None for a notification or a call never answered."""
    method = request.get("method")
    if "id" not in request:
        return None
    result: object
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": f"raw-{MODE}", "version": "1"},
        }
    elif method == "tools/list":
        tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}} for n in TOOLS]
        result = {"tools": tools}
    elif method == "tools/call":
        name = request["params"]["name"]
        if name == "hang":
            return None
        if name == "deep":
            nested: object = "bottom"
            for _ in range(300):
                nested = [nested]
            result = {"content": [], "structuredContent": {"deep": nested}}
        else:
            result = text(f"hello from {MODE}")
    else:
        error = {"code": -32601, "message": "no such method"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    if MODE == "noise":
        print(NOISE, flush=True)
    for line in sys.stdin:
        answer = reply(json.loads(line))
        if answer is not None:
            if MODE == "noise":
                print(NOISE, flush=True)
            send(answer)


def serve_sse(port_file: str) -> None:
    """Streamable HTTP by hand: each answer an SSE stream whose first event has a name no
    client knows, escape sequences in it (the SDK logs it: "Unknown SSE event: <name>")."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = reply(request)
            if answer is None:
                self.send_response(202)
                self.end_headers()
                return
            data = f"event: {EVIL}\ndata: x\n\nevent: message\ndata: {json.dumps(answer)}\n\n"
            body = data.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as file:
        file.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    if "--sse" in sys.argv:
        serve_sse(sys.argv[sys.argv.index("--sse") + 1])
    else:
        main()
