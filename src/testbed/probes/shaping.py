"""Shaped requests on the wire: headers, for the load and A/B probes.

The rules of what may be shaped are :mod:`testbed.config.shaping`'s; here the headers
become bytes (an extra body is merged by the API's object: :meth:`testbed.clients.apis.Api.
merge`). Headers given for every request go into the connection's fixed header block
(HTTP) or its metadata (gRPC), so discovery and ``/tokenize`` carry them too (a gateway may
route on them) and a request pays nothing for them; a dataset row's own headers go into
that row's encoded request, once, before the load starts. ``${env:NAME}`` references are
resolved here, at the edge, and :func:`secret_values` names what they revealed so a record
that echoes one (a server's error quoting a token) is masked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from testbed.clients.endpoint import Endpoint
from testbed.clients.http import ConnectionPool, with_header
from testbed.clients.tgis import TgisPool
from testbed.core.errors import InputError
from testbed.core.secrets import resolve, values


def resolved(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with their ``${env:NAME}`` references read now."""
    return {name: resolve(value) for name, value in headers.items()}


def secret_values(headers: Iterable[Mapping[str, str]]) -> list[str]:
    """What the references of these header maps resolve to (for :func:`~testbed.core.
    secrets.mask`)."""
    return values(value for each in headers for value in each.values())


def _auth(endpoint: Endpoint, headers: Mapping[str, str]) -> dict[str, str]:
    """The endpoint's API key as a bearer token — unless the headers set Authorization too,
    which is two answers to one question."""
    if not endpoint.api_key:
        return {}
    if any(name.lower() == "authorization" for name in headers):
        raise InputError(
            "header Authorization is given, and the endpoint has an api_key that sends it"
            " too — give one of them"
        )
    return {"Authorization": f"Bearer {resolve(endpoint.api_key)}"}


def http_pool(
    endpoint: Endpoint, headers: Mapping[str, str], *, max_connections: int = 1024
) -> ConnectionPool:
    """A pool to ``endpoint`` whose every request carries its API key and ``headers``."""
    return ConnectionPool(
        endpoint.base_url,
        headers={**_auth(endpoint, headers), **resolved(headers)},
        max_connections=max_connections,
        tls=endpoint.tls,
    )


def grpc_pool(endpoint: Endpoint, headers: Mapping[str, str]) -> TgisPool:
    """A gRPC channel to ``endpoint`` whose every call carries ``headers`` as metadata
    (lower-cased names, as HTTP/2 requires)."""
    from testbed.clients import tgis

    _auth(endpoint, headers)
    metadata = tuple((name.lower(), value) for name, value in resolved(headers).items())
    return tgis.pool_for(endpoint, metadata=metadata)


def with_headers(payload: bytes, headers: Mapping[str, str]) -> bytes:
    """An encoded HTTP request with ``headers`` (resolved now) added."""
    for name, value in resolved(headers).items():
        payload = with_header(payload, name.encode("latin-1"), value.encode("latin-1"))
    return payload
