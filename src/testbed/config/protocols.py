"""Whether a probe can reach a deployment's server: the protocols a deployment serves, the
ones a probe section asks of it, and the message when they do not meet.

A probe over a protocol its server does not serve tests nothing (openai cases against a
gRPC-only TGIS were each SKIPPED, and the run was green), so validation refuses it —
exit 2, at the probe's field, with the fix — for the campaign as written
(``Campaign._protocol_problem``) and for every treatment a matrix makes
(``plan.expand``). Case files may still name a protocol per case (``protocol: both``); a
case whose protocol its server lacks is a visible partial skip, not a refusal. An
embeddings case (``api: embeddings``) is the exception: a server without ``/v1/embeddings``
(hf, tgi) cannot run it at all, so it is refused (:func:`api_missing`).
"""

from __future__ import annotations

from typing import Any

from testbed.config.embeddings import ENDPOINTS
from testbed.config.server_kinds import ServerProtocol, kind_of

#: The field of each probe section that names its protocol.
FIELDS = {"correctness": "protocol", "load": "api", "ab": "api"}

#: What each value of that field asks of the server.
_ASKS: dict[str, tuple[ServerProtocol, ...]] = {
    "openai": ("openai",),
    "completions": ("openai",),
    "chat": ("openai",),
    "embeddings": ("openai",),
    "responses": ("openai",),
    "tgi": ("tgi",),
    "tgis": ("tgis",),
    "both": ("openai", "tgi"),
}

#: The value of each probe's field that asks for one protocol (for the fix).
_VALUE_FOR = {
    "correctness": {"openai": "openai", "tgi": "tgi", "tgis": "tgis"},
    "load": {"openai": "completions", "tgi": "tgi", "tgis": "tgis"},
    "ab": {"openai": "completions", "tgi": "tgi", "tgis": "tgis"},
}


def served(deployment: Any) -> tuple[ServerProtocol, ...]:
    """The protocols ``deployment`` serves, as its endpoint will list them: its kind's; an
    own server's ``params.protocols``; an external URL's ``protocol``; a stack endpoint's."""
    kind = kind_of(deployment)
    if kind.stack:
        return tuple(deployment.endpoint.protocols)
    if kind.tgis_by == "protocol":
        return (deployment.protocol,)
    if kind.tgis_by == "params":
        return tuple(deployment.params.protocols) or kind.protocols
    return kind.protocols


def unreachable(probe: str, value: str | None, deployment: Any) -> str | None:
    """Why ``probe`` asking protocol ``value`` (its section's ``asks``: the value of its
    field in :data:`FIELDS`) cannot reach ``deployment``'s server (the message, to follow
    the field's name, names the server and the fix), or None."""
    field = FIELDS.get(probe)
    if value is None or value not in _ASKS:
        return None
    offered = served(deployment)
    missing = [p for p in _ASKS[value] if p not in offered]
    kind = kind_of(deployment)
    if not missing:
        return _endpoint_missing(probe, field, value, deployment)
    fixes = [f"{probe}.{field}: {_VALUE_FOR[probe][p]}" for p in offered if p in _ASKS]
    fix = f"set {' or '.join(dict.fromkeys(fixes))}" if fixes else "use another deployment"
    if "tgis" in missing:
        fix = f"{kind.tgis_fix}, or {fix}"
    elif kind.tgis_by == "params":
        fix = f"add {', '.join(missing)} to its params.protocols, or {fix}"
    if probe != "ab":
        fix += f", or leave it out of {probe}.deployments"
    return (
        f"{value} needs {' and '.join(missing)}, but deployment '{deployment.name}'"
        f" ({deployment.server}) serves only {', '.join(offered)} — {fix}"
    )


def api_missing(api: str, deployment: Any) -> str | None:
    """Why ``deployment``'s server cannot answer OpenAI's ``/v1/{api}`` (``embeddings``,
    ``responses``) — it speaks no OpenAI, or not that endpoint — in words naming the
    deployment and what it serves; None when it can. For what one case asks (an embeddings
    case of the correctness probe), where a probe's field does not say it."""
    offered = served(deployment)
    named = f"deployment '{deployment.name}' ({deployment.server})"
    if "openai" not in offered:
        return f"{named} serves only {', '.join(offered)}, not OpenAI's /v1/{api}"
    if api in ENDPOINTS and api not in kind_of(deployment).endpoints:
        return f"{named} serves /v1/completions and /v1/chat/completions only, not /v1/{api}"
    return None


def _endpoint_missing(probe: str, field: str | None, value: str, deployment: Any) -> str | None:
    """Why a server that speaks OpenAI lacks the endpoint ``value`` asks for (``/v1/embeddings``,
    ``/v1/responses``), or None."""
    kind = kind_of(deployment)
    if value not in ENDPOINTS or value in kind.endpoints:
        return None
    fix = f"set {probe}.{field}: completions or chat"
    if probe != "ab":
        fix += f", or leave it out of {probe}.deployments"
    return (
        f"{value} needs /v1/{value}, but deployment '{deployment.name}' ({deployment.server})"
        f" serves /v1/completions and /v1/chat/completions only — use a server that serves it"
        f" (vllm, sim), or {fix}"
    )
