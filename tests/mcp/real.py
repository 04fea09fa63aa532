"""Where the real MCP servers the suite runs are, and what to do when one is not installed.

The PyPI servers (``mcp-server-time``, ``mcp-server-git``, ``mcp-server-fetch``) are console
scripts beside the test interpreter; the npm ones (``@modelcontextprotocol/server-everything``,
``@modelcontextprotocol/server-filesystem``) are in ``$DSH_TEST_NPM_BIN`` (a ``node_modules/.bin``).
``.ci/run`` installs them, pinned (:data:`PINNED`), and sets ``DSH_REAL_MCP_SERVERS=required``:
then a server that cannot be found fails its test instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

__all__ = ["PINNED", "npm_server", "python_server", "real_server_pids"]

PINNED = {
    "mcp-server-time": "2026.10.19",
    "mcp-server-git": "2026.10.19",
    "mcp-server-fetch": "2026.10.24",
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/server-filesystem": "2026.8.31",
}
"""The versions the suite is tested against (``.ci/run`` installs these)."""


def _missing(what: str) -> None:
    message = f"{what} is not installed (.ci/run installs it: {sys.executable} -m pip / npm)"
    if os.environ.get("DSH_REAL_MCP_SERVERS") == "required":
        pytest.fail(message)
    pytest.skip(message)


def python_server(name: str) -> str:
    """The console script ``name`` of a PyPI server, beside the test interpreter."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        _missing(name)
    return str(path)


def npm_server(name: str) -> str:
    """The ``bin`` of an npm server (``mcp-server-everything``) in ``$DSH_TEST_NPM_BIN``; node
    must be on ``PATH`` too (its ``#!/usr/bin/env node`` line)."""
    directory = os.environ.get("DSH_TEST_NPM_BIN", "")
    path = Path(directory, name) if directory else None
    if path is None or not path.exists() or shutil.which("node") is None:
        _missing(f"{name} (npm, in $DSH_TEST_NPM_BIN)")
    assert path is not None
    return str(path)


def real_server_pids(*marks: str) -> list[int]:
    """Live processes whose command line holds any of ``marks`` (a server's path), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if (
            any(mark.encode() in raw for mark in marks)
            and stat.rpartition(")")[2].split()[0] != "Z"
        ):
            found.append(int(entry))
    return found
