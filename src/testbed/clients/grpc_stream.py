"""One gRPC call's stream on an HTTP/2 connection: its messages cut out of its DATA.

A gRPC message is a 5-byte prefix (a compression flag, a 4-byte length) and its bytes;
HTTP/2 DATA frames do not respect message boundaries: one frame may hold several messages,
one message may span several frames. :meth:`Stream.feed` hands each whole message to the
call's ``on_message(message, t_ns)`` with the time the frame that completed it was read;
a message in pieces is joined once, when its last piece arrives. The connection around
it is :mod:`testbed.clients.grpc_h2`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: The longest message a call takes (bytes), grpcio's default.
MAX_MESSAGE = 4 << 20

OnMessage = Callable[[bytes, int], None]


class GrpcError(Exception):
    """A call that did not end with status OK.

    ``answered``: the server itself said so (a status, a reset stream) rather than the
    connection failing; ``connecting``: no connection could be made; ``retryable``: the
    server never processed the call (a refused stream, one above a GOAWAY's last id)."""

    def __init__(
        self,
        code: str,
        details: str,
        *,
        answered: bool = True,
        connecting: bool = False,
        retryable: bool = False,
    ) -> None:
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details
        self.answered, self.connecting, self.retryable = answered, connecting, retryable


class Stream:
    """One call: its consumer, its completion, its unfinished message and its windows."""

    __slots__ = (
        "done",
        "got_head",
        "have",
        "id",
        "messages",
        "need",
        "on_message",
        "parts",
        "pending",
        "unacked",
        "window",
    )

    def __init__(self, stream_id: int, on_message: OnMessage, done: asyncio.Future[None]) -> None:
        self.id = stream_id
        self.on_message = on_message
        self.done = done
        self.parts: list[bytes] = []  # an unfinished message's bytes so far …
        self.have = 0  # … their length …
        self.need = 0  # … and the length that completes it (or its 5-byte prefix)
        self.got_head = False  # the response headers came (the next block is trailers)
        self.messages = 0
        self.unacked = 0  # bytes received, not yet given back by a WINDOW_UPDATE
        self.window = 0  # what the server lets this call send
        self.pending = b""  # request DATA waiting for the server's window

    def feed(self, data: bytes, t_ns: int) -> None:
        """Take DATA bytes; raise :class:`GrpcError` when they break the call (a compressed
        or too long message, one its consumer cannot decode)."""
        if self.parts:  # inside a message: join its pieces once, when it is whole
            self.parts.append(data)
            self.have += len(data)
            if self.have < self.need:
                return
            data = b"".join(self.parts)
            self.parts, self.have = [], 0
        pos, size = 0, len(data)
        while size - pos >= 5:
            length = int.from_bytes(data[pos + 1 : pos + 5], "big")
            if length > MAX_MESSAGE:
                why = f"a {length}-byte message, longer than the {MAX_MESSAGE} a call takes"
                raise GrpcError("RESOURCE_EXHAUSTED", why)
            end = pos + 5 + length
            if end > size:
                break
            if data[pos]:
                raise GrpcError("INTERNAL", "a compressed message (no compression was offered)")
            self.messages += 1
            try:
                self.on_message(data[pos + 5 : end], t_ns)
            except Exception as exc:
                raise undecodable(exc) from exc
            pos = end
        if pos < size:
            rest = data[pos:]
            self.parts, self.have = [rest], len(rest)
            self.need = 5 + int.from_bytes(rest[1:5], "big") if len(rest) >= 5 else 5


def undecodable(exc: Exception) -> GrpcError:
    """The error of a message its consumer could not take."""
    return GrpcError("INTERNAL", f"undecodable message: {type(exc).__name__}: {exc}")
