"""The reference server's HTTP door: one task per request over the servers' HTTP/1.1.

The protocol is :mod:`testbed.servers.http1`, the simulator's too; this module gives it the
reference server's shape: an async handler per request, answering through a
:class:`Responder` (JSON, text, or a chunked stream of server-sent events). A client that
goes away cancels its request's task at once, wherever it waits — mid-stream or while a
whole answer is generated — so its generation ends (the engine drops a request whose steps
are no longer read); a write after that raises :class:`ClientGone`.

Writes do not wait for the socket: the engine makes tokens at the model's pace whether or
not they are read, so they would only queue elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from testbed.servers.http1 import Connection, Request, stop_accepting

#: Seconds :meth:`HttpDoor.close` lets the answers in flight end before it cancels them.
CLOSE_GRACE_S = 5.0


class ClientGone(ConnectionError):
    """The client closed the connection while we were still answering."""


def body_json(request: Request) -> Any:
    """The request's body parsed as JSON (``ValueError`` when it is not; None when empty)."""
    return json.loads(request.body or b"null")


class Responder:
    """Writes one response: either :meth:`send_json`/:meth:`send_text`, or a stream."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.status = 0  # 0 until the head is written
        self.ended = False  # the response's framing is complete

    def send_text(self, status: int, body: str, content_type: str = "text/plain") -> None:
        self._head(status)
        self._conn.respond(status, body.encode(), content_type.encode())
        self.ended = True

    def send_json(self, status: int, obj: Any) -> None:
        self.send_text(status, json.dumps(obj), "application/json")

    def start_stream(self) -> None:
        self._head(200)
        self._conn.start_stream(b"text/event-stream")

    def send_event(self, data: str) -> None:
        """One server-sent event (``data: …`` and a blank line) as one chunk."""
        self._check()
        self._conn.send(f"data: {data}\n\n".encode())

    def end_stream(self) -> None:
        self._check()
        self._conn.send(b"", last=True)
        self.ended = True

    def _head(self, status: int) -> None:
        self._check()
        if self.status:
            raise RuntimeError(f"a response was already started (status {self.status})")
        self.status = status

    def _check(self) -> None:
        if not self._conn.open:
            raise ClientGone()


Handler = Callable[[Request, Responder], Awaitable[None]]


class HttpDoor:
    """The listening server and the tasks answering its requests (their one owner)."""

    def __init__(self, handler: Handler, loop: asyncio.AbstractEventLoop) -> None:
        self._handler = handler
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()  # the protocol's Handler interface
        self.closing = False

    @property
    def port(self) -> int:
        assert self._server is not None, "not listening"
        return int(self._server.sockets[0].getsockname()[1])

    async def listen(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (port 0 picks a free one); ``OSError`` when it cannot."""
        self._server = await self._loop.create_server(
            lambda: Connection(self, self._loop), host, port, reuse_address=True
        )

    def handle(self, request: Request, conn: Connection) -> None:
        if self.closing:  # a keep-alive connection's next request while the server stops
            conn.drop()
            return
        task = self._loop.create_task(self._answer(request, conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

        def client_gone() -> None:
            task.cancel()

        conn.on_lost = client_gone  # reset by the connection once the response has ended

    async def _answer(self, request: Request, conn: Connection) -> None:
        out = Responder(conn)
        try:
            await self._handler(request, out)
        except ClientGone:
            pass
        finally:
            if not out.ended:
                # An answer the handler gave up on (a stream cut by an error): its framing
                # never ends, so the connection can carry no further answer; closing it
                # tells the client the answer was cut.
                conn.drop()

    def stop_accepting(self) -> None:
        """Take no new connection (one accepted meanwhile is reset); those open go on."""
        if self._server is not None and not self.closing:
            self.closing = True
            stop_accepting(self._server)

    async def close(self) -> None:
        """Stop accepting, let the answers in flight end (up to :data:`CLOSE_GRACE_S`, then
        cancel them), close every connection and the server."""
        self.stop_accepting()
        server, self._server = self._server, None
        if server is None:
            return
        if self._tasks:
            _done, late = await asyncio.wait(set(self._tasks), timeout=CLOSE_GRACE_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for conn in list(self.connections):
            conn.drop()
        server.close()
        await server.wait_closed()


async def start(handler: Handler, host: str, port: int) -> HttpDoor:
    """Serve ``handler`` on ``host:port`` (port 0 picks a free one) in the running loop."""
    door = HttpDoor(handler, asyncio.get_running_loop())
    await door.listen(host, port)
    return door
