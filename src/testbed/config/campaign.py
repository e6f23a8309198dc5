"""The whole campaign: name, backend, deployments, matrix, probes, execution, presets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from testbed.config.ab import AbProbe
from testbed.config.correctness import CorrectnessProbe
from testbed.config.deployments import Deployment, Strict
from testbed.config.diagnostics import located
from testbed.config.execution import Execution
from testbed.config.load import LoadProbe
from testbed.config.matrix import Matrix
from testbed.config.scale import ScaleProbe


class _BackendBase(Strict):
    """What every backend shares: which server kinds it can run."""

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        """Deployments this backend cannot run: (message naming the fix, field path)."""
        del deployments
        return []


class LocalBackend(_BackendBase):
    """Servers are child processes on 127.0.0.1 of this machine (the default)."""

    kind: Literal["local"] = "local"

    #: Server kinds that run as a child process here; tgi and tgis ship only as container
    #: images (their adapters build a pod's container, not a local command line).
    SERVERS: ClassVar[tuple[str, ...]] = ("sim", "hf", "vllm", "external")

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        found: list[tuple[str, tuple[int | str, ...]]] = []
        for i, d in enumerate(deployments):
            if d.image is not None:
                found.append(
                    (
                        "image is a container image, used only by backend: kubernetes; the"
                        " local backend starts servers as processes — remove image, or use"
                        " backend: kubernetes",
                        ("deployments", i, "image"),
                    )
                )
            if d.server not in self.SERVERS:
                found.append(
                    (
                        f"server {d.server!r} cannot run on the local backend ({d.server} ships"
                        " only as a container image) — use backend: kubernetes, point"
                        " server: external at a running one, or use server: vllm, hf or sim",
                        ("deployments", i, "server"),
                    )
                )
        return found


class KubernetesBackend(_BackendBase):
    """Workers are pods of a cluster, reached with the official kubernetes client."""

    kind: Literal["kubernetes"]
    namespace: str | None = Field(None, description="default: one namespace per run")
    context: str | None = Field(None, description="kubeconfig context")
    image: str = Field("testbed:latest", description="testbed image for in-cluster probes")
    service_account: str | None = None
    model_pvc: str | None = Field(None, description="PVC holding model folders")
    scheduled_timeout_s: float = Field(300.0, gt=0)
    ready_timeout_s: float = Field(900.0, gt=0)


class ExternalBackend(_BackendBase):
    """Nothing is provisioned: every deployment is a URL that already serves."""

    kind: Literal["external"]

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        return [
            (
                f"backend external provisions nothing, but {d.name} needs a {d.server} server"
                " — use `server: external` with a url, or backend: local",
                ("deployments", i, "server"),
            )
            for i, d in enumerate(deployments)
            if d.server != "external"
        ]


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
        problem = self._reference_problem() or self._probe_problem() or self._tgis_problem()
        if problem is None:
            refused = self.backend.refusals(self.deployments)
            problem = refused[0] if refused else None
        if problem is not None:
            message, at = problem
            raise located(message, *at)
        return self

    def _probe_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        if not any((self.correctness, self.load, self.ab, self.scale)):
            return ("no probe configured — add a correctness:, load:, ab: or scale: section", ())
        if (self.correctness or self.load or self.ab) and not self.deployments:
            return ("probes need deployments — add a `deployments:` list", ("deployments",))
        return None

    def _tgis_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        """A probe over TGIS's gRPC needs deployments that serve it."""
        wanted: list[tuple[str, str, list[str] | None]] = []
        if self.correctness is not None and self.correctness.protocol == "tgis":
            wanted.append(("correctness", "protocol", self.correctness.deployments))
        if self.load is not None and self.load.api == "tgis":
            wanted.append(("load", "api", self.load.deployments))
        if self.ab is not None and self.ab.api == "tgis":
            wanted.append(("ab", "api", [self.ab.stable, self.ab.canary]))
        for section, field, names in wanted:
            for d in self.deployments:
                if (names is None or d.name in names) and not serves_tgis(d):
                    fix = (
                        "add tgis to its params.protocols"
                        if d.server in ("sim", "hf")
                        else "set protocol: tgis and grpc: HOST:PORT"
                        if d.server == "external"
                        else f"use {'tgi' if d.server == 'tgi' else 'openai'} for it"
                    )
                    return (
                        f"{section}.{field} is tgis (gRPC), which deployment '{d.name}'"
                        f" ({d.server}) does not serve — {fix}",
                        (section, field),
                    )
        return None

    def _reference_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        """Names that must be unique, and names that must be deployments."""
        names = [d.name for d in self.deployments]
        for i, name in enumerate(names):
            if name in names[:i]:
                return (
                    f"deployment names must be unique; '{name}' is repeated — rename one",
                    ("deployments", i, "name"),
                )
        known = ", ".join(names) or "(none)"
        for role in ("stable", "canary"):
            named: str | None = getattr(self.ab, role) if self.ab else None
            if named is not None and named not in names:
                return (f"'{named}' is not a deployment; known: {known}", ("ab", role))
        for label, section in (("correctness", self.correctness), ("load", self.load)):
            for j, name in enumerate(section.deployments or [] if section else []):
                if name not in names:
                    return (
                        f"'{name}' is not a deployment; known: {known}",
                        (label, "deployments", j),
                    )
        ref = self.correctness.reference if self.correctness else None
        if ref is not None and ref not in names:
            return (
                f"'{ref}' is not a deployment; known: {known}",
                ("correctness", "reference"),
            )
        return None


def serves_tgis(deployment: Any) -> bool:
    """Whether a deployment serves TGIS's gRPC (``protocol: tgis`` probes need it)."""
    if deployment.server == "tgis":
        return True
    if deployment.server == "external":
        return bool(deployment.protocol == "tgis")
    protocols = getattr(deployment.params, "protocols", ())
    return deployment.server in ("sim", "hf") and "tgis" in protocols
