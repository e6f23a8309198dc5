"""Names, labels and images of a run's cluster objects (pure functions).

Every object testbed creates carries ``app.kubernetes.io/managed-by=testbed`` and
``testbed.io/run=<run>``; a worker's also ``testbed.io/worker=<worker>``. Cleanup, resume
and ``kubectl get all -l testbed.io/run=<run>`` all select by these labels. Names are
DNS-1035 labels (a Service's name must start with a letter), at most 63 characters, with a
hash suffix when the readable part had to be cut, so two workers never share a name.
"""

from __future__ import annotations

import hashlib
import re

from testbed.config.backend_settings import BackendSettings, KubernetesSettings
from testbed.config.deployments import ServerDeployment
from testbed.servers.adapters import adapter_for

MANAGED_BY = "app.kubernetes.io/managed-by"
RUN = "testbed.io/run"
WORKER = "testbed.io/worker"
TESTBED = "testbed"
MAX_NAME = 63
MODELS_MOUNT = "/models"
OWN_KINDS = ("sim", "hf")  # servers that run from testbed's own image


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def dns_name(text: str, prefix: str = "tb-", limit: int = MAX_NAME) -> str:
    """``text`` as a DNS-1035 label starting with ``prefix``; exact texts map to one name."""
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    name = f"{prefix}{slug}".strip("-")
    if len(name) <= limit and name == f"{prefix}{text}":
        return name
    # Cut or changed: a hash of the exact text keeps distinct texts distinct.
    suffix = _digest(text)
    head = name[: limit - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}"


def label_value(text: str) -> str:
    """``text`` as a label value (≤ 63 of ``[A-Za-z0-9._-]``, alphanumeric at both ends)."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    if clean == text and len(clean) <= MAX_NAME:
        return clean
    suffix = _digest(text)
    return f"{clean[: MAX_NAME - len(suffix) - 1].strip('-._')}-{suffix}"


def run_labels(run_id: str) -> dict[str, str]:
    return {MANAGED_BY: TESTBED, RUN: label_value(run_id)}


def worker_labels(run_id: str, worker_id: str) -> dict[str, str]:
    return {**run_labels(run_id), WORKER: label_value(worker_id)}


def run_selector(run_id: str) -> str:
    return f"{RUN}={label_value(run_id)}"


def worker_selector(run_id: str, worker_id: str) -> str:
    return f"{run_selector(run_id)},{WORKER}={label_value(worker_id)}"


def settings_of(backend: BackendSettings) -> KubernetesSettings:
    """The campaign's ``backend:`` section as this backend's settings (validation chose
    this backend by its ``kind``, so anything else is a caller's bug)."""
    if not isinstance(backend, KubernetesSettings):
        raise TypeError(f"the kubernetes backend got backend settings of kind {backend.kind}")
    return backend


def run_namespace(run_id: str, backend: KubernetesSettings) -> str:
    """The run's namespace: the campaign's, or one of its own named after the run."""
    return backend.namespace or dns_name(run_id, "testbed-")


def owns_namespace(backend: KubernetesSettings) -> bool:
    """Whether the run creates (and deletes) its namespace."""
    return not backend.namespace


def worker_name(worker_id: str) -> str:
    return dns_name(worker_id)


def with_tag(image: str, tag: str) -> str:
    """``image`` with its tag (or digest) replaced by ``tag``."""
    base = image.split("@", 1)[0]
    slash = base.rfind("/")
    colon = base.rfind(":")
    if colon > slash:
        base = base[:colon]
    return f"{base}:{tag}"


def server_image(deployment: ServerDeployment, backend: KubernetesSettings, default: str) -> str:
    """The server's image, first that is set wins.

    testbed's own servers (sim, hf): the deployment's ``image``, ``backend.images[kind]``,
    ``backend.image``, testbed's image of this version. Servers under test (vllm, tgi, tgis):
    ``backend.server_image`` (``--image``), the deployment's ``image``,
    ``backend.images[kind]``, the adapter's ``default``; then ``backend.image_tag``
    (``--image-tag``) replaces its tag — tgis-tester's "the build under test".
    """
    kind = deployment.server
    images = {str(k): v for k, v in backend.images.items()}
    if kind in OWN_KINDS:
        return deployment.image or images.get(kind) or backend.image or default
    image = backend.server_image or deployment.image or images.get(kind) or default
    tag = backend.image_tag
    return with_tag(image, tag) if tag else image


def testbed_image(backend: KubernetesSettings) -> str:
    """testbed's own image (init containers that fetch weights)."""
    return backend.image or adapter_for("hf").default_image
