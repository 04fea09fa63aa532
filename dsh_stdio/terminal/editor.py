"""Ctrl-X Ctrl-E at the prompt: the message so far, in ``$VISUAL`` or ``$EDITOR`` (SPEC 17).

    bindings = editor_bindings(say)   # merged into the prompt's key bindings

The message is written to a private file (0600, removed afterwards); the prompt steps aside
while the editor runs on the terminal, and what the file holds when the editor exits becomes
the message, still at the prompt for Enter to send. An editor that exits with a failure, or
cannot be started, leaves the message as it was and says why. The editor gets the same
environment as the commands dsh runs: without the API key (prompt_toolkit's own
``open_in_editor`` would hand it dsh's whole environment).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from prompt_toolkit.document import Document
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from dsh_core.chain import error_chain
from dsh_core.trust.workspace import child_environment

__all__ = ["FALLBACK_EDITORS", "edit_text", "editor_bindings"]

FALLBACK_EDITORS = ("editor", "nano", "vi")
"""Tried in turn when neither ``VISUAL`` nor ``EDITOR`` is set (Debian's ``editor`` first)."""


def editor_bindings(say: Callable[[str], None]) -> KeyBindings:
    """The Ctrl-X Ctrl-E binding; ``say`` shows one line of dsh's (why the editor failed)."""
    bindings = KeyBindings()

    @bindings.add("c-x", "c-e")
    def _edit(event: KeyPressEvent) -> None:
        """Ctrl-X Ctrl-E edits the message in $VISUAL or $EDITOR."""
        buffer = event.current_buffer
        draft = buffer.text

        from prompt_toolkit.application import run_in_terminal

        async def edit_aside() -> None:
            # The prompt steps aside while the editor has the terminal (in a thread: the
            # loop goes on), then the text is the prompt's again.
            text, problem = await run_in_terminal(lambda: edit_text(draft), in_executor=True)
            if problem is not None:
                await run_in_terminal(lambda: say(problem))
            elif text is not None:
                buffer.document = Document(text, len(text))

        event.app.create_background_task(edit_aside())

    return bindings


def _command(env: dict[str, str]) -> list[str] | None:
    import shlex
    import shutil

    for name in ("VISUAL", "EDITOR"):
        if os.environ.get(name, "").strip():
            return shlex.split(os.environ[name])
    for name in FALLBACK_EDITORS:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return [found]
    return None


def edit_text(text: str) -> tuple[str | None, str | None]:
    """Run the editor on ``text``; (the edited text, None), or (None, why it did not work)."""
    import subprocess
    import tempfile

    env = child_environment()
    command = _command(env)
    if not command:
        return None, "dsh: no editor: set EDITOR (or VISUAL), e.g. export EDITOR=nano"
    fd, path = tempfile.mkstemp(prefix="dsh-message-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        try:
            status = subprocess.call([*command, path], env=env)
        except OSError as exc:
            return None, f"dsh: cannot start the editor {command[0]}: {error_chain(exc)}"
        if status != 0:
            return None, f"dsh: the editor exited with status {status}: the message is as it was"
        with open(path, encoding="utf-8", errors="replace") as file:
            edited = file.read()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    # Editors end the file with a newline; the message does not need it.
    return edited.removesuffix("\n"), None
