"""One gRPC call of the simulator's HTTP/2 server (:mod:`testbed.servers.sim.h2`): what the
handler reads of the request and the two ways it answers, :meth:`Call.send` and
:meth:`Call.finish`; the connection it writes through is a :class:`Writer`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from testbed.wire import h2 as w

_CODES = {name: number for number, name in enumerate(w.GRPC_CODES)}


class Writer(Protocol):
    """What a call needs of its connection."""

    peer_window: int  # the client's initial stream window

    def write_data(self, call: Call, messages: bytes) -> None: ...

    def write_trailers(self, call: Call, block: bytes) -> None: ...

    def reset(self, call: Call, code: int) -> None: ...


class Call:
    """One gRPC call: its method ``path``, request ``metadata`` and ``message``; the handler
    answers with :meth:`send` (length-prefixed messages) and :meth:`finish` (the status)."""

    __slots__ = (
        "_conn",
        "_deadline",
        "body",
        "ended",
        "headers_sent",
        "id",
        "message",
        "metadata",
        "on_cancel",
        "path",
        "pending",
        "trailers",
        "unacked",
        "window",
    )

    def __init__(self, conn: Writer, sid: int, path: str, metadata: dict[str, str]) -> None:
        self._conn = conn
        self.id = sid
        self.path = path
        self.metadata = metadata
        self.body = b""  # the request's DATA, until END_STREAM
        self.message = b""
        self.window = conn.peer_window  # the client's, for what this call sends
        self.unacked = 0
        self.pending = b""  # DATA frames' payload waiting for the client's windows
        self.trailers: bytes | None = None  # written once ``pending`` is out
        self.headers_sent = False
        self.ended = False  # finished, reset or lost: nothing more is written
        #: Called once if the call ends before the handler finished it (the client reset it,
        #: its deadline passed, the connection was lost or the server stops).
        self.on_cancel: Callable[[], None] | None = None
        self._deadline: asyncio.TimerHandle | None = None

    @property
    def open(self) -> bool:
        return not self.ended

    def send(self, messages: bytes) -> None:
        """Length-prefixed gRPC messages (one or several), as DATA now or when the windows
        allow."""
        if not self.ended and messages:
            self._conn.write_data(self, messages)

    def finish(self, code: str = "OK", message: str = "") -> None:
        """End the call with gRPC status ``code``: trailers after the DATA already sent, or a
        Trailers-Only answer when nothing was."""
        if self.ended:
            return
        self.ended = True
        self.on_cancel = None
        block = w.trailers_block(_CODES[code], message)
        self._conn.write_trailers(self, block)

    def cancelled(self) -> None:
        """The call ended early: nothing more is written; the handler hears of it."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self.ended:
            return
        self.ended = True
        callback, self.on_cancel = self.on_cancel, None
        if callback is not None:
            callback()

    def set_deadline(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self._deadline = loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self._deadline = None
        if not self.ended:
            callback, self.on_cancel = self.on_cancel, None
            self.finish("DEADLINE_EXCEEDED", "Deadline Exceeded")
            self._conn.reset(self, w.CANCEL)
            if callback is not None:
                callback()
