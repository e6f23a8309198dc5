"""An endpoint: where a provisioned (or existing) server answers, and how to talk to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Protocol = Literal["openai", "tgi", "tgis"]


@dataclass(frozen=True)
class Tls:
    """How an ``https://`` endpoint's certificate is checked. ``verify=False`` accepts any
    certificate (a self-signed test server); ``ca_bundle`` is a PEM file of the CAs to trust
    instead of the system's."""

    verify: bool = True
    ca_bundle: str | None = None


@dataclass(frozen=True)
class Endpoint:
    """What a backend hands to a probe.

    ``api_key`` may be a ``${env:NAME}`` reference; clients resolve it when they build a
    request header and never log it.
    """

    base_url: str  # e.g. http://127.0.0.1:8123 (no trailing slash)
    protocols: tuple[Protocol, ...] = ("openai",)
    model: str = ""  # the model name the server expects in requests
    server_kind: str = ""  # sim, hf, vllm, tgi, tgis, external
    tokenizer: str | None = None  # a local folder for client-side token counting
    api_key: str | None = None
    metrics_path: str | None = "/metrics"
    #: where metrics_path is served when not at base_url: one URL per pod behind a stack's
    #: metrics Service — each process counts only its own tokens, so all are read and summed
    metrics_urls: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    tls: Tls = field(default_factory=Tls)
    grpc_target: str | None = None  # host:port of the TGIS gRPC service (protocol tgis)
