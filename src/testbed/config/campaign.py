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
from testbed.core.secrets import is_reference

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class LocalBackend(Strict):
    """Servers are child processes on 127.0.0.1 of this machine (the default)."""

    kind: Literal["local"] = "local"


class S3Credentials(Strict):
    """Keys for ``s3://`` models, as ``${env:NAME}`` references: the run puts their values
    into a Secret of its namespace that the weights' init container reads."""

    access_key_id: str = Field("${env:AWS_ACCESS_KEY_ID}", description="${env:NAME}")
    secret_access_key: str = Field("${env:AWS_SECRET_ACCESS_KEY}", description="${env:NAME}")

    @field_validator("access_key_id", "secret_access_key")
    @classmethod
    def _reference(cls, value: str) -> str:
        return _env_reference(value, "s3 keys")


def _env_reference(value: str, what: str) -> str:
    if not is_reference(value):
        raise ValueError(
            f"{what} must be ${{env:NAME}} references, never the secret itself (it would be"
            " written into the run directory)"
        )
    return value


class KubernetesBackend(Strict):
    """Workers are pods of a cluster, reached with the official kubernetes client."""

    kind: Literal["kubernetes"]
    namespace: str | None = Field(
        None,
        pattern=DNS_LABEL,
        description="an existing namespace; default: one namespace per run, deleted after",
    )
    context: str | None = Field(None, description="kubeconfig context")
    kubeconfig: str | None = Field(None, description="kubeconfig file (default $KUBECONFIG)")
    server: str | None = Field(
        None, pattern=r"^https?://", description="API server URL (with token, no kubeconfig)"
    )
    token: str | None = Field(
        None, description="bearer token for server, as ${env:NAME} (TESTER_SERVICE_ACCOUNT_TOKEN)"
    )
    certificate_authority: str | None = Field(None, description="CA file for server")
    insecure_skip_tls_verify: bool = False
    image: str | None = Field(
        None,
        description="testbed's own image: sim and hf servers and the s3:// weights init"
        " container (default testbed:<version>)",
    )
    images: dict[Literal["sim", "hf", "vllm", "tgi", "tgis"], str] = Field(
        default_factory=dict, description="image per server kind, over the adapters' defaults"
    )
    server_image: str | None = Field(
        None, description="the build under test: every server's image (testbed run --image)"
    )
    image_tag: str | None = Field(
        None, description="replace the tag of every server image (testbed run --image-tag)"
    )
    model_pvc: str | None = Field(
        None, description="PVC with model folders: a relative model: path is read from it"
    )
    s3: S3Credentials = Field(default_factory=S3Credentials)
    hf_token: str | None = Field(
        None, description="${env:HF_TOKEN} for hub ids, put into a Secret of the run"
    )
    datashim: bool = Field(
        False,
        description="s3:// models as Datashim Datasets (namespace labelled"
        " monitor-pods-datasets=enabled) instead of an init container",
    )
    access: Literal["auto", "port-forward", "service"] = Field(
        "auto",
        description="how probes reach servers: port-forward from here, or the Service DNS name"
        " (auto: service when testbed runs in the cluster)",
    )
    scheduled_timeout_s: float = Field(300.0, gt=0, description="seconds to be scheduled")
    ready_timeout_s: float = Field(900.0, gt=0, description="seconds to become ready")

    @field_validator("token", "hf_token")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else _env_reference(value, "tokens")

    @model_validator(mode="after")
    def _pairs(self) -> KubernetesBackend:
        if self.token and not self.server:
            raise ValueError("backend.token is given without backend.server — set server: URL")
        if self.server and (self.kubeconfig or self.context):
            raise ValueError(
                "give backend.server (+ token) or backend.kubeconfig/context, not both"
            )
        if not self.server and (self.certificate_authority or self.insecure_skip_tls_verify):
            raise ValueError(
                "backend.certificate_authority and insecure_skip_tls_verify go with"
                " backend.server; a kubeconfig carries its own — remove them or set server"
            )
        return self


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
        if self.scale is not None and self.backend.kind != "kubernetes":
            raise ValueError(
                "scale: needs a cluster — set `backend: kubernetes` (with context/kubeconfig,"
                " e.g. the one `testbed cluster emulate` writes)"
            )
        problems = (
            _kubernetes_rules(self)
            if isinstance(self.backend, KubernetesBackend)
            else _cluster_only_fields(self)
        )
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _cluster_only_fields(campaign: Campaign) -> list[str]:
    """Fields only a cluster honours are refused elsewhere, never silently ignored."""
    found = []
    for i, d in enumerate(campaign.deployments):
        where = f"deployments[{i}] ({d.name})"
        given = [
            name
            for name, value in (
                ("image", d.image),
                ("placement", d.placement.model_dump(exclude_defaults=True)),
                ("resources.limit_cpu", d.resources.limit_cpu),
                ("resources.limit_memory_gb", d.resources.limit_memory_gb),
                ("resources.gpu (MIG slices)", isinstance(d.resources.gpu, dict)),
            )
            if value
        ]
        if given:
            found.append(
                f"{where}: {', '.join(given)} only apply on a cluster — set backend.kind:"
                f" kubernetes, or remove them for backend {campaign.backend.kind}"
            )
    return found


def _kubernetes_rules(campaign: Campaign) -> list[str]:
    """What a pod cannot do: read a folder of this machine, or a bundled model in a foreign
    image."""
    backend = campaign.backend
    assert isinstance(backend, KubernetesBackend)
    found = []
    for i, d in enumerate(campaign.deployments):
        where = f"deployments[{i}] ({d.name}).model {d.model!r}"
        if d.server in ("external", "sim"):
            continue
        local = d.model.startswith(("/", ".", "~"))
        if local and not backend.model_pvc:
            found.append(
                f"{where} is a folder of this machine, which a pod cannot read — put it on a"
                " PVC (backend.model_pvc, model: a path inside it) or in S3 (model: s3://…)"
            )
        if d.model.startswith("bundled:") and d.server != "hf":
            found.append(
                f"{where}: only testbed's own image (server hf) carries bundled models — put"
                " the converted folder in S3 or on a PVC for this server"
            )
    under_test = [d.name for d in campaign.deployments if d.server in ("vllm", "tgi", "tgis")]
    for flag, value in (
        ("server_image (--image)", backend.server_image),
        ("image_tag (--image-tag)", backend.image_tag),
    ):
        if value and not under_test:
            found.append(
                f"backend.{flag} chooses the build of the servers under test (vllm, tgi, tgis),"
                " but this campaign has only testbed's own servers — set backend.image instead"
            )
    folders = [d for d in campaign.deployments if d.model.startswith(("/", ".", "~"))]
    if backend.model_pvc and not folders:
        found.append(
            f"backend.model_pvc is {backend.model_pvc!r} but no deployment's model is a path"
            " inside it — give a model: path, or remove model_pvc"
        )
    if backend.datashim:
        found += [
            f"deployments[{i}] ({d.name}): a Datashim Dataset needs the store's URL — set"
            " s3_endpoint_url"
            for i, d in enumerate(campaign.deployments)
            if d.model.startswith("s3://") and not d.s3_endpoint_url
        ]
    if backend.datashim and not any(d.model.startswith("s3://") for d in campaign.deployments):
        found.append("backend.datashim is true but no deployment has an s3:// model")
    return found
