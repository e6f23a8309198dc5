"""Range queries against a Prometheus-compatible HTTP API (``GET /api/v1/query_range``), as
Grafana and ``promtool query range`` send them; Prometheus, Thanos and VictoriaMetrics
answer the same.

:func:`query_range` returns the matrix as plain series (``{"metric": {labels}, "values":
[[unix seconds, float], …]}``). Whatever goes wrong — connection, HTTP status, an error
answer, not JSON — is a :class:`PrometheusError` with the server's own message: a capture
that cannot be taken is a warning of the run, never its failure.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class PrometheusError(Exception):
    """A range query could not be answered; the message says why."""


def query_range(
    url: str,
    query: str,
    start_s: float,
    end_s: float,
    step_s: float,
    *,
    timeout_s: float = 10.0,
    token: str | None = None,
) -> list[dict[str, Any]]:
    """The series of ``query`` from ``start_s`` to ``end_s`` (unix seconds), a point each
    ``step_s``. Blocking: call it in a thread from async code."""
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}", "step": f"{step_s:g}"}
    )
    if not url.startswith(("http://", "https://")):
        raise PrometheusError(f"{url} is not an http(s) URL")
    target = f"{url.rstrip('/')}/api/v1/query_range?{params}"
    request = urllib.request.Request(target)  # noqa: S310 - http(s) only, checked above
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"HTTP {exc.code}: {_error_of(exc.read())}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PrometheusError(f"{url} cannot be reached: {reason}") from exc
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise PrometheusError(f"{url} did not answer with JSON: {body[:120]!r}") from exc
    if answer.get("status") != "success":
        raise PrometheusError(_error_of(body))
    data = answer.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"expected a matrix, got {data.get('resultType')!r}")
    return [
        {
            "metric": dict(item.get("metric") or {}),
            "values": [[float(t), _float(v)] for t, v in item.get("values") or []],
        }
        for item in data.get("result") or []
    ]


def _float(text: Any) -> float | None:
    """A sample value; NaN and infinities (valid in PromQL) become None for JSON."""
    value = float(text)
    return value if math.isfinite(value) else None


def _error_of(body: bytes) -> str:
    try:
        answer = json.loads(body)
    except ValueError:
        return body[:200].decode(errors="replace")
    return f"{answer.get('errorType', 'error')}: {answer.get('error', answer)}"
