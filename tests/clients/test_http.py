"""The HTTP/1.1 client through its connector seam (scripted bytes) and over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.clients.http import ConnectionPool, HttpClientError, pool_for
from testbed.core.errors import InfrastructureError, InputError


class Collect:
    """A sink that keeps everything it is given."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.reads: list[int] = []
        self.ended = False

    def on_sent(self, t_ns: int) -> None:
        self.sent = t_ns

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        self.status, self.headers = status, headers

    def on_data(self, data: bytes, t_ns: int) -> None:
        self.body += data
        self.reads.append(t_ns)

    def on_end(self, t_ns: int) -> None:
        self.ended = True

    def on_cut(self, reason: str, t_ns: int) -> None:
        self.cut = reason


class ScriptedTransport(asyncio.Transport):
    """Answers every write with the next scripted response, delivered in the given pieces."""

    def __init__(self, protocol: asyncio.Protocol, script: list[list[bytes]]) -> None:
        super().__init__()
        self.protocol, self.script, self.written = protocol, script, []
        self.closed = False

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))
        pieces = self.script.pop(0)
        loop = asyncio.get_running_loop()
        for piece in pieces:
            loop.call_soon(self.protocol.data_received, piece)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def scripted(script: list[list[bytes]], made: list[ScriptedTransport]) -> Any:
    async def connect(factory: Callable[[], asyncio.Protocol]) -> Any:
        protocol = factory()
        transport = ScriptedTransport(protocol, script)
        protocol.connection_made(transport)
        made.append(transport)
        return transport, protocol

    return connect


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
    b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_chunked_body_in_any_pieces(step: int) -> None:
    pieces = [CHUNKED[i : i + step] for i in range(0, len(CHUNKED), step)]
    made: list[ScriptedTransport] = []

    async def main() -> Collect:
        pool = ConnectionPool("http://h:1", connector=scripted([pieces, pieces], made))
        sink = Collect()
        await pool.send(pool.encode("GET", "/x"), sink)
        again = Collect()
        await pool.send(pool.encode("GET", "/x"), again)  # same connection: keep-alive
        assert again.body == b"hello world"
        return sink

    sink = asyncio.run(main())
    assert (sink.status, sink.body, sink.ended) == (200, b"hello world", True)
    assert sink.headers["content-type"] == "text/plain"
    assert len(made) == 1
    assert len(made[0].written) == 2
    assert made[0].written[0].startswith(b"GET /x HTTP/1.1\r\nHost: h:1\r\n")


def test_one_chunk_per_read_is_framed_like_any_split() -> None:
    """A stream's usual read is one whole chunk (the hot path): each is handed on as one
    piece; a chunk extension, two chunks in one read and the last chunk take the general
    parser with the same result."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    reads = [head, b"5\r\nhello\r\n", b"1;x=y\r\n \r\n", b"2\r\nwo\r\n3\r\nrld\r\n"]
    reads += [b"10\r\n" + b"a" * 16 + b"\r\n", b"0\r\n\r\n"]
    made: list[ScriptedTransport] = []

    async def main() -> Collect:
        pool = ConnectionPool("http://h:1", connector=scripted([reads], made))
        sink = Collect()
        await pool.send(pool.encode("GET", "/x"), sink)
        return sink

    sink = asyncio.run(main())
    assert (sink.body, sink.ended) == (b"hello world" + b"a" * 16, True)
    assert len(sink.reads) == 4  # one hand-over per read that carried data


def test_content_length_and_connection_close() -> None:
    body = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
    made: list[ScriptedTransport] = []

    async def main() -> None:
        pool = ConnectionPool("http://h:1", connector=scripted([[body], [body]], made))
        for _ in range(2):
            sink = Collect()
            await pool.send(pool.encode("POST", "/p", b"{}"), sink)
            assert sink.body == b"abc"

    asyncio.run(main())
    assert len(made) == 2  # the server said close: no reuse
    assert b"Content-Length: 2\r\n\r\n{}" in made[0].written[0]


def test_malformed_status_line_is_an_error() -> None:
    async def main() -> None:
        pool = ConnectionPool("http://h:1", connector=scripted([[b"garbage\r\n\r\n"]], []))
        await pool.send(pool.encode("GET", "/"), Collect())

    with pytest.raises(HttpClientError, match="malformed"):
        asyncio.run(main())


HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("reads", "words"),
    [
        # a head that never ends, in pieces: refused past 64 KiB, not buffered for ever
        ([b"HTTP/1.1 200 OK\r\n"] + [b"X-Pad: " + b"a" * 1000 + b"\r\n"] * 80, "response head"),
        ([HEAD, b"5" * 9000], "chunk-size or trailer line"),
        ([HEAD, b"0\r\nX-Trailer: " + b"t" * 9000], "chunk-size or trailer line"),
        ([HEAD + b"3\r\nhello\r\n0\r\n\r\n"], "not followed by CRLF"),  # says 3, sends 5
        ([HEAD, b"3\r\nhel", b"lo\r\n0\r\n\r\n"], "not followed by CRLF"),
    ],
)
def test_what_no_server_sends_is_refused_not_buffered(reads: list[bytes], words: str) -> None:
    made: list[ScriptedTransport] = []
    sink = Collect()

    async def main() -> None:
        pool = ConnectionPool("http://h:1", connector=scripted([reads], made))
        await pool.send(pool.encode("GET", "/"), sink, timeout_s=5)

    with pytest.raises(HttpClientError, match=f"malformed HTTP response: .*{words}"):
        asyncio.run(main())
    assert made[0].closed  # the connection is not reused
    assert b"lo" not in sink.body  # nothing past the wrong size was taken as content


def test_refused_connection_is_an_infrastructure_error() -> None:
    async def main() -> None:
        import socket

        with socket.socket() as probe:  # a port nobody listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        pool = ConnectionPool(f"http://127.0.0.1:{port}")
        await pool.send(pool.encode("GET", "/"), Collect())

    with pytest.raises(InfrastructureError, match="cannot connect"):
        asyncio.run(main())


@pytest.mark.parametrize("url", ["ftp://example.invalid", "https://", "example.invalid:80"])
def test_urls_other_than_http_and_https_are_refused(url: str) -> None:
    with pytest.raises(InputError, match="give http://host:port or https://host:port"):
        ConnectionPool(url)


def test_api_key_is_resolved_into_a_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_TEST_KEY", "s3cret")
    pool = pool_for(Endpoint(base_url="http://h:1/base", api_key="${env:TB_TEST_KEY}"))
    wire = pool.encode("GET", "/v1/models")
    assert wire.startswith(b"GET /base/v1/models HTTP/1.1\r\n")
    assert b"Authorization: Bearer s3cret\r\n" in wire


def test_timeout_aborts_the_request() -> None:
    async def main() -> None:
        hung_up = asyncio.Event()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # never answers; returns when the client hangs up
            writer.close()
            await writer.wait_closed()
            hung_up.set()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            pool = ConnectionPool(f"http://127.0.0.1:{port}")
            with pytest.raises(TimeoutError):
                await pool.send(pool.encode("GET", "/"), Collect(), timeout_s=0.05)
            assert pool.open_connections == 0
            async with asyncio.timeout(5):
                await hung_up.wait()
            server.close()

    asyncio.run(main())
