"""Server-sent events from a response body, fed as it arrives (sans-I/O).

Data flow::

    body bytes, cut anywhere --feed()--> the `data` of every event they complete,
                                         in order, as bytes (JSON not yet parsed)
    the end of the body      --finish()--> a last event the body did not terminate

An event ends at a blank line (`\\n\\n`; `\\r\\n` and `\\r` line ends are read as `\\n`).
Its `data` is its `data:` lines' values joined by `\\n` (one space after the colon
dropped); comment lines (`:`) and other fields (`event:`, `id:`, `retry:`) are ignored,
and an event without a `data:` line yields nothing. `data: [DONE]` (what vLLM and
SGLang send last) ends the stream: `done` is set and nothing after it is returned.

Invariant: the events returned are the same however the body is cut into pieces.

The work per `feed()` is a few C-level byte operations over what arrived (the split at
blank lines, the line-end normalization when a `\\r` is present) and, per event, a
prefix test: the common event, one `data:` line, takes the fast path.
"""

from __future__ import annotations

__all__ = ["SseSplitter"]

_DONE = b"[DONE]"


class SseSplitter:
    """Splits one response body into event data."""

    def __init__(self) -> None:
        self._buffer = b""
        #: `data: [DONE]` was read: the stream is over.
        self.done = False

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event `data` completes (none after `[DONE]`)."""
        if self.done or not data:
            return []
        buffer = self._buffer + data
        if b"\r" in buffer:
            # a `\r` last may be the first half of `\r\n`: it waits for the next piece
            held = buffer.endswith(b"\r")
            if held:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if held:
                buffer += b"\r"
        if b"\n\n" not in buffer:
            self._buffer = buffer
            return []
        *events, self._buffer = buffer.split(b"\n\n")
        return self._data(events)

    def finish(self) -> list[bytes]:
        """The body ended: an event it left unterminated, if any."""
        rest, self._buffer = self._buffer.rstrip(b"\r\n"), b""
        if self.done or not rest:
            return []
        return self._data([rest.replace(b"\r\n", b"\n").replace(b"\r", b"\n")])

    def _data(self, events: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        for event in events:
            if event.startswith(b"data:") and b"\n" not in event:
                value = event[6:] if event.startswith(b"data: ") else event[5:]
            else:
                found = _fields(event)
                if found is None:
                    continue
                value = found
            if value == _DONE or (len(value) < 16 and value.strip() == _DONE):
                self.done = True
                break
            out.append(value)
        return out


def _fields(event: bytes) -> bytes | None:
    """The data of an event of several lines (or of another field), None without data."""
    values = []
    for line in event.lstrip(b"\n").split(b"\n"):
        if line.startswith(b"data:"):
            values.append(line[6:] if line.startswith(b"data: ") else line[5:])
    return b"\n".join(values) if values else None
