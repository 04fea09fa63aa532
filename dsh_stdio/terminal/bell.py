"""Calling a person back: a bell, or an OSC 9 notification, when dsh waits for them (SPEC 17).

    attention = Attention("bell", out)
    attention.question()            # an approval question waits
    attention.turn_ended(12.5)      # a turn that ran longer than LONG_TURN_SECONDS ended

``notify`` in ``$DSH_HOME/config.toml`` picks the way: ``"bell"`` (the default: BEL, which
terminals show as a sound, a flash or an urgent window), ``"osc9"`` (``ESC ] 9 ; text BEL``, a
desktop notification in iTerm2, kitty, WezTerm, Windows Terminal and tmux passing it on), or
``"off"``. The text is dsh's own, never the model's; nothing rings where ``out`` is not a
terminal.
"""

from __future__ import annotations

from typing import Literal, TextIO, get_args

__all__ = ["LONG_TURN_SECONDS", "NOTIFY_WAYS", "Attention", "Notify"]

Notify = Literal["bell", "osc9", "off"]
NOTIFY_WAYS: tuple[str, ...] = get_args(Notify)
LONG_TURN_SECONDS = 10.0
"""A turn that ran longer than this calls the person back when it ends: they may have looked
away; a quicker one ended while they watched."""


class Attention:
    """Rings, in the way ``notify`` says, on the terminal ``out``."""

    def __init__(self, notify: Notify, out: TextIO) -> None:
        self._notify = notify
        self._out = out

    def question(self) -> None:
        """An approval question waits for an answer."""
        self._ring("dsh: a question waits for your answer")

    def turn_ended(self, seconds: float) -> None:
        """A turn ended after ``seconds``: ring if that was long."""
        if seconds > LONG_TURN_SECONDS:
            self._ring("dsh: the turn ended")

    def _ring(self, text: str) -> None:
        if not self._out.isatty():
            return  # a BEL in a file or a test's screen calls nobody
        if self._notify == "bell":
            self._out.write("\a")
        elif self._notify == "osc9":
            self._out.write(f"\x1b]9;{text}\x07")
        else:
            return
        self._out.flush()
