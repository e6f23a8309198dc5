"""Foreign errors of the kubernetes client, translated into testbed's tree at the boundary.

The API's ``Status`` body carries a human message ("pods \"x\" is forbidden: User … cannot
create resource \"pods\" …"); that message, what testbed was doing, and the fix for the
common cases (RBAC, an unreachable server) become one line a user can act on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from testbed.core.errors import (
    ClusterAccessDenied,
    ClusterConflict,
    ClusterError,
    ClusterNotFound,
    ClusterUnreachable,
)

#: kubernetes.stream's ApiException reason for a refused upgrade: status, headers, body.
_HANDSHAKE = re.compile(r"Handshake status (\d{3})[^-]*-\+-\+- .*? -\+-\+- (.*)\Z", re.S)
_BY_STATUS: dict[int, type[ClusterError]] = {
    401: ClusterAccessDenied,
    403: ClusterAccessDenied,
    404: ClusterNotFound,
    409: ClusterConflict,
}


def status_message(body: Any) -> tuple[str, str]:
    """``(message, reason)`` of an API ``Status`` body (bytes, text or dict); empty if none."""
    data = body
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except ValueError:
            return body.strip()[:500], ""
    if isinstance(data, dict):
        return str(data.get("message") or ""), str(data.get("reason") or "")
    return "", ""


def from_status(status: int, body: Any, doing: str) -> ClusterError:
    """The testbed error for an HTTP ``status`` answered to ``doing`` ("create Deployment x")."""
    message, reason = status_message(body)
    kind = _BY_STATUS.get(status, ClusterError)
    text = f"{doing}: the cluster answered {status}" + (f" {reason}" if reason else "")
    if message:
        text += f": {message}"
    if kind is ClusterAccessDenied:
        text += (
            " — grant the permission (docs/kubernetes.md has the Role testbed needs) or check"
            " the token"
        )
    return kind(text, status=status, reason=reason)


def translate(exc: BaseException, doing: str) -> ClusterError:
    """A client exception (ApiException, urllib3/ssl/socket errors) as a testbed error."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return from_status(status, getattr(exc, "body", None) or getattr(exc, "data", None), doing)
    handshake = _HANDSHAKE.match(str(getattr(exc, "reason", "") or ""))
    if handshake:  # kubernetes.stream: a refused websocket upgrade (exec, port-forward)
        return from_status(int(handshake.group(1)), handshake.group(2), doing)
    return ClusterUnreachable(
        f"{doing}: the API server did not answer ({type(exc).__name__}: {exc}); check the"
        " server URL, the kubeconfig context and the network"
    )
