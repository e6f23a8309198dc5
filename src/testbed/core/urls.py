"""What testbed accepts as a server's base URL (campaign ``url:`` and ``testbed load URL``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from testbed.core.errors import InputError

DEFAULT_PORTS = {"http": 80, "https": 443}


def url_problem(url: str) -> str:
    """What is wrong with ``url`` as a base URL (empty: nothing): it needs an http or https
    scheme, a host, and a port in 1..65535 if it names one."""
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS:
        return f"the scheme is {parts.scheme or 'missing'}, not http or https"
    if not parts.hostname:
        return "it names no host"
    try:
        port = parts.port
    except ValueError as exc:
        return f"its port is not one ({exc})"
    if port == 0:
        return "its port is 0"
    return ""


def check_base_url(url: str) -> str:
    """``url`` without a trailing slash; an :class:`InputError` if it is no base URL."""
    problem = url_problem(url)
    if problem:
        raise InputError(
            f"unsupported URL {url!r}: {problem} — give http://host:port or https://host:port"
        )
    return url.rstrip("/")
