"""A small HTTP/1.1 server on asyncio streams: JSON answers, chunked SSE streams, keep-alive.

The reference server spends tens of milliseconds per token in the model, so this layer aims
at being obviously correct rather than fast. Bodies are read by Content-Length; a client
that goes away mid-stream surfaces as :class:`ClientGone`, which ends its generation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024


class ClientGone(ConnectionError):
    """The client closed the connection while we were still answering."""


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (``ValueError`` when it is not)."""
        return json.loads(self.body or b"null")


class Responder:
    """Writes one response: either :meth:`send_json`/:meth:`send_text`, or a stream."""

    def __init__(self, writer: asyncio.StreamWriter, keep_alive: bool) -> None:
        self._writer = writer
        self.keep_alive = keep_alive
        self.status = 0  # 0 until the head is written

    def _head(self, status: int, content_type: str, extra: str) -> bytes:
        self.status = status
        connection = "keep-alive" if self.keep_alive else "close"
        return (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            f"Content-Type: {content_type}\r\nConnection: {connection}\r\n{extra}\r\n"
        ).encode()

    async def send_text(self, status: int, body: str, content_type: str = "text/plain") -> None:
        data = body.encode()
        head = self._head(status, content_type, f"Content-Length: {len(data)}\r\n")
        await self._write(head + data)

    async def send_json(self, status: int, obj: Any) -> None:
        await self.send_text(status, json.dumps(obj), "application/json")

    async def start_stream(self) -> None:
        await self._write(
            self._head(
                200,
                "text/event-stream",
                "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
            )
        )

    async def send_event(self, data: str) -> None:
        """One server-sent event (``data: …`` and a blank line) as one chunk."""
        payload = f"data: {data}\n\n".encode()
        await self._write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")

    async def end_stream(self) -> None:
        await self._write(b"0\r\n\r\n")

    async def _write(self, data: bytes) -> None:
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise ClientGone() from exc


Handler = Callable[[HttpRequest, Responder], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """The next request on a connection, or None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError as exc:
        raise ValueError("request head too large") from exc
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length > MAX_BODY:
        raise ValueError("request body too large")
    body = await reader.readexactly(length) if length else b""
    return HttpRequest(method.upper(), urlsplit(target).path, headers, body)


async def _connection(
    handler: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            try:
                request = await _read_request(reader)
            except (ValueError, asyncio.IncompleteReadError):
                await Responder(writer, False).send_json(400, {"error": "malformed request"})
                return
            if request is None:
                return
            keep_alive = request.headers.get("connection", "").lower() != "close"
            responder = Responder(writer, keep_alive)
            await handler(request, responder)
            if not keep_alive:
                return
    except (ClientGone, ConnectionError):
        pass  # the client left; nothing to answer
    finally:
        writer.close()


async def start(handler: Handler, host: str, port: int) -> asyncio.Server:
    """Listen on ``host:port`` (port 0 picks a free one) and serve every connection."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _connection(handler, reader, writer)

    return await asyncio.start_server(on_connect, host, port, limit=MAX_HEAD)
