"""TLS for the HTTP client: the ``ssl`` context an ``https://`` endpoint is spoken with."""

from __future__ import annotations

import ssl

from testbed.clients.endpoint import Tls
from testbed.core.errors import InputError


def ssl_context(tls: Tls) -> ssl.SSLContext:
    """The client's TLS settings: the system's CAs (or ``ca_bundle``'s), or no check at all."""
    try:
        context = ssl.create_default_context(cafile=tls.ca_bundle)
    except (OSError, ssl.SSLError) as exc:  # FileNotFoundError, or not a PEM bundle
        raise InputError(
            f"ca_bundle {tls.ca_bundle}: cannot load CA certificates from it ({exc}) — give a"
            " PEM file"
        ) from exc
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
