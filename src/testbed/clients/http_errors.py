"""The inference clients' errors: a tree a caller branches on by type, never by message
(STYLE.md habits 8 and 19), as httpx's is.

::

    HttpClientError            no answer came: the transport failed (an InfrastructureError)
    ├── ConnectError           no connection could be opened: refused, unreachable, TLS trust
    ├── TimeoutException       also a builtin TimeoutError (``except TimeoutError`` holds)
    │   ├── ConnectTimeout     no connection within the time allowed
    │   └── ReadTimeout        connected, but no complete answer within the time allowed
    ├── RemoteProtocolError    the server broke the protocol or closed mid-answer
    └── ServerStatusError      an answer, but not the success a caller cannot do without

Each class names its :attr:`~HttpClientError.kind`. Where a failure travels as data — a
request's record, where it is a string — the record carries that kind beside the message
(``error_kind``), set from the type here, and a probe decides on the kind: whether "the
server is down" (every request's kind ``connect``) never depends on the message's words.
:func:`connect_error` writes the message of a failed connect: whose fault, and what to do.
"""

from __future__ import annotations

import errno
import resource
import ssl
from typing import ClassVar, Literal

from testbed.core.errors import InfrastructureError

#: A failure's kind in a record's ``error_kind``: no answer came (connect, timeout, protocol:
#: the client's exception) or the answer is the error (server: a non-2xx status, an error
#: event, an answer cut short, a count that cannot be true).
ErrorKind = Literal["connect", "timeout", "protocol", "server"]


class HttpClientError(InfrastructureError):
    """No answer came: the connection failed or the server broke the protocol."""

    kind: ClassVar[ErrorKind] = "protocol"


class ConnectError(HttpClientError):
    """No connection could be opened (refused, unreachable, a certificate not trusted, no
    file descriptor left): the request never reached the server."""

    kind: ClassVar[ErrorKind] = "connect"


class TimeoutException(HttpClientError, TimeoutError):
    """The time allowed ran out; a builtin :class:`TimeoutError` too."""

    kind: ClassVar[ErrorKind] = "timeout"


class ConnectTimeout(TimeoutException):
    """No connection within the time allowed: the request never reached the server."""

    kind: ClassVar[ErrorKind] = "connect"


class ReadTimeout(TimeoutException):
    """Connected and sent, but the answer did not complete within the time allowed."""


class RemoteProtocolError(HttpClientError):
    """The server broke the protocol: a malformed answer, or the connection closed before
    the answer's framing ended and before any byte of it arrived."""

    kind: ClassVar[ErrorKind] = "protocol"


class ServerStatusError(HttpClientError):
    """The server answered, but not with the success the caller needs to go on (a model
    list, a tokenizer); ``status`` is its HTTP (or HTTP-like gRPC) status."""

    kind: ClassVar[ErrorKind] = "server"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def connect_error(host: str, port: int, exc: OSError) -> ConnectError:
    """The error of a connection to ``host:port`` that could not be opened: a certificate
    the client does not trust, no file descriptor left (the client's own limit), or the
    server's side (nothing listening, host unreachable)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConnectError(
            f"TLS to {host}:{port}: certificate verify failed ({exc.verify_message}) —"
            " trust its CA with tls.ca_bundle (testbed load --ca-bundle), or skip the check"
            " with tls.verify: false (--insecure)"
        )
    if exc.errno in (errno.EMFILE, errno.ENFILE):  # ours, not the server's
        return ConnectError(
            f"cannot connect to {host}:{port}: this process has no file descriptor"
            f" left ({exc.strerror}; ulimit -n is {_open_files_limit()}) — fewer"
            " requests in flight, or more load processes"
        )
    return ConnectError(
        f"cannot connect to {host}:{port}: {exc.strerror or exc};"
        " is the server running and the URL right?"
    )


def _open_files_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
