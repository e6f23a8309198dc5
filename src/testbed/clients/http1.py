"""HTTP/1.1 on one connection: write a request, frame its response, one timestamp per read.

:class:`Http1Connection` is an ``asyncio.Protocol`` (no stream reader layers) that parses
only what a model server sends (status line, headers, ``Content-Length`` or chunked
bodies) and hands every body fragment to a :class:`BodySink` together with the monotonic
time at which the bytes were read from the socket. The keep-alive pool that lends these
connections out is :mod:`testbed.clients.http`.

A connection that closes before its response's head is complete fails the request with
:class:`~testbed.clients.http_errors.RemoteProtocolError` (no answer came); one that closes after
the head but before the body's framing ended (Content-Length not reached, no last chunk)
ends the response with the sink's ``on_cut``: the server answered, then cut its answer
short, and the sink (which knows the protocol) makes that the response's error.

What no server sends is refused, never buffered without end: a head over :data:`MAX_HEAD`
bytes without its blank line, a chunk-size or trailer line over :data:`MAX_LINE`, chunk data
not followed by its CRLF (a wrong chunk size) — each a "malformed HTTP response".

The pool opens :data:`CONNECTION`: this class with its hot path — a read carrying one whole
chunk, the common read of a token-by-token stream — framed by the compiled per-read path
(``_readpath.c``: bytes in, the chunk's data out) when it was built; every other read comes to
:meth:`Http1Connection._parse_read`. Without a C compiler at install time it is this class
alone (the same answers, more CPU per read).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from testbed.clients.http_errors import RemoteProtocolError
from testbed.clients.readpath import compiled
from testbed.core.clock import monotonic_ns

# Parser states of one response.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)
#: States inside a body whose end its framing marks: a close there cuts the body short.
_BODY = frozenset((_LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER))
#: The largest response head (status line and headers) taken: h11 allows 16 KiB, aiohttp
#: 8 KiB a line; 64 KiB leaves room for any real server's and bounds a broken one's.
MAX_HEAD = 64 * 1024
#: The longest chunk-size or trailer line taken.
MAX_LINE = 8 * 1024


class BodySink(Protocol):
    """Receives one response as it arrives; ``t_ns`` is when the bytes were read (or, for
    ``on_sent``, just before the request was written). A sink may also have
    ``on_connect(connect_ns)``, called before ``on_sent`` when a new connection had to be
    opened for the request (the time that took)."""

    def on_sent(self, t_ns: int) -> None: ...

    def on_head(self, status: int, headers: dict[str, str], t_ns: int) -> None: ...

    def on_data(self, data: bytes, t_ns: int) -> None: ...

    def on_end(self, t_ns: int) -> None: ...

    def on_cut(self, reason: str, t_ns: int) -> None:
        """The connection closed after the head, before the body's framing ended; nothing
        more comes (called instead of ``on_end``)."""


class Http1Connection(asyncio.Protocol):
    """One keep-alive connection running at most one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] | None = None  # resolved by connection_lost
        self.reusable = False
        self.closed = False
        self._sink: BodySink | None = None
        self._done: asyncio.Future[None] | None = None
        self._buf = b""
        self._state = _DONE
        self._left = 0
        self._keep_alive = True
        self.got_bytes = False
        self.was_reused = False  # the current request runs on a connection used before
        self.used = False
        self.fresh = False  # opened for the request about to be sent (not warmed, not reused)

    # asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport but have the same methods.
        self.transport = transport  # type: ignore[assignment]
        self.lost = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self.lost is not None and not self.lost.done():
            self.lost.set_result(None)
        if self._state == _UNTIL_CLOSE:
            self._finish(monotonic_ns())
        elif self._state in _BODY and self._sink is not None:
            self._finish(monotonic_ns(), cut=self._cut_reason(exc))
        elif self._done is not None and not self._done.done():
            reason = f": {exc}" if exc else ""
            self._done.set_exception(RemoteProtocolError(f"connection closed mid-response{reason}"))

    def data_received(self, data: bytes) -> None:
        t_ns = monotonic_ns()
        self.got_bytes = True
        sink = self._sink
        if sink is None:
            return  # bytes after a finished response: the connection will not be reused
        if self._state == _CHUNK_SIZE and not self._buf:
            # The hot path of a stream: one whole chunk per read (a token's event).
            eol = data.find(b"\r\n", 0, 10)
            if eol > 0:
                try:
                    size = int(data[:eol], 16)
                except ValueError:  # a chunk extension: the general parser takes it
                    size = 0
                end = eol + 2 + size
                if size and len(data) == end + 2 and data.endswith(b"\r\n"):
                    sink.on_data(data[eol + 2 : end], t_ns)
                    return
        self._parse_read(data, t_ns)

    def _parse_read(self, data: bytes, t_ns: int) -> None:
        """Every read but one whole chunk with nothing buffered (the hot path)."""
        try:
            self._parse(self._buf + data if self._buf else data, t_ns)
        except Exception as exc:  # whatever a broken server sends ends this request only
            self._fail(RemoteProtocolError(f"malformed HTTP response: {type(exc).__name__}: {exc}"))

    # requests ---------------------------------------------------------------------------
    def start(self, payload: bytes, sink: BodySink, done: asyncio.Future[None]) -> None:
        """Send one request; ``done`` resolves when the response has fully arrived."""
        assert self.transport is not None
        self._sink, self._done = sink, done
        self._buf, self._state, self.reusable, self.got_bytes = b"", _HEAD, False, False
        self.transport.write(payload)

    def abort(self) -> None:
        self.reusable = False
        self._sink = None
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc)
        self.abort()

    def _finish(self, t_ns: int, cut: str | None = None) -> None:
        sink, done = self._sink, self._done
        self._sink, self._state = None, _DONE
        self.reusable = self._keep_alive and not self.closed and not self._buf
        if sink is not None:
            if cut is None:
                sink.on_end(t_ns)
            else:
                sink.on_cut(cut, t_ns)
        if done is not None and not done.done():
            done.set_result(None)

    def _cut_reason(self, exc: Exception | None) -> str:
        """How the body was left unfinished, for the response's error."""
        if self._state == _LENGTH:
            what = f"{self._left} bytes of its Content-Length missing"
        else:
            what = "chunked body without its last chunk"
        return f"{what}{f': {exc}' if exc else ''}"

    # parsing ----------------------------------------------------------------------------
    def _parse(self, buf: bytes, t_ns: int) -> None:
        sink = self._sink
        assert sink is not None
        if self._state == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ValueError(f"no end of the response head in its first {MAX_HEAD} bytes")
                self._buf = buf
                return
            self._head(buf[:end], t_ns)
            buf = buf[end + 4 :]
        state = self._state
        if state == _LENGTH:
            take = buf[: self._left]
            self._left -= len(take)
            if take:
                sink.on_data(take, t_ns)
            self._buf = b""
            if self._left == 0:
                self._finish(t_ns)
        elif state == _UNTIL_CLOSE:
            if buf:
                sink.on_data(buf, t_ns)
            self._buf = b""
        elif state != _DONE:
            self._chunked(buf, t_ns, sink)
            if len(self._buf) > MAX_LINE and self._state in (_CHUNK_SIZE, _TRAILER):
                raise ValueError(f"a chunk-size or trailer line longer than {MAX_LINE} bytes")

    def _head(self, head: bytes, t_ns: int) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        self._keep_alive = conn != "close" and not (parts[0] == "HTTP/1.0" and conn != "keep-alive")
        assert self._sink is not None
        self._sink.on_head(status, headers, t_ns)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNK_SIZE
        elif "content-length" in headers:
            self._left = int(headers["content-length"])
            self._state = _LENGTH
            if self._left == 0:
                self._finish(t_ns)
        elif status in (204, 304) or 100 <= status < 200:
            self._finish(t_ns)
        else:
            self._keep_alive = False
            self._state = _UNTIL_CLOSE

    def _chunked(self, buf: bytes, t_ns: int, sink: BodySink) -> None:
        pos, size, state, left = 0, len(buf), self._state, self._left
        pieces: list[bytes] = []
        while pos < size:
            if state == _CHUNK_DATA:
                end = min(size, pos + left)
                pieces.append(buf[pos:end])
                left -= end - pos
                pos = end
                if left == 0:
                    state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                if size - pos < 2:
                    break
                _expect_crlf(buf, pos)
                pos += 2
                state = _CHUNK_SIZE
            elif state == _CHUNK_SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                left = int(buf[pos:eol].split(b";", 1)[0], 16)
                pos = eol + 2
                state = _CHUNK_DATA if left else _TRAILER
            else:  # _TRAILER: header lines until an empty one
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                empty = eol == pos
                pos = eol + 2
                if empty:
                    self._buf = buf[pos:]
                    if pieces:
                        sink.on_data(b"".join(pieces), t_ns)
                    self._finish(t_ns)
                    return
        self._buf = buf[pos:]
        self._state, self._left = state, left
        if pieces:
            sink.on_data(pieces[0] if len(pieces) == 1 else b"".join(pieces), t_ns)


def _expect_crlf(buf: bytes, pos: int) -> None:
    if buf[pos : pos + 2] != b"\r\n":
        raise ValueError("chunk data not followed by CRLF (a wrong chunk size?)")


#: The connection the pool opens (see the module's docstring).
CONNECTION: type[Http1Connection] = Http1Connection
if compiled is not None:
    whole_chunk = compiled.whole_chunk

    class CompiledHttp1Connection(Http1Connection):
        """:class:`Http1Connection` whose hot path frames the read in C
        (``_readpath.whole_chunk``: bytes in, the chunk's data or None out)."""

        def data_received(self, data: bytes) -> None:
            t_ns = monotonic_ns()
            self.got_bytes = True
            sink = self._sink
            if sink is None:
                return  # bytes after a finished response: the connection will not be reused
            if self._state == _CHUNK_SIZE and not self._buf:
                chunk = whole_chunk(data)
                if chunk is not None:
                    sink.on_data(chunk, t_ns)
                    return
            self._parse_read(data, t_ns)

    CONNECTION = CompiledHttp1Connection
