"""An MCP server spoken by hand (no SDK), for faults no real server shows: ``raw_server.py MODE``.

Modes:

- ``noise``: writes a line that is not JSON-RPC on stdout (a stray ``print``) at start and
  before each answer, escape sequences in it; its ``hello`` answers.
- ``deep``: ``deep`` answers with a result nested 300 levels deep, which the SDK's models do
  not take (and so never hand to the waiting call); ``hello`` answers.
- ``silent``: ``hang`` never answers; ``hello`` answers.

Every mode answers ``initialize`` and ``tools/list``, and leaves at the end of its input.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "noise"
NOISE = "debug: starting up \x1b]52;c;cHduZWQ=\x07\x1b[2J"
TOOLS = {"noise": ["hello"], "deep": ["hello", "deep"], "silent": ["hello", "hang"]}[MODE]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, object], result: object) -> None:
    if MODE == "noise":
        print(NOISE, flush=True)
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def text(words: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": words}], "isError": False}


def main() -> None:
    if MODE == "noise":
        print(NOISE, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if "id" not in request:
            continue  # a notification
        if method == "initialize":
            answer(
                request,
                {
                    "protocolVersion": request["params"]["protocolVersion"],  # type: ignore[index]
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": f"raw-{MODE}", "version": "1"},
                },
            )
        elif method == "tools/list":
            listed = [
                {"name": name, "description": name, "inputSchema": {"type": "object"}}
                for name in TOOLS
            ]
            answer(request, {"tools": listed})
        elif method == "tools/call":
            name = request["params"]["name"]  # type: ignore[index]
            if name == "hang":
                continue
            if name == "deep":
                nested: object = "bottom"
                for _ in range(300):
                    nested = [nested]
                answer(request, {"content": [], "structuredContent": {"deep": nested}})
            else:
                answer(request, text(f"hello from {MODE}"))
        else:
            send(
                {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}}
            )


if __name__ == "__main__":
    main()
