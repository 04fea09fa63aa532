"""The API key out of the environment this process started with (SPEC 10.5).

Python copies the environment into ``os.environ`` at start-up, but the block the kernel laid
out for the process stays in its memory, and ``/proc/<pid>/environ`` shows it to anyone who
may read that file: every process of the same user while dsh is dumpable, and root always
(``PR_SET_DUMPABLE`` does not stop root). An unsandboxed command would read the key there
(``tr '\\0' '\\n' < /proc/$PPID/environ``). At start, dsh overwrites the values of the variables
that hold it in that block with NUL bytes::

    scrub_start_environment({"DEEPSEEK_API_KEY"})   # at the front door's start

``os.environ`` keeps its copy (dsh reads the key from it); what the C library's ``environ``
points at is that block, so a child started without an environment of its own would find the
variable empty, never the key. The block is written through ``/proc/self/mem`` (a process may
always write its own memory; no ``ctypes`` to import at start-up).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from ..chain import error_chain

__all__ = ["scrub_start_environment"]

logger = logging.getLogger(__name__)

_ENV_START = 50 - 3
"""Where ``env_start`` is among the fields of ``/proc/self/stat`` after the command's name
(proc(5) numbers it 50, from 1, and the name closes field 2); ``env_end`` follows."""


def scrub_start_environment(names: Collection[str]) -> int:
    """Overwrite with NUL bytes the values of the variables ``names`` in this process's
    start-up environment block; the number of bytes overwritten (0 where none held a value,
    or on a system without ``/proc``: a failure is logged at debug level, never raised)."""
    if not names:
        return 0
    try:
        with open("/proc/self/environ", "rb") as shown:
            block = shown.read()
        spans = list(_values(block, {name.encode() for name in names}))
        if not spans:
            return 0
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        start, end = int(fields[_ENV_START]), int(fields[_ENV_START + 1])
        if end - start != len(block):
            raise OSError(f"the environment block is {end - start} bytes, /proc shows {len(block)}")
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            for offset, length in spans:
                memory.seek(start + offset)
                memory.write(bytes(length))
    except (OSError, ValueError, IndexError) as exc:
        logger.debug("could not scrub the start-up environment: %s", error_chain(exc))
        return 0
    return sum(length for _, length in spans)


def _values(block: bytes, names: set[bytes]) -> list[tuple[int, int]]:
    """Where the values of ``names`` are in ``block``: (offset, length) of each non-empty one."""
    spans = []
    offset = 0
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals and value and name in names:
            spans.append((offset + len(name) + 1, len(value)))
        offset += len(entry) + 1
    return spans
