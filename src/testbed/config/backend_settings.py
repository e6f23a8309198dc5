"""A campaign's ``backend:`` section, one settings model per backend kind.

``local`` (child processes here), ``kubernetes`` (a cluster: connection, namespace, images,
timeouts, weights, probes, lease) and ``external`` (URLs that already serve). Each model's
``refusals`` says which deployments that backend cannot run, with the field to fix;
validation calls it (``Campaign``), the backends read the validated model. What a backend
can do at all (state to capture, namespaces, servers that outlive the run, probes run off
this machine) is a class attribute or property of its model, read by validation — never a
comparison of ``kind`` elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from testbed.config.deployments import Deployment, Strict
from testbed.config.images import own_image_refusals
from testbed.config.server_kinds import kind_of, provisioned
from testbed.config.stacks import StackDeployment
from testbed.config.steps import LeaseSettings
from testbed.core.secrets import is_reference

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class _BackendSettings(Strict):
    """What every backend shares: which server kinds it can run, and what it can do."""

    #: It runs something a state capture can dump (``capture: [state]``).
    runs_state: ClassVar[bool] = True
    #: Its servers run on this machine (child processes): they read its model folders and
    #: use its GPUs; an exported pipeline's task pod holds them, so it asks for their
    #: resources.
    servers_here: ClassVar[bool] = False
    #: Its servers are objects of a Kubernetes cluster: a capture can dump the cluster's
    #: namespaces whole (``execution.capture.namespaces``), the scale probe has a cluster
    #: to load, and ``--image``/``--image-tag``/``--context`` mean something.
    cluster: ClassVar[bool] = False
    #: Its servers can outlive the run, removed later by ``testbed cleanup`` (``execution.keep``).
    keeps_servers: ClassVar[bool] = False

    @property
    def remote_probes(self) -> bool:
        """Whether each treatment's probe runs off this machine: it then gets the campaign
        shipped (:class:`~testbed.backends.base.ShippedCampaign`), never a file of here."""
        return False

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        """Deployments this backend cannot run: (message naming the fix, field path)."""
        del deployments
        return []


class LocalSettings(_BackendSettings):
    """Servers are child processes on 127.0.0.1 of this machine (the default)."""

    servers_here: ClassVar[bool] = True

    kind: Literal["local"] = "local"
    gpus: list[int] | None = Field(
        None,
        description="GPU ids (nvidia-smi's indices) the run may use; default every GPU"
        " nvidia-smi -L lists (within CUDA_VISIBLE_DEVICES). Without nvidia-smi on PATH these"
        " ids are trusted as they are",
    )
    share_gpus: bool = Field(
        False,
        description="let workers that were given the same GPU run at once (default: a worker"
        " never shares its GPUs; the others wait)",
    )

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if any(i < 0 for i in value):
                raise ValueError(f"gpus {value} holds a negative id; give nvidia-smi's indices")
            if len(set(value)) != len(value):
                raise ValueError(f"gpus {value} repeats an id; list each GPU once")
        return value

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        found = cluster_only_fields(deployments, "local")
        for i, d in enumerate(deployments):
            if kind_of(d).stack:
                found.append(
                    (
                        f"{d.name} is a stack of Kubernetes objects (server: manifests), which"
                        " only a cluster can run — set backend: kubernetes (e.g. against"
                        " `testbed cluster emulate`), or point server: external at it",
                        ("deployments", i, "server"),
                    )
                )
            elif kind_of(d).provisioned and not kind_of(d).local:
                found.append(
                    (
                        f"server {d.server!r} cannot run on the local backend ({d.server} ships"
                        " only as a container image) — use backend: kubernetes, point"
                        " server: external at a running one, or use server: vllm, hf or sim",
                        ("deployments", i, "server"),
                    )
                )
        return found


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


class KubernetesSettings(_BackendSettings):
    """Workers are pods of a cluster, reached with the official kubernetes client."""

    cluster: ClassVar[bool] = True
    keeps_servers: ClassVar[bool] = True

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
    cluster_objects: Literal["create", "admin"] = Field(
        "create",
        description="a stack's cluster-scoped objects (CRDs, ClusterRoles, webhooks): created"
        " and deleted by the run (create), or the cluster admin's, applied beforehand and never"
        " written by the run (admin: an exported campaign's, from testbed export's admin.yaml)",
    )
    access: Literal["auto", "port-forward", "service"] = Field(
        "auto",
        description="how probes reach servers: port-forward from here, or the Service DNS name"
        " (auto: service when testbed runs in the cluster)",
    )
    probes: Literal["controller", "cluster"] = Field(
        "controller",
        description="where probes run: here (controller), or as a Job per treatment next to"
        " the servers (cluster; testbed's image runs `testbed worker --stream`)",
    )
    lease: LeaseSettings | None = Field(
        None, description="take turns with other runs on this cluster (a Lease); --no-wait"
    )
    scheduled_timeout_s: float = Field(300.0, gt=0, description="seconds to be scheduled")
    ready_timeout_s: float = Field(900.0, gt=0, description="seconds to become ready")

    @property
    def remote_probes(self) -> bool:
        """``probes: cluster``: a Job per treatment next to the servers."""
        return self.probes == "cluster"

    @field_validator("token", "hf_token")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else _env_reference(value, "tokens")

    @model_validator(mode="after")
    def _pairs(self) -> KubernetesSettings:
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

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        """What a pod cannot do: read a folder of this machine, or a bundled model in a
        foreign image; flags that choose a build nobody runs; Datashim without a store."""
        found: list[tuple[str, tuple[int | str, ...]]] = []
        for i, d in enumerate(deployments):
            where = f"model {d.model!r}"
            if not kind_of(d).weights:
                continue
            if d.model.startswith(("/", ".", "~")) and not self.model_pvc:
                found.append(
                    (
                        f"{where} is a folder of this machine, which a pod cannot read — put it on"
                        " a PVC (backend.model_pvc, model: a path inside it) or in S3 (model: s3://…)",
                        ("deployments", i, "model"),
                    )
                )
            if d.model.startswith("bundled:") and not kind_of(d).bundled_models:
                found.append(
                    (
                        f"{where}: only testbed's own image (server hf) carries bundled models"
                        " — put the converted folder in S3 or on a PVC for this server",
                        ("deployments", i, "model"),
                    )
                )
        if self.probes == "cluster":
            found += [
                (
                    f"{d.name} is external: with backend.probes: cluster the probe Job would need"
                    " its URL, keys and CA inside the cluster — use probes: controller",
                    ("deployments", i, "server"),
                )
                for i, d in enumerate(deployments)
                if not provisioned(d)
            ]
        found += own_image_refusals(deployments, self.image, self.server_image, self.images)
        under_test = [d.name for d in deployments if kind_of(d).under_test]
        for field, flag, value in (
            ("server_image", "server_image (--image)", self.server_image),
            ("image_tag", "image_tag (--image-tag)", self.image_tag),
        ):
            if value and not under_test:
                found.append(
                    (
                        f"backend.{flag} chooses the build of the servers under test (vllm, tgi,"
                        " tgis), but this campaign has only testbed's own servers — set"
                        " backend.image instead",
                        ("backend", field),
                    )
                )
        if self.model_pvc and not any(d.model.startswith(("/", ".", "~")) for d in deployments):
            found.append(
                (
                    f"backend.model_pvc is {self.model_pvc!r} but no deployment's model is a"
                    " path inside it — give a model: path, or remove model_pvc",
                    ("backend", "model_pvc"),
                )
            )
        if self.datashim:
            found += [
                (
                    f"{d.name}: a Datashim Dataset needs the store's URL — set s3_endpoint_url",
                    ("deployments", i, "s3_endpoint_url"),
                )
                for i, d in enumerate(deployments)
                if d.model.startswith("s3://") and not getattr(d, "s3_endpoint_url", "-")
            ]
            if not any(d.model.startswith("s3://") for d in deployments):
                found.append(
                    (
                        "backend.datashim is true but no deployment has an s3:// model",
                        ("backend", "datashim"),
                    )
                )
        return found  # fmt: skip


class ExternalSettings(_BackendSettings):
    """Nothing is provisioned: every deployment is a URL that already serves."""

    runs_state: ClassVar[bool] = False

    kind: Literal["external"]

    def refusals(
        self, deployments: Sequence[Deployment]
    ) -> list[tuple[str, tuple[int | str, ...]]]:
        return cluster_only_fields(deployments, "external") + [
            (
                f"backend external provisions nothing, but {d.name} needs a {d.server} server"
                " — use `server: external` with a url, or backend:"
                f" {'kubernetes' if kind_of(d).stack else 'local'}",
                ("deployments", i, "server"),
            )
            for i, d in enumerate(deployments)
            if provisioned(d)
        ]


def cluster_only_fields(
    deployments: Sequence[Deployment], backend: str
) -> list[tuple[str, tuple[int | str, ...]]]:
    """Fields only a cluster honours are refused elsewhere, never silently ignored."""
    found: list[tuple[str, tuple[int | str, ...]]] = []
    for i, d in enumerate(deployments):
        if isinstance(d, StackDeployment):
            continue  # a stack has none of these fields (and is refused off a cluster)
        for path, what, given in (
            (("image",), "is a container image, used only by", d.image is not None),
            (
                ("placement",),
                "places pods, used only by",
                d.placement.model_dump(exclude_defaults=True),
            ),
            (("resources", "limit_cpu"), "is a pod limit, used only by", d.resources.limit_cpu),
            (
                ("resources", "limit_memory_gb"),
                "is a pod limit, used only by",
                d.resources.limit_memory_gb,
            ),
            (
                ("resources", "gpu"),
                "asks for MIG slices, known only to",
                isinstance(d.resources.gpu, dict),
            ),
        ):
            if given:
                found.append(
                    (
                        f"{path[-1]} {what} backend: kubernetes; the {backend} backend would ignore"
                        f" it — remove {path[-1]}, or use backend: kubernetes",
                        ("deployments", i, *path),
                    )
                )
    return found  # fmt: skip


BackendSettings = Annotated[
    LocalSettings | KubernetesSettings | ExternalSettings, Field(discriminator="kind")
]
