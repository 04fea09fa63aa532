"""SPEC 17 with 10.9: rendering an answer's Markdown lets no escape sequence of the model's
through, and adds none that does more than colour.

The attack: a model puts ESC, BEL and CSI into the places a renderer treats specially (a fenced
code block's code and its language, a link's text and address, a heading, a table's cell), on a
colour terminal, where dsh renders Markdown. What reaches the terminal between the waiting
indicator and the usage line is dsh's: SGR styling, and the cursor-up and erase that replace a
block's plain tail by its rendering; the model's escapes show as ``^[``. A renderer asked for
terminal hyperlinks (rich's default) would also send OSC 8 with an address the model chose
behind text it chose: that is caught here too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh_core.testing import Answer, StubServer
from tests.dsh_stdio.test_agent_terminal import spawn_terminal
from tests.security._support_display import (  # noqa: F401 (fixtures, used by name)
    env_fixture,
    home_fixture,
    stub_fixture,
    work_fixture,
)
from tests.support import DSH

pytestmark = pytest.mark.slow

ESC_CLEAR = "\x1b[2J"
ESC_TITLE = "\x1b]0;pwned\x07"
ESC_LINK = "\x1b]8;;https://evil.example/\x1b\\"

ATTACKS = {
    "code block": f"```python\nx = 1  # {ESC_CLEAR} {ESC_TITLE}\n```\n",
    "code language": f"```py{ESC_CLEAR}thon\nx = 1\n```\n",
    "link": f"[see {ESC_CLEAR}this](https://example.com/{ESC_LINK}) <https://x.example/{ESC_TITLE}>\n",
    "heading": f"# Title {ESC_TITLE}{ESC_CLEAR}\n",
    "table cell": f"| a | b |\n|---|---|\n| {ESC_CLEAR} | \x9b2J{ESC_LINK} |\n",
}

OURS = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\d*A|\x1b\[J")
"""What dsh itself may send while it shows an answer: styling, and erasing a plain tail."""


@pytest.mark.parametrize("attack", ATTACKS)
def test_escapes_in_markdown_reach_the_terminal_inert(
    env: dict[str, str], stub: StubServer, work: Path, home: Path, attack: str
) -> None:
    stub.enqueue(Answer(ATTACKS[attack] + "\nTHE END\n", chunk_size=3))
    term = spawn_terminal(DSH, dict(env, TERM="xterm-256color"), work, home)
    try:
        term.child.expect_exact("Ctrl-D leaves.")
        term.keys("attack\r")
        term.child.expect_exact("… waiting for the model")
        term.child.expect_exact("tokens in")
    finally:
        term.child.close(force=True)
    shown = term.screen.getvalue().split("… waiting for the model", 1)[1].split("tokens in")[0]
    assert "THE END" in shown
    sent = OURS.sub("", shown)
    assert "\x1b" not in sent and "\x07" not in sent and "\x9b" not in sent, repr(shown)
    assert "^[" in sent  # the model's escapes, shown
    assert "evil.example" not in "".join(re.findall(r"\x1b\][^\x07\x1b]*", shown))
