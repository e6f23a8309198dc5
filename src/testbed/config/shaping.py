"""How a probe shapes each request beyond its prompt: headers, an extra body, a model mix.

Shared by the ``load:`` and ``ab:`` sections and by a JSONL dataset's rows, so that one
rule says what may be sent:

- **headers** go with every request (P/D sidecars, gateways and tenants read them). A
  header the protocol needs (``Host``, ``Content-Type``, ``Content-Length`` …) or the one
  testbed joins records by (``x-request-id``) is refused: testbed writes those itself. A
  header that carries a secret (``Authorization``, ``x-api-key``, any name with ``token``,
  ``secret``, ``key``, ``auth``, ``password``, ``cookie`` …) takes its value as a
  ``${env:NAME}`` reference, as every secret of a campaign does: the campaign, the plan,
  summary.json and the report then show ``***``, and the value is read where the request
  is sent (an in-cluster worker reads it from its own environment).
- **extra_body** is merged into each request's JSON body (sampling parameters such as
  ``temperature``, ``top_p``, ``stop``, ``seed``, ``logprobs``, ``ignore_eos``). The fields
  testbed sets from other settings (``model``, ``prompt``, ``messages``, ``stream``,
  ``max_tokens`` …) are refused, naming the setting that owns each.
- **models** is a traffic mix over models or LoRA adapters served by one endpoint:
  ``[{name, weight}]`` (a list of names means equal weights).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from testbed.core.secrets import is_reference

#: Headers of the protocol itself (and the record's join key): never the user's to set.
PROTOCOL_HEADERS = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "x-request-id",
    }
)
#: Words that make a header name a secret's (matched in the lower-cased name).
_SECRET_WORDS = ("authorization", "auth", "token", "secret", "password", "cookie", "key")
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)

#: Body fields testbed writes from another setting, and that setting.
BODY_OWNED = {
    "model": "load.model or load.models (a dataset row: its 'model')",
    "prompt": "the dataset",
    "messages": "the dataset",
    "inputs": "the dataset",
    "stream": "load.stream (testbed load --no-stream)",
    "max_tokens": "the dataset's output_tokens",
    "max_completion_tokens": "the dataset's output_tokens",
    "max_new_tokens": "the dataset's output_tokens",
}


def carries_secret(name: str) -> bool:
    """Whether a header named ``name`` carries a credential (its value is never shown)."""
    lower = name.lower()
    return any(word in lower for word in _SECRET_WORDS)


def header_problem(name: Any, value: Any) -> str | None:
    """Why ``name: value`` may not be sent as a request header (None when it may)."""
    if not isinstance(name, str) or not _NAME.match(name):
        return f"header name {name!r} is not an HTTP field name (letters, digits, - and _)"
    if not isinstance(value, str):
        return f"header {name}: its value must be a string, got {value!r}"
    if any(c in value for c in "\r\n\0"):
        return f"header {name}: its value has a line break or NUL (it would end the header)"
    if name.lower() in PROTOCOL_HEADERS:
        return (
            f"header {name} is the protocol's own: testbed writes it itself for every request"
            " (remove it)"
        )
    if carries_secret(name) and not is_reference(value):
        return (
            f"header {name} carries a secret: give its value as a ${{env:NAME}} reference"
            f" (e.g. {name}=Bearer ${{env:TOKEN}}), never the secret itself — it would be"
            " written into the run's files"
        )
    return None


def headers_problem(headers: dict[str, Any]) -> str | None:
    """The first reason ``headers`` may not be sent (None when they all may)."""
    seen: set[str] = set()
    for name, value in headers.items():
        problem = header_problem(name, value)
        if problem is not None:
            return problem
        if name.lower() in seen:
            return f"header {name} is given twice (names are case-insensitive)"
        seen.add(name.lower())
    return None


def extra_body_problem(body: dict[str, Any]) -> str | None:
    """Why ``body`` may not be merged into a request body (None when it may)."""
    for key in body:
        if key in BODY_OWNED:
            return f"extra_body.{key}: testbed sets it from {BODY_OWNED[key]} — set it there"
    return None


def check_headers(value: dict[str, Any]) -> dict[str, Any]:
    """A field validator's body: ``value`` unchanged, or ValueError saying what is wrong."""
    problem = headers_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def check_extra_body(value: dict[str, Any]) -> dict[str, Any]:
    """A field validator's body: ``value`` unchanged, or ValueError saying what is wrong."""
    problem = extra_body_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class ModelShare(BaseModel):
    """One model (or LoRA adapter) of a traffic mix and its share of the requests."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1, description="Model or adapter name, as the server serves it.")
    weight: float = Field(1.0, gt=0, description="Relative share of the requests.")


def models_shorthand(value: Any) -> Any:
    """``[a, b]`` means equal weights; ``{a: 3, b: 1}`` names each weight."""
    if isinstance(value, dict):
        return [{"name": name, "weight": weight} for name, weight in value.items()]
    if isinstance(value, list):
        return [{"name": v} if isinstance(v, str) else v for v in value]
    return value
