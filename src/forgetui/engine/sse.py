"""Server-Sent Events decoder: bytes in, events out (WHATWG "event stream interpretation").

We own this decoder instead of using openai-python's or httpx-sse's because both
dispatch an empty event when a stream carries ``id: 1`` and later a ``: ping``
comment followed by a blank line (reproduced in openai/openai-python#2722). The
spec says a blank line with an empty data buffer dispatches nothing; a spurious
empty event there corrupts token counts and timing, which is what we measure.

Spec details kept exactly, so callers must handle them:

* ``data:`` with an empty value appends "" + "\\n" to the data buffer, so
  ``data:\\n\\n`` dispatches ``SSEEvent(data="")``. Callers skip empty data.
* The last event id persists across events until another valid ``id`` line.

Deliberate extras beyond the spec: ``error:`` field lines are recorded in
``error_fields`` (old llama.cpp sent errors that way), comments are counted as a
liveness signal, and :meth:`SSEDecoder.close` returns an unterminated final
event instead of discarding it (some llama.cpp builds end with ``data: [DONE]``
and no blank line).

Standard library only; must never import textual or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEDecoder"]

# One regex scan finds CR or LF; two separate find() calls would each rescan
# the rest of a chunk with many lines, which is quadratic per chunk.
_EOL = re.compile(rb"[\r\n]")
_CR = 0x0D
_LF = 0x0A


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event."""

    data: str  # data lines joined with "\n"
    event: str = "message"
    id: str | None = None  # last event id in effect when dispatched
    retry: int | None = None  # last valid retry value seen, else None


class SSEDecoder:
    """Incremental SSE decoder. Feed raw bytes; get complete events back.

    Attributes:
        comments: number of comment lines (":" prefix) seen so far.
        error_fields: values of non-standard ``error:`` field lines, in order.
    """

    def __init__(self) -> None:
        self.comments: int = 0
        self.error_fields: list[str] = []
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no CR/LF
        self._skip_lf = False  # last line ended in CR; a following LF belongs to it
        self._first_line = True  # only the very first line may carry a BOM
        self._data: list[str] = []  # joined with "\n" == spec's buffer minus last "\n"
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._closed = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk``; return the events it completed, in order.

        Raises:
            ValueError: if called after :meth:`close`.
        """
        if self._closed:
            raise ValueError("feed() called after close()")
        buf = self._buf
        buf += chunk
        events: list[SSEEvent] = []
        start = 0
        scan = self._scanned
        while True:
            # The CR may have been the last byte of the previous chunk, so the
            # pending-LF check happens here, once the next byte is available.
            if self._skip_lf and start < len(buf):
                self._skip_lf = False
                if buf[start] == _LF:
                    start += 1
                    scan = max(scan, start)
            m = _EOL.search(buf, scan)
            if m is None:
                break
            end = m.start()
            # Decode per complete line, so a multi-byte char split across
            # chunks is whole by now.
            self._line(buf[start:end].decode("utf-8", "replace"), events)
            self._skip_lf = buf[end] == _CR
            start = scan = end + 1
        # One front deletion per feed; CPython makes it cheap for bytearray.
        del buf[:start]
        self._scanned = len(buf)
        return events

    def close(self) -> SSEEvent | None:
        """Signal EOF. Return the event being built if it has data, else None.

        An unterminated final line is treated as complete first. After close,
        :meth:`feed` raises ValueError; calling close again returns None.
        """
        if self._closed:
            return None
        self._closed = True
        events: list[SSEEvent] = []
        if self._buf:
            self._line(self._buf.decode("utf-8", "replace"), events)
            self._buf.clear()
        # The tail line can only be blank if it was a lone BOM, which dispatched
        # nothing; either way whatever is still pending is the final event.
        return events[0] if events else self._dispatch()

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if self._first_line:
            self._first_line = False
            if line.startswith("\ufeff"):
                line = line[1:]
        if not line:
            event = self._dispatch()
            if event is not None:
                events.append(event)
            return
        if line[0] == ":":
            self.comments += 1
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry":
            # str.isdigit alone accepts non-ASCII digits; the spec wants 0-9 only.
            if value and value.isascii() and value.isdigit():
                self._retry = int(value)
        elif field == "error":
            self.error_fields.append(value)

    def _dispatch(self) -> SSEEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:  # the rule openai-python broke: empty buffer, no event
            return None
        return SSEEvent("\n".join(data), event or "message", self._last_id, self._retry)
