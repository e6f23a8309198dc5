"""HTTP/2 and gRPC wire facts that cleartext gRPC needs on both sides, and the frames written.

Shared by testbed's gRPC client (:mod:`testbed.clients.grpc_h2`) and the simulator's gRPC
server (:mod:`testbed.servers.sim.h2`). HTTP/2 (RFC 9113): frame types, flags, settings,
error codes, the connection preface and the frame encoders. HPACK (RFC 7541), encoding side
only: header blocks made of static-table entries and literals *without indexing* (never
indexed for credentials), so a block leaves the connection's dynamic table alone and one
block serves every request to a method, on any connection (built once). gRPC over HTTP/2
(grpc/doc/PROTOCOL-HTTP2.md): status code names, ``grpc-timeout`` both ways, the
percent-encoding of ``grpc-message``, the status of an HTTP answer without ``grpc-status``
and of a reset stream. Decoding the peer's header blocks needs the stateful decoder of the
``hpack`` package.
"""

from __future__ import annotations

import math
from urllib.parse import quote, unquote

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
# Flags.
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# Settings.
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 1, 2, 3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 4, 5, 6
# Error codes, by number.
ERRORS = (
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
)
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR = 0, 1, 3, 6
REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 7, 8, 9, 11
MAX_WINDOW = 2**31 - 1
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
MAX_FRAME = 2**24 - 1
#: The largest header block taken (HEADERS and its CONTINUATIONs, as sent): hpack's decoder
#: refuses a decoded list over 64 KiB; this bounds what is kept before decoding.
MAX_HEADER_BLOCK = 64 * 1024

#: gRPC status codes, by number.
GRPC_CODES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
#: The gRPC status of an HTTP answer that has no ``grpc-status`` (PROTOCOL-HTTP2.md).
HTTP_TO_GRPC = {
    400: "INTERNAL",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "UNIMPLEMENTED",
    429: "UNAVAILABLE",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "UNAVAILABLE",
}
#: The gRPC status of a stream the server reset, by HTTP/2 error code (others: INTERNAL).
RESET_TO_GRPC = {
    REFUSED_STREAM: "UNAVAILABLE",
    CANCEL: "CANCELLED",
    11: "RESOURCE_EXHAUSTED",
    12: "PERMISSION_DENIED",
}


class H2Error(Exception):
    """A connection error (RFC 9113 §5.4.1): the code a GOAWAY carries, and why."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def unpad(payload: bytes) -> bytes:
    """A PADDED frame's payload without its pad length and padding."""
    pad = payload[0] if payload else 0
    if pad >= len(payload):
        raise H2Error(PROTOCOL_ERROR, "padding longer than the frame")
    return payload[1 : len(payload) - pad]


def header_fragment(flags: int, payload: bytes) -> bytes:
    """A HEADERS frame's piece of the header block (padding and priority taken off)."""
    if flags & PADDED:
        payload = unpad(payload)
    return payload[5:] if flags & PRIORITY_FLAG else payload


def continue_block(block: bytearray, fragment: bytes) -> None:
    """Add a CONTINUATION's ``fragment`` to a header ``block``; a block that grows past
    :data:`MAX_HEADER_BLOCK` (a CONTINUATION flood) is a connection error."""
    block += fragment
    if len(block) > MAX_HEADER_BLOCK:
        raise H2Error(ENHANCE_YOUR_CALM, f"a header block over {MAX_HEADER_BLOCK} bytes")


def settings_values(payload: bytes) -> list[tuple[int, int]]:
    """A SETTINGS frame's ``(identifier, value)`` pairs, in order. What RFC 9113 §6.5.2
    makes a connection error is one: a payload that is not whole pairs, ENABLE_PUSH other
    than 0 or 1, an initial window above 2^31 - 1, a MAX_FRAME_SIZE outside 2^14..2^24 - 1."""
    if len(payload) % 6:
        raise H2Error(FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes")
    pairs = [
        (
            int.from_bytes(payload[pos : pos + 2], "big"),
            int.from_bytes(payload[pos + 2 : pos + 6], "big"),
        )
        for pos in range(0, len(payload), 6)
    ]
    for key, value in pairs:
        if key == INITIAL_WINDOW_SIZE and value > MAX_WINDOW:
            raise H2Error(FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value} above 2^31-1")
        if key == MAX_FRAME_SIZE and not DEFAULT_FRAME <= value <= MAX_FRAME:
            raise H2Error(PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value} outside 2^14..2^24-1")
        if key == ENABLE_PUSH and value > 1:
            raise H2Error(PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
    return pairs


def error_name(code: int) -> str:
    return ERRORS[code] if 0 <= code < len(ERRORS) else f"error {code:#x}"


def grpc_code(number: bytes) -> str:
    """The name of a ``grpc-status`` value (an unknown or malformed one is UNKNOWN)."""
    if number == b"0":
        return "OK"
    try:
        return GRPC_CODES[int(number)]
    except (ValueError, IndexError):
        return "UNKNOWN"


def grpc_message(value: bytes) -> str:
    """A ``grpc-message`` value, percent-decoded (as UTF-8; what is not stays replaced)."""
    text = value.decode("utf-8", "replace")
    return unquote(text, errors="replace") if "%" in text else text


def grpc_message_field(text: str) -> str:
    """``text`` as a ``grpc-message`` value: UTF-8, percent-encoded outside printable ASCII
    (and ``%`` itself)."""
    return quote(text, safe="".join(chr(c) for c in range(0x20, 0x7F) if c != 0x25))


def parse_timeout(value: str) -> float | None:
    """The seconds of a ``grpc-timeout`` value (``300m``, ``5S``), None when malformed."""
    units = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
    digits, unit = value[:-1], value[-1:]
    if not digits.isdigit() or len(digits) > 8 or unit not in units:
        return None
    return int(digits) * units[unit]


def length_prefixed(message: bytes) -> bytes:
    """``message`` as gRPC sends it in DATA: uncompressed, with its 4-byte length prefix."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return (
        len(payload).to_bytes(3, "big")
        + bytes((kind, flags))
        + stream_id.to_bytes(4, "big")
        + payload
    )


def data_frames(
    stream_id: int, pending: bytes, window: int, max_frame: int, *, end_stream: bool
) -> tuple[bytes, int]:
    """As much of ``pending`` as ``window`` (the smaller of the stream's and the connection's
    send windows) lets through, as DATA frames of at most ``max_frame`` bytes — the last
    one with END_STREAM when ``end_stream`` and it carries the end of ``pending``; the frames
    and how many bytes they carry."""
    limit = min(len(pending), window)
    out = []
    pos = 0
    while pos < limit:
        piece = pending[pos : pos + min(max_frame, limit - pos)]
        pos += len(piece)
        flags = END_STREAM if end_stream and pos == len(pending) else 0
        out.append(frame(DATA, flags, stream_id, piece))
    return b"".join(out), pos


def settings(values: dict[int, int]) -> bytes:
    body = b"".join(
        key.to_bytes(2, "big") + value.to_bytes(4, "big") for key, value in values.items()
    )
    return frame(SETTINGS, 0, 0, body)


def window_update(stream_id: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream_id, increment.to_bytes(4, "big"))


def rst_stream(stream_id: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, code.to_bytes(4, "big"))


def goaway(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    payload = last_stream_id.to_bytes(4, "big") + code.to_bytes(4, "big") + debug
    return frame(GOAWAY, 0, 0, payload)


def header_frames(stream_id: int, block: bytes, max_frame: int, *, end_stream: bool) -> bytes:
    """A header block as one HEADERS frame, or HEADERS and CONTINUATIONs if it is longer
    than the server's largest frame."""
    flags = END_STREAM if end_stream else 0
    if len(block) <= max_frame:
        return frame(HEADERS, flags | END_HEADERS, stream_id, block)
    pieces = [block[i : i + max_frame] for i in range(0, len(block), max_frame)]
    out = [frame(HEADERS, flags, stream_id, pieces[0])]
    out += [frame(CONTINUATION, 0, stream_id, p) for p in pieces[1:-1]]
    out.append(frame(CONTINUATION, END_HEADERS, stream_id, pieces[-1]))
    return b"".join(out)


# HPACK, encoding side ------------------------------------------------------------------------
def _integer(value: int, prefix_bits: int, first: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode("latin-1")
    return _integer(len(raw), 7, 0) + raw  # not Huffman-coded


def literal(name: str, value: str, *, sensitive: bool = False) -> bytes:
    """One header field as a literal with a new name, without indexing (``never indexed``
    when ``sensitive``: intermediaries must not compress it either)."""
    return (b"\x10" if sensitive else b"\x00") + _string(name) + _string(value)


#: ``:method: POST`` and ``:scheme: http``, static-table entries 3 and 6.
_POST_HTTP = b"\x83\x86"
_SENSITIVE = frozenset(("authorization", "proxy-authorization", "cookie"))


def request_block(path: str, authority: str, metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
    """The header block of a gRPC request to ``path`` (the deadline goes after it:
    :func:`timeout_field`)."""
    fields = [
        _POST_HTTP,
        literal(":path", path),
        literal(":authority", authority),
        literal("content-type", "application/grpc"),
        literal("te", "trailers"),
        literal("user-agent", "testbed-grpc"),
    ]
    fields += [literal(k.lower(), v, sensitive=k.lower() in _SENSITIVE) for k, v in metadata]
    return b"".join(fields)


#: A response's header block: ``:status: 200`` (static entry 8) and the gRPC content type.
RESPONSE_BLOCK = b"\x88" + literal("content-type", "application/grpc")


def trailers_block(code: int, message: str = "") -> bytes:
    """The trailers of a call that ended with status ``code`` (and ``message``)."""
    block = literal("grpc-status", str(code))
    if message:
        block += literal("grpc-message", grpc_message_field(message))
    return block


def timeout_field(seconds: float) -> bytes:
    """``grpc-timeout`` for a deadline ``seconds`` away (at most 8 digits, rounded up)."""
    millis = max(1, math.ceil(seconds * 1000))
    value = f"{millis}m" if millis < 10**8 else f"{min(math.ceil(seconds), 10**8 - 1)}S"
    return literal("grpc-timeout", value)
