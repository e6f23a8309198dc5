"""SPDY/3.1 framing, as much of it as ``kubectl port-forward`` speaks (draft-mbelshe-spdy-3.1).

kubectl 1.31+ tunnels a SPDY session through a websocket (subprotocol
``SPDY/3.1+portforward.k8s.io``): the websocket's binary messages, concatenated, are the
SPDY byte stream. A frame is 8 header bytes then its payload:

- control: ``1`` bit, version (15 bits, 3), type (16), flags (8), length (24);
- data: ``0`` bit, stream id (31 bits), flags (8, ``FIN`` = 1), length (24).

Header blocks (in SYN_STREAM, SYN_REPLY, HEADERS) are a count and length-prefixed names
and values, all 32-bit big-endian, compressed by one zlib stream per direction seeded
with the protocol's dictionary. moby/spdystream (kubectl's side) does no flow control, so
WINDOW_UPDATE and SETTINGS are read and ignored.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
FIN = 0x01
VERSION = 3
MAX_DATA = 64 * 1024

# The header-compression dictionary of SPDY/3 (section 2.6.10.1): these names, each with
# its 32-bit length before it, then this run of common values.
# fmt: off
_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization",
    "cache-control", "connection", "content-base", "content-encoding", "content-language",
    "content-length", "content-location", "content-md5", "content-range", "content-type",
    "date", "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since",
    "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
    "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent",
    "vary", "via", "warning", "www-authenticate", "method", "get", "status", "200 OK",
    "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin",
)
# fmt: on
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00"
    " Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


class ProtocolError(Exception):
    """The peer sent something that is not SPDY/3.1."""


@dataclass(frozen=True)
class Frame:
    """One frame: ``control`` frames have ``type``; data frames have ``stream_id``."""

    control: bool
    type: int
    stream_id: int
    flags: int
    payload: bytes

    @property
    def fin(self) -> bool:
        return bool(self.flags & FIN)


def take_frame(buffer: bytearray) -> Frame | None:
    """Remove and return the first whole frame of ``buffer`` (None: not all here yet)."""
    if len(buffer) < 8:
        return None
    first, second = struct.unpack_from(">II", buffer)
    length = second & 0xFFFFFF
    if len(buffer) < 8 + length:
        return None
    payload = bytes(buffer[8 : 8 + length])
    del buffer[: 8 + length]
    flags = second >> 24
    if first & 0x80000000:
        if (first >> 16) & 0x7FFF != VERSION:
            raise ProtocolError(f"SPDY version {(first >> 16) & 0x7FFF}, not {VERSION}")
        stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF if len(payload) >= 4 else 0
        return Frame(True, first & 0xFFFF, stream_id, flags, payload)
    return Frame(False, 0, first & 0x7FFFFFFF, flags, payload)


def data_frame(stream_id: int, data: bytes, fin: bool = False) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (FIN if fin else 0) << 24 | len(data)) + data


def control_frame(type_: int, payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, type_, flags << 24 | len(payload)) + payload


class HeaderCodec:
    """The two zlib streams of one session: the peer's blocks in, ours out."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def decode(self, block: bytes) -> dict[str, str]:
        """Names lower-cased; a name's several values joined by NUL, as sent."""
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"header block: {exc}") from exc
        headers: dict[str, str] = {}
        try:
            (count,), at = struct.unpack_from(">I", raw), 4
            for _ in range(count):
                (size,) = struct.unpack_from(">I", raw, at)
                name = raw[at + 4 : at + 4 + size].decode()
                at += 4 + size
                (size,) = struct.unpack_from(">I", raw, at)
                headers[name.lower()] = raw[at + 4 : at + 4 + size].decode()
                at += 4 + size
        except (struct.error, UnicodeDecodeError) as exc:
            raise ProtocolError(f"header block: {exc}") from exc
        return headers

    def encode(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            raw += struct.pack(">I", len(name)) + name.encode()
            raw += struct.pack(">I", len(value)) + value.encode()
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        return control_frame(SYN_REPLY, struct.pack(">I", stream_id) + self.encode(headers or {}))
