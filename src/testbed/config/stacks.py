"""A deployment that is a whole serving stack (``server: manifests``).

A stack is any set of Kubernetes objects — llm-d's Gateway + InferencePool + vLLM pods, a
KServe InferenceService, a Helm chart's rendered output — given as YAML files with Jinja
placeholders, or as a kustomization. testbed renders it per treatment with ``values``
(matrix factors reach into them: ``deployments.NAME.values.KEY``), applies it, waits for the
named ``ready`` conditions, reaches the server through ``endpoint`` and deletes every object
it created. docs/stacks.md describes it; the backend's side is
``backends/kubernetes/stack*.py``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from testbed.config.diagnostics import located

#: Protocols a stack's endpoint may speak over HTTP (gRPC needs a port of its own).
StackProtocol = Literal["openai", "tgi"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


#: Kinds whose readiness testbed reads from what they publish, as ``kubectl rollout status``
#: does (``backends/kubernetes/rollout.py``): a ``ready`` entry for them needs no condition.
ROLLOUT_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Pod", "LeaderWorkerSet")


class ReadyCondition(_Strict):
    """One object of the stack that must be ready before probes start: by a named condition,
    or (no condition) by what its kind publishes."""

    kind: str = Field(description="the object's kind (Deployment, Gateway, InferenceService …)")
    name: str = Field(description="the object's metadata.name, as rendered")
    condition: str | None = Field(
        None,
        description="status.conditions[].type that must become True; omitted: ready as its"
        f" kind says ({', '.join(ROLLOUT_KINDS)}: as kubectl rollout status reads them)",
    )
    timeout_s: float | None = Field(
        None, gt=0, description="seconds to wait (default: the deployment's startup_timeout_s)"
    )
    on_false: Literal["error", "wait"] | None = Field(
        None,
        description="a False condition ends the wait as an ERROR (error) or is waited out"
        " (wait); default: error, except reasons that mean 'still starting' (Pending,"
        " MinimumReplicasUnavailable) and the conditions of built-in workloads",
    )

    @model_validator(mode="after")
    def _known_or_named(self) -> ReadyCondition:
        if self.condition is None and self.kind not in ROLLOUT_KINDS:
            raise located(
                f"{self.kind} publishes no readiness testbed knows without a condition — name"
                " the status condition to wait for (e.g. condition: Ready), or wait for one of"
                f" {', '.join(ROLLOUT_KINDS)}",
                "condition",
            )
        return self


class _Endpoint(_Strict):
    protocols: tuple[StackProtocol, ...] = Field(
        ("openai",), min_length=1, description="what the endpoint speaks: openai, tgi"
    )
    path: str = Field(
        "",
        pattern=r"^(/[A-Za-z0-9._~%!$&'()*+,;=:@-]+)*$",
        description="the path the server's API lives under, before every request's own:"
        " /openai for KServe's model servers (/openai/v1/completions); '' (default): the root",
    )


class ServiceEndpoint(_Endpoint):
    """The server is a Service of the stack (or one its operators create)."""

    service: str = Field(description="the Service's name")
    port: int | str = Field(description="the Service's port: its number or its name")


class GatewayEndpoint(_Endpoint):
    """The server is behind a Gateway of the stack; its address comes from status.addresses."""

    gateway: str = Field(description="the Gateway's name")
    port: int = Field(80, gt=0, lt=65536, description="the listener's port")


class StatusEndpoint(_Endpoint):
    """The server's URL is a field of an object's status (KServe's status.url)."""

    url_from: str = Field(
        pattern=r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$",
        description="dotted path of the URL in the object, e.g. status.url",
    )
    kind: str = Field(description="the object's kind")
    name: str = Field(description="the object's name")


StackEndpoint = ServiceEndpoint | GatewayEndpoint | StatusEndpoint
_ENDPOINTS: dict[str, type[_Endpoint]] = {
    "service": ServiceEndpoint,
    "gateway": GatewayEndpoint,
    "url_from": StatusEndpoint,
}


class MetricsTarget(_Strict):
    """Where the stack's server metrics (Prometheus text) are scraped during load and A/B."""

    service: str = Field(description="a Service of the stack")
    port: int | str = Field(description="its port: number or name")
    path: str = Field("/metrics", pattern=r"^/", description="HTTP path of the metrics")


class StackDeployment(_Strict):
    """``server: manifests``: a set of objects testbed applies, waits for and removes."""

    server: Literal["manifests"]
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="unique name")
    extends: str | None = Field(None, description="another deployment this one starts from")
    model: str = Field(
        "", description="the model name requests carry (what the stack's server serves)"
    )
    manifests: str = Field(
        min_length=1,
        description="a YAML file or a folder of them (Jinja placeholders), or a folder with"
        " a kustomization.yaml (rendered by `kubectl kustomize`); relative to the campaign",
    )
    values: dict[str, Any] = Field(
        default_factory=dict, description="placeholders of the manifests: {{ KEY }}"
    )
    templated: bool = Field(
        True,
        description="render the files with Jinja; false: apply them exactly as written (helm"
        " template output that holds {{ }} of its own)",
    )
    ready: list[ReadyCondition] = Field(
        default_factory=list, description="conditions that must all be True, each timed"
    )
    endpoint: StackEndpoint = Field(
        description="{service: NAME, port: P}, {gateway: NAME, port: P} or"
        " {url_from: status.url, kind: K, name: N}; each with protocols: [openai]"
    )
    metrics: MetricsTarget | None = Field(None, description="server metrics: {service, port}")
    tokenizer: str | None = Field(
        None,
        description="a local folder holding the served model's tokenizer.json: token counts"
        " (prompt lengths, output tokens) exact for the model; without it they are the"
        " whitespace estimate",
    )
    startup_timeout_s: float = Field(
        600.0, gt=0, description="default seconds for each ready condition"
    )

    @model_validator(mode="after")
    def _values_need_templates(self) -> StackDeployment:
        if self.values and not self.templated:
            raise located(
                "values are given but templated is false, so nothing would use them — remove"
                " values, or set templated: true",
                "values",
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _endpoint_variant(cls, data: Any) -> Any:
        """Pick the endpoint's variant by its key, so a mistake names the missing key."""
        if not isinstance(data, dict) or not isinstance(data.get("endpoint"), dict):
            return data
        given = [key for key in _ENDPOINTS if key in data["endpoint"]]
        if len(given) != 1:
            raise located(
                "endpoint needs exactly one of service:, gateway:, url_from: (got"
                f" {', '.join(given) or 'none'}) — e.g. endpoint: {{service: NAME, port: 8000}}",
                "endpoint",
            )
        return {**data, "endpoint": _ENDPOINTS[given[0]].model_validate(data["endpoint"])}
