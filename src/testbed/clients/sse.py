"""An incremental parser of server-sent events (the ``text/event-stream`` format).

Bytes arrive split anywhere (inside a line, between ``\\r`` and ``\\n``); :meth:`SseParser.feed`
returns the events completed so far and keeps the rest. Only what streaming model servers
use is kept: ``data`` (multi-line joined by ``\\n``) and ``event``; comments, ``id`` and
``retry`` are skipped. The common case, one ``data: …`` line per event, takes a fast path:
this runs once per streamed token.

An event never finished is not buffered without end: past :data:`MAX_EVENT` bytes the parser
sets ``too_long`` and takes nothing more (the stream is broken; its sink says so).
"""

from __future__ import annotations

from typing import NamedTuple

#: The largest unfinished event kept (a token's event is hundreds of bytes; one with the
#: top-20 logprobs a few KiB).
MAX_EVENT = 16 * 1024 * 1024


class SseEvent(NamedTuple):
    """One event: its ``event`` name ("" when unnamed) and its ``data`` bytes."""

    event: str
    data: bytes


class SseParser:
    """Feed bytes in, get complete events' data out."""

    __slots__ = ("partial", "too_long")

    def __init__(self) -> None:
        #: The incomplete last event, line ends already normalised to \n (empty between
        #: events: a read may then be one whole event, the hot path's case).
        self.partial = b""
        self.too_long = False  # an event grew past MAX_EVENT without its end: nothing more

    def feed(self, data: bytes) -> list[bytes]:
        """The ``data`` payloads of the events completed by ``data`` (events with no data
        field, such as keep-alive comments, give nothing). This is the hot path."""
        if (
            not self.partial
            and data.startswith(b"data: ")
            and data.find(b"\n") == len(data) - 2
            and data[-1] == 10  # b"\n"
            and b"\r" not in data
        ):  # the hot path: exactly one ``data: …\n\n`` event, its only line ends at the end
            return [data[6:-2]]
        out = []
        for block in self._blocks(data):
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(block[6:])
            elif block:
                event = _parse_block(block)
                if event is not None and (event.data or event.event):
                    out.append(event.data)
        return out

    def feed_events(self, data: bytes) -> list[SseEvent]:
        """The events completed by ``data``, with their names."""
        events = [_parse_block(block) for block in self._blocks(data) if block]
        return [event for event in events if event is not None]

    @property
    def pending(self) -> bool:
        """Bytes of an event not finished yet (a stream that ends now ends inside it)."""
        return bool(self.partial.strip())

    def _blocks(self, data: bytes) -> list[bytes]:
        if self.too_long:
            return []
        buf = self.partial + data if self.partial else data
        tail = b""
        if b"\r" in buf:
            if buf.endswith(b"\r"):  # its \n may come in the next read
                buf, tail = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = buf.split(b"\n\n")
        self.partial = blocks.pop() + tail
        if len(self.partial) > MAX_EVENT:
            self.too_long = True
            self.partial = b"\0"  # not empty: keeps later reads off the one-event fast path
        return blocks


def _parse_block(block: bytes) -> SseEvent | None:
    name = ""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if not data and not name:
        return None
    return SseEvent(name, b"\n".join(data))
