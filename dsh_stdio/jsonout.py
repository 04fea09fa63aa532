"""``--json``: stdout is one JSON object per line instead of the transcript (SPEC section 9).

    {"type":"turn/start","seq":0,"time":"...","data":{"turn":1,"model":"..."}}   log events
    {"type":"assistant/delta","data":{"turn":1,"step":1,"text":"Hel"}}           as text arrives
    ...
    {"type":"turn/end","seq":5,"time":"...","data":{"turn":1,"reason":{"kind":"completed"}}}

The log events are the session log's lines, exactly, as they are written; deltas are not
stored. Every line is parseable on its own, whatever the model wrote: U+2028, U+2029 and U+0085
are escaped as in the log, and NUL is ``\\u0000``. On a terminal every character that is not
printable ASCII is a ``\\u`` escape: a C1 control or a bidi override written raw would act on
the screen (SPEC 10.9); on a pipe the lines are data and stay as the log has them. Notices
(retries, tool lines, usage) stay on stderr. Everything goes through the view's one buffer, so
log events and deltas keep their order.
"""

from __future__ import annotations

from typing import Any, TextIO

from dsh_core.session import SessionEvent, SessionLog, encode_line
from dsh_core.session.events import AssistantStep, TurnEnd, TurnStart

from .view import TurnView

__all__ = ["JsonView"]


class JsonView(TurnView):
    """A TurnView for a whole run that writes JSON lines: one per log event and per delta."""

    def __init__(
        self, out: TextIO, err: TextIO, log: SessionLog, *, terminal: bool, **options: Any
    ) -> None:
        super().__init__(out, err, terminal=False, show_reasoning=False, **options)
        self._ascii = terminal
        self._turn = 0
        self._step = 1
        self.attach(log)

    def attach(self, log: SessionLog) -> None:
        """Show ``log``'s events from now on (the session's id is on stderr at the end)."""
        log.on_append = self._logged

    def replay(self, events: list[SessionEvent]) -> None:
        """Show events already written by this run (a load's repairs) before any others."""
        for event in events:
            self._logged(event)

    def _logged(self, event: SessionEvent) -> None:
        record = event.record
        if isinstance(record, TurnStart):
            self._turn, self._step = record.turn, 1
        elif isinstance(record, AssistantStep):
            self._step = record.step + 1  # deltas from now on belong to the next step
        self._line(event.to_json())

    def result(self, value: dict[str, Any]) -> None:
        """The run's last line, ``{"type": "result", ...}`` (SPEC 15), written out at once."""
        self._line(value)
        self.flush()

    def _line(self, value: dict[str, Any]) -> None:
        self._write(encode_line(value, ascii=self._ascii).decode("utf-8"))

    def _delta(self, kind: str, text: str) -> None:
        if text:
            data = {"turn": self._turn, "step": self._step, "text": text}
            self._line({"type": kind, "data": data})

    def _text(self, text: str) -> None:
        self._delta("assistant/delta", text)

    def _reasoning(self, text: str) -> None:
        self._delta("reasoning/delta", text)

    def _end_reasoning_if_open(self) -> None:
        pass  # no transcript to set reasoning apart in

    def _end_line(self) -> None:
        pass  # every write is a whole line

    def _outcome(self, end: TurnEnd, steps: int | None) -> None:
        pass  # the turn/end event says it
