"""Server-sent events: a pure, incremental decoder after the WHATWG rules. No I/O.

Feed it the network chunks as they arrive; it returns what each chunk completed::

    decoder = SSEDecoder()
    async for chunk in response.aiter_bytes():
        for item in decoder.feed(chunk):
            if isinstance(item, str):
                handle(item)  # the data of a plain (``message``) event
            elif isinstance(item, Comment):
                ...  # ": keep-alive": the server is busy, the request lives
            else:
                handle_named(item.event, item.data)

Each chunk is decoded to ``str`` once, with an incremental UTF-8 decoder, so a character split
across chunks survives. Lines end at CR, LF or CRLF only, including a CR at the end of one chunk
and its LF at the start of the next; ``str.splitlines()`` (and so httpx's ``aiter_lines``) would
also break on U+2028, U+0085, ``\\x1c`` and friends, which model text can contain.
"""

from __future__ import annotations

import codecs

from ..records import record

__all__ = ["MAX_LINE", "Comment", "Item", "LineTooLong", "SSEDecoder", "ServerSentEvent"]

MAX_LINE = 16 * 1024 * 1024
"""Characters one line may reach before the stream is refused: no real event is near this,
and a server that never ends a line must not grow our memory without bound."""


class LineTooLong(ValueError):
    """The stream sent a line longer than ``MAX_LINE`` characters."""


@record
class ServerSentEvent:
    """An event that named a type other than ``message``: its data lines joined with LF."""

    data: str
    """The ``data:`` field values of the event, joined with ``\\n``."""
    event: str
    """The ``event:`` field."""
    id: str | None = None
    """The last event id seen on the stream so far (it carries over between events)."""


@record
class Comment:
    """A comment line (``: keep-alive``): not data, but proof that the server is alive."""

    text: str
    """What followed the colon, as sent (a leading space included)."""


Item = str | ServerSentEvent | Comment
"""What the decoder returns, in stream order.

An event of the default type (``message``, the only kind OpenAI-compatible servers send) comes
as its data string alone: one object fewer per event, measured at a quarter of the decoding
time of a long stream. An event that named its type comes as a :class:`ServerSentEvent`.
"""


class SSEDecoder:
    """Turn a byte stream into server-sent events and comments, chunk by chunk."""

    __slots__ = (
        "_data",
        "_event",
        "_id",
        "_max_line",
        "_partial",
        "_partial_size",
        "_started",
        "_text",
        "_trailing_cr",
        "retry",
    )

    def __init__(self, *, max_line: int = MAX_LINE) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False
        self._trailing_cr = False
        self._max_line = max_line
        self._partial: list[str] = []
        """The unfinished last line, in pieces: joined once when it ends, never per chunk."""
        self._partial_size = 0
        self._data: list[str] = []
        """The data lines of the event being read."""
        self._event = ""
        self._id: str | None = None
        self.retry: int | None = None
        """The reconnection time in milliseconds the server last asked for, if any."""

    @property
    def last_event_id(self) -> str | None:
        """The last ``id:`` the stream set, for a reconnection's ``Last-Event-ID``."""
        return self._id

    def feed(self, chunk: bytes) -> list[Item]:
        """Return the events and comments that ``chunk`` completes, in stream order.

        Raises :class:`LineTooLong` when a line grows past ``max_line`` characters.
        """
        text = self._text.decode(chunk)
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":  # one byte-order mark may open the stream
                text = text[1:]
        if not text:
            return []  # an empty chunk, or the first bytes of a character: a pending CR waits
        if self._trailing_cr:
            # The chunk before ended with CR, already taken as a line end: an LF here is its pair.
            self._trailing_cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            self._trailing_cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self._partial:
            if "\n" not in text:
                self._keep_partial(text)
                return []
            text = "".join(self._partial) + text
            self._partial, self._partial_size = [], 0
        # Every line ends in LF now, and text starts at the start of a line. Split it into
        # blocks at blank lines: most are one "data: ..." line, the one shape worth a fast path.
        items: list[Item] = []
        blocks = text.split("\n\n")
        tail = blocks.pop()
        for block in blocks:
            if not self._data and block.startswith("data:") and "\n" not in block:
                value = block[5:]
                if value[:1] == " ":
                    value = value[1:]
                if self._event:
                    items.append(self._named(value))
                else:
                    items.append(value)
            else:
                self._feed_lines(block.split("\n"), items)
                self._feed_lines(_BLANK, items)
        lines = tail.split("\n")
        last = lines.pop()
        if lines:
            self._feed_lines(lines, items)
        if last:
            self._keep_partial(last)
        return items

    def _keep_partial(self, piece: str) -> None:
        self._partial.append(piece)
        self._partial_size += len(piece)
        if self._partial_size > self._max_line:
            raise LineTooLong(f"a stream line passed {self._max_line:,} characters without ending")

    def flush(self) -> list[Item]:
        """End of stream. An event without its closing blank line is dropped, as WHATWG says."""
        items: list[Item] = []
        text = "".join(self._partial) + self._text.decode(b"", final=True)
        self._partial, self._partial_size = [], 0
        if text:
            # The last line is complete now; what it completes can only be a comment or a field.
            self._feed_lines(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), items)
        self._data = []
        self._event = ""
        return items

    def _named(self, data: str) -> Item:
        event, self._event = self._event, ""
        return data if event == "message" else ServerSentEvent(data, event, self._id)

    def _feed_lines(self, lines: list[str], items: list[Item]) -> None:
        """Interpret complete lines (without their line ends), the general way."""
        data = self._data
        for line in lines:
            if not line:
                if data:
                    value = "\n".join(data)
                    items.append(self._named(value) if self._event else value)
                    data = self._data = []
                self._event = ""
            elif line[0] == ":":
                items.append(Comment(line[1:]))
            else:
                name, colon, value = line.partition(":")
                if colon and value[:1] == " ":
                    value = value[1:]
                if name == "data":  # also a bare "data" line: an empty data value
                    data.append(value)
                elif name == "event":
                    self._event = value
                elif name == "id":
                    if "\0" not in value:
                        self._id = value
                elif name == "retry" and value.isascii() and value.isdigit():
                    self.retry = int(value)
                # Any other field name is ignored, as the standard says.


_BLANK = [""]
