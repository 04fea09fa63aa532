"""The offline demo from a source checkout: the same as ``dsh --demo`` (see
dsh_stdio/commands/demo.py).

python scripts/demo_repl.py [--down] [--long-deltas N] [dsh flags...]
"""

from __future__ import annotations

import sys

from dsh_stdio.__main__ import leave, main

if __name__ == "__main__":
    # As dsh itself leaves: no interpreter teardown, which could wait on the stdin thread.
    leave(main(["--demo", *sys.argv[1:]]))
