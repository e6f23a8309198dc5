"""The HTTP client's errors: one class, and the translation of a failed connect into a
message that says whose fault it is and what to do (STYLE.md habit 8)."""

from __future__ import annotations

import errno
import resource
import ssl

from testbed.core.errors import InfrastructureError


class HttpClientError(InfrastructureError):
    """The connection failed or the server broke the HTTP protocol."""


def connect_error(host: str, port: int, exc: OSError) -> HttpClientError:
    """The error of a connection to ``host:port`` that could not be opened: a certificate
    the client does not trust, no file descriptor left (the client's own limit), or the
    server's side (nothing listening, host unreachable)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return HttpClientError(
            f"TLS to {host}:{port}: certificate verify failed ({exc.verify_message}) —"
            " trust its CA with tls.ca_bundle (testbed load --ca-bundle), or skip the check"
            " with tls.verify: false (--insecure)"
        )
    if exc.errno in (errno.EMFILE, errno.ENFILE):  # ours, not the server's
        return HttpClientError(
            f"cannot connect to {host}:{port}: this process has no file descriptor"
            f" left ({exc.strerror}; ulimit -n is {_open_files_limit()}) — fewer"
            " requests in flight, or more load processes"
        )
    return HttpClientError(
        f"cannot connect to {host}:{port}: {exc.strerror or exc};"
        " is the server running and the URL right?"
    )


def _open_files_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
