"""The reference server's HTTP door over the servers' HTTP/1.1: answers and streams on
keep-alive connections, a client that leaves ends its request's task, a stream left unended
closes its connection, and closing lets the answers in flight end first."""

from __future__ import annotations

import asyncio

import pytest

from testbed.servers.http1 import Request
from testbed.servers.reference import http
from testbed.servers.reference.http import HttpDoor, Responder, body_json, start


async def _echo_or_stream(request: Request, out: Responder) -> None:
    if request.path == "/stream":
        out.start_stream()
        out.send_event("one")
        out.send_event("[DONE]")
        out.end_stream()
    else:
        out.send_json(200, {"echo": body_json(request), "method": request.method})


async def _connect(door: HttpDoor) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", door.port)


async def _read_json_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head, await reader.readexactly(length)


async def test_keep_alive_json_then_a_chunked_stream() -> None:
    door = await start(_echo_or_stream, "127.0.0.1", 0)
    reader, writer = await _connect(door)
    for i in range(2):  # two requests on one connection
        body = f'{{"n": {i}}}'.encode()
        writer.write(b"POST /x HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        head, answer = await _read_json_answer(reader)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"content-type: application/json\r\n" in head
        assert answer == b'{"echo": {"n": %d}, "method": "POST"}' % i
    writer.write(b"GET /stream HTTP/1.1\r\nConnection: close\r\n\r\n")
    rest = await reader.read()  # the server closes after it: Connection: close
    assert b"content-type: text/event-stream\r\n" in rest
    assert b"transfer-encoding: chunked\r\n" in rest
    chunks = b"b\r\ndata: one\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
    assert rest.endswith(b"\r\n\r\n" + chunks)
    writer.close()
    await writer.wait_closed()
    await door.close()


async def test_a_client_that_leaves_cancels_its_request_while_nothing_is_written() -> None:
    """A whole answer is written only at its end: the task still learns of the client's going
    at once (its generation stops), not when the answer is finally written."""
    started = asyncio.Event()
    cancelled = asyncio.get_running_loop().create_future()

    async def generating(request: Request, out: Responder) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # the model, still generating
        except asyncio.CancelledError:
            cancelled.set_result(True)
            raise
        out.send_json(200, {})

    door = await start(generating, "127.0.0.1", 0)
    try:
        _reader, writer = await _connect(door)
        writer.write(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        await started.wait()
        writer.close()
        await writer.wait_closed()
        async with asyncio.timeout(10):
            assert await cancelled
    finally:
        await door.close()


async def test_a_stream_left_unended_closes_its_connection() -> None:
    async def gives_up(request: Request, out: Responder) -> None:
        out.start_stream()
        out.send_event("partial")  # then an error: no end of the stream follows

    door = await start(gives_up, "127.0.0.1", 0)
    try:
        reader, writer = await _connect(door)
        writer.write(b"POST /s HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        async with asyncio.timeout(10):
            rest = await reader.read()  # EOF: the client knows the answer was cut
        assert rest.endswith(b"data: partial\n\n\r\n")
        assert not rest.endswith(b"0\r\n\r\n")
        writer.close()
        await writer.wait_closed()
    finally:
        await door.close()


async def test_close_lets_answers_in_flight_end_then_cancels_the_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http, "CLOSE_GRACE_S", 0.2)
    release, both_arrived = asyncio.Event(), asyncio.Event()
    arrived: list[str] = []
    ended: dict[str, str] = {}

    async def waits(request: Request, out: Responder) -> None:
        arrived.append(request.path)
        if len(arrived) == 2:
            both_arrived.set()
        try:
            if request.path == "/stuck":
                await asyncio.Event().wait()
            await release.wait()
        except asyncio.CancelledError:
            ended[request.path] = "cancelled"
            raise
        ended[request.path] = "answered"
        out.send_json(200, {"path": request.path})

    door = await start(waits, "127.0.0.1", 0)
    port = door.port
    clients = [await _connect(door) for _ in range(2)]
    for (_, writer), path in zip(clients, (b"/ok", b"/stuck"), strict=True):
        writer.write(b"GET %b HTTP/1.1\r\n\r\n" % path)
    async with asyncio.timeout(10):
        await both_arrived.wait()
        closing = asyncio.create_task(door.close())
        release.set()
        await closing
        _, answer = await _read_json_answer(clients[0][0])
        assert answer == b'{"path": "/ok"}'
        assert await clients[1][0].read() == b""  # cut, never answered
    assert ended == {"/ok": "answered", "/stuck": "cancelled"}
    for _, writer in clients:
        writer.close()
        await writer.wait_closed()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_once_stopping_a_kept_alive_connection_begins_no_new_request() -> None:
    door = await start(_echo_or_stream, "127.0.0.1", 0)
    reader, writer = await _connect(door)
    writer.write(b"POST /x HTTP/1.1\r\nContent-Length: 1\r\n\r\n1")
    assert (await _read_json_answer(reader))[1] == b'{"echo": 1, "method": "POST"}'
    door.stop_accepting()
    writer.write(b"POST /x HTTP/1.1\r\nContent-Length: 1\r\n\r\n2")
    async with asyncio.timeout(10):
        assert await reader.read() == b""  # closed, unanswered: the server is going away
    writer.close()
    await writer.wait_closed()
    await door.close()
