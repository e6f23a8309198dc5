"""What varies by server kind, in one table: read by validation, backends, planner and adapters.

A deployment's ``server`` names a kind; everything testbed decides from the kind alone —
where it can run, whether it is provisioned at all, which protocols it serves, what its
image carries, how the planner estimates its memory — is a field of its :class:`ServerKind`
here, so no layer writes ``if server == "vllm"``. The adapters (``servers.adapters``) hold
what needs code: flags, environment, container spec, default image tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

#: The protocols testbed's clients speak: openai and tgi over HTTP, tgis over gRPC.
ServerProtocol = Literal["openai", "tgi", "tgis"]

#: How a kind comes to serve TGIS's gRPC: always (tgis), when its ``params.protocols``
#: lists ``tgis`` (testbed's own servers), when the deployment says ``protocol: tgis``
#: (external), or never.
TgisBy = Literal["always", "params", "protocol", "never"]


@dataclass(frozen=True)
class ServerKind:
    """One server kind's capabilities (see the module docstring)."""

    name: str
    #: Protocols the kind serves by default (``params.protocols`` may choose for own servers).
    protocols: tuple[ServerProtocol, ...] = ("openai",)
    #: OpenAI endpoints it serves beyond completions and chat (``/v1/embeddings``,
    #: ``/v1/responses``); a URL or stack of unknown make is taken at its word.
    endpoints: tuple[str, ...] = ("embeddings", "responses")
    tgis_by: TgisBy = "never"
    #: What to tell a user whose probe wants tgis from this kind.
    tgis_fix: str = "use openai for it"
    #: False for a URL that already serves: no backend provisions it (``external``).
    provisioned: bool = True
    #: Runs as a child process of the local backend (tgi and tgis ship only as images).
    local: bool = False
    #: Reads model weights (the simulator needs none).
    weights: bool = True
    #: Runs its model on the GPUs it is given; False: ``resources.gpu`` only reserves
    #: devices it never touches (the plan says so, see ``gpu_note``).
    gpus: bool = True
    #: Its image is testbed's own, which carries the bundled models (``bundled:…``).
    bundled_models: bool = False
    #: A product under test: ``backend.server_image``/``image_tag`` choose its build.
    under_test: bool = False
    #: Sequences the planner assumes in flight when ``max_batch_size`` is unset; None: the
    #: kind's memory is not estimated.
    default_batch: int | None = None
    #: The KV cache is one preallocated pool (``params.kv_cache_gb``), not per sequence.
    kv_pool: bool = False
    #: A stack of Kubernetes objects the cluster backend applies (``server: manifests``):
    #: no adapter's pod, none of the pod fields (image, placement, limits).
    stack: bool = False

    @property
    def pod(self) -> bool:
        """Provisioned as one pod built from the kind's adapter."""
        return self.provisioned and not self.stack


KINDS: dict[str, ServerKind] = {
    kind.name: kind
    for kind in (
        ServerKind(
            "sim",
            protocols=("openai", "tgi"),
            tgis_by="params",
            tgis_fix="add tgis to its params.protocols",
            local=True,
            weights=False,
            gpus=False,
        ),
        ServerKind(
            "hf",
            protocols=("openai", "tgi"),
            tgis_by="params",
            tgis_fix="add tgis to its params.protocols",
            local=True,
            endpoints=(),  # servers/reference serves /v1/completions and chat only
            bundled_models=True,
            default_batch=8,
            gpus=False,  # the reference server runs torch on the CPU only
        ),
        ServerKind("vllm", local=True, under_test=True, default_batch=256, kv_pool=True),
        ServerKind(
            "tgi",
            protocols=("tgi", "openai"),
            endpoints=(),  # TGI's OpenAI side is its Messages API (chat, completions)
            tgis_fix="use tgi for it",
            under_test=True,
            default_batch=32,
        ),
        ServerKind(
            "tgis", protocols=("tgis",), tgis_by="always", under_test=True, default_batch=32
        ),
        ServerKind(
            "manifests",
            tgis_fix="use openai for it",
            weights=False,
            stack=True,
            gpus=False,  # no resources of its own: its manifests say
        ),
        ServerKind(
            "external",
            tgis_by="protocol",
            tgis_fix="set protocol: tgis and grpc: HOST:PORT",
            provisioned=False,
            weights=False,
            gpus=False,  # not provisioned: its resources reserve nothing
        ),
    )
}


def server_kind(name: str) -> ServerKind:
    """The capabilities of kind ``name`` (KeyError for an unknown kind: the config's
    discriminator refuses those before anything asks)."""
    return KINDS[name]


class Kinded(Protocol):
    """A deployment model (``config.deployments``): anything that names its server kind."""

    @property
    def server(self) -> str: ...


def kind_of(deployment: Kinded) -> ServerKind:
    """The capabilities of a deployment."""
    return KINDS[deployment.server]


def provisioned(deployment: Kinded) -> bool:
    """Whether a backend provisions ``deployment`` (every kind but ``external``)."""
    return kind_of(deployment).provisioned


def gpu_note(deployment: Kinded, gpus: int) -> str:
    """What the plan says of a deployment given ``gpus`` GPUs by a kind that never uses one
    (empty when the kind does, or none are given): the request is honoured — the devices
    are reserved for it, as a stand-in for a GPU server holds them — but the numbers are
    the CPU's, and a user must not read them as a GPU run."""
    kind = kind_of(deployment)
    if kind.gpus or not gpus or not kind.pod:  # an external URL or a stack reserves nothing
        return ""
    return (
        f"deployment '{getattr(deployment, 'name', '?')}' ({kind.name}) has resources.gpu"
        f" {gpus}, but {kind.name} never uses a GPU: the devices are reserved for it while it"
        " runs on the CPU — drop resources.gpu, or use a server that runs on GPUs (vllm)"
    )
