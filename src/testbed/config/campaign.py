"""The whole campaign: name, backend, deployments, matrix, probes, execution, presets."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from testbed.config.ab import AbProbe
from testbed.config.correctness import CorrectnessProbe
from testbed.config.deployments import Deployment, Strict
from testbed.config.execution import Execution
from testbed.config.load import LoadProbe
from testbed.config.matrix import Matrix
from testbed.config.scale import ScaleProbe


class LocalBackend(Strict):
    """Servers are child processes on 127.0.0.1 of this machine (the default)."""

    kind: Literal["local"] = "local"


class KubernetesBackend(Strict):
    """Workers are pods of a cluster, reached with the official kubernetes client."""

    kind: Literal["kubernetes"]
    namespace: str | None = Field(None, description="default: one namespace per run")
    context: str | None = Field(None, description="kubeconfig context")
    image: str = Field("testbed:latest", description="testbed image for in-cluster probes")
    service_account: str | None = None
    model_pvc: str | None = Field(None, description="PVC holding model folders")
    scheduled_timeout_s: float = Field(300.0, gt=0)
    ready_timeout_s: float = Field(900.0, gt=0)


class ExternalBackend(Strict):
    """Nothing is provisioned: every deployment is a URL that already serves."""

    kind: Literal["external"]


Backend = Annotated[LocalBackend | KubernetesBackend | ExternalBackend, Field(discriminator="kind")]


class Results(Strict):
    """Where results go beyond the run directory."""

    dir: str = Field("runs", description="parent of run directories, relative to the cwd")
    index: str | None = Field(
        None, description="results index: SQLAlchemy URL (default sqlite in the runs dir)"
    )
    upload: str | None = Field(None, description="s3://bucket/prefix to copy the run dir to")
    s3_endpoint_url: str | None = Field(None, description="for MinIO-compatible stores")
    thresholds: dict[str, str | float] = Field(
        default_factory=dict,
        description="testbed compare thresholds by metric pattern, e.g. {ttft_ms.p99: 10%}",
    )


class Campaign(Strict):
    """One campaign file, validated. ``presets`` are applied by the loader and kept here
    only so that ``testbed schema`` documents them."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="campaign name")
    description: str = ""
    backend: Backend = Field(default_factory=LocalBackend)
    deployments: list[Deployment] = Field(default_factory=list)
    matrix: Matrix | None = None
    correctness: CorrectnessProbe | None = None
    load: LoadProbe | None = None
    ab: AbProbe | None = None
    scale: ScaleProbe | None = None
    execution: Execution = Field(default_factory=Execution)
    results: Results = Field(default_factory=Results)
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_shorthand(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _cross_section(self) -> Campaign:
        names = [d.name for d in self.deployments]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"deployment names must be unique; repeated: {', '.join(dupes)}")
        if not any((self.correctness, self.load, self.ab, self.scale)):
            raise ValueError(
                "no probe configured — add a correctness:, load:, ab: or scale: section"
            )
        if (self.correctness or self.load or self.ab) and not self.deployments:
            raise ValueError("probes need deployments — add a `deployments:` list")
        for role in ("stable", "canary"):
            name = getattr(self.ab, role) if self.ab else None
            if name is not None and name not in names:
                raise ValueError(
                    f"ab.{role} '{name}' is not a deployment; known: {', '.join(names)}"
                )
        for section in (self.correctness, self.load):
            unknown = sorted(set(section.deployments or []) - set(names)) if section else []
            if unknown:
                raise ValueError(
                    f"probe deployments {', '.join(unknown)} are not deployments; known:"
                    f" {', '.join(names)}"
                )
        ref = self.correctness.reference if self.correctness else None
        if ref is not None and ref not in names:
            raise ValueError(f"correctness.reference '{ref}' is not a deployment; known: {names}")
        if self.backend.kind == "external":
            local = [d.name for d in self.deployments if d.server != "external"]
            if local:
                raise ValueError(
                    f"backend external provisions nothing, but {', '.join(local)} need a server"
                    " — use `server: external` with a url, or backend: local"
                )
        return self
