"""Where a pod finds its model (pure functions): what the server's ``--model`` gets, and
the volumes, mounts, init containers, environment and pod labels that put it there.

- ``bundled:NAME``: testbed's own image resolves it itself (server ``hf``).
- ``s3://bucket/prefix``: an init container of testbed's image runs
  ``testbed models fetch`` into an ``emptyDir`` at ``/models`` with the keys from the run's
  Secret — or, with ``backend.datashim``, Datashim mounts the bucket as a ``Dataset`` at
  ``/mnt/datasets/<dataset>`` (seed 004).
- a folder, with ``backend.model_pvc``: the PVC is mounted read-only at ``/models`` and a
  relative path is read from there.
- a hub id: passed through; ``backend.hf_token`` adds ``HF_TOKEN`` from the run's Secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from testbed.backends.kubernetes.names import MODELS_MOUNT, dns_name, testbed_image
from testbed.config.backend_settings import S3Credentials
from testbed.config.deployments import AnyDeployment, ServerDeployment
from testbed.config.server_kinds import kind_of

S3_SECRET = "testbed-s3"  # noqa: S105 - a Secret object's name
HF_SECRET = "testbed-hf-token"  # noqa: S105 - a Secret object's name
DATASETS_MOUNT = "/mnt/datasets"
MODELS_VOLUME = "models"


@dataclass
class PodModel:
    """What one worker's pod needs to serve its model."""

    argument: str  # the server's --model
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    env: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


def split_s3(url: str) -> tuple[str, str]:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def dataset_name(url: str, endpoint: str | None) -> str:
    """One Dataset per bucket and endpoint."""
    bucket, _ = split_s3(url)
    return (
        dns_name(f"{bucket}@{endpoint or ''}", "tb-ds-", 63)
        if endpoint
        else dns_name(bucket, "tb-ds-")
    )


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def pod_model(deployment: ServerDeployment, backend: Mapping[str, Any]) -> PodModel:
    """The model pieces of a worker's pod (see the module docstring)."""
    model = deployment.model
    if not kind_of(deployment).weights or model.startswith("bundled:"):
        return PodModel(argument=model)
    if model.startswith("s3://"):
        return _s3_model(model, deployment, backend)
    if model.startswith(("/", ".", "~")):
        path = PurePosixPath(model)
        inside = path if path.is_absolute() else PurePosixPath(MODELS_MOUNT) / path
        return PodModel(
            argument=str(inside),
            volumes=[
                {
                    "name": MODELS_VOLUME,
                    "persistentVolumeClaim": {
                        "claimName": str(backend["model_pvc"]),
                        "readOnly": True,
                    },
                }
            ],
            mounts=[{"name": MODELS_VOLUME, "mountPath": MODELS_MOUNT, "readOnly": True}],
        )
    env = []
    if backend.get("hf_token"):
        env = [
            _secret_env("HF_TOKEN", HF_SECRET, "token"),
            _secret_env("HUGGING_FACE_HUB_TOKEN", HF_SECRET, "token"),
        ]
    return PodModel(argument=model, env=env)


def _s3_model(url: str, deployment: ServerDeployment, backend: Mapping[str, Any]) -> PodModel:
    bucket, prefix = split_s3(url)
    endpoint = deployment.s3_endpoint_url
    if backend.get("datashim"):
        dataset = dataset_name(url, endpoint)
        # Datashim's admission hook mounts labelled datasets at /mnt/datasets/<name>.
        return PodModel(
            argument=str(PurePosixPath(DATASETS_MOUNT) / dataset / prefix),
            labels={"dataset.0.id": dataset, "dataset.0.useas": "mount"},
        )
    keys = [
        _secret_env("AWS_ACCESS_KEY_ID", S3_SECRET, "AWS_ACCESS_KEY_ID"),
        _secret_env("AWS_SECRET_ACCESS_KEY", S3_SECRET, "AWS_SECRET_ACCESS_KEY"),
    ]
    if endpoint:
        keys.append({"name": "AWS_ENDPOINT_URL", "value": str(endpoint)})
    fetch = {
        "name": "fetch-model",
        "image": testbed_image(backend),
        "command": ["testbed"],
        "args": ["models", "fetch", url, "--to", MODELS_MOUNT],
        "env": keys,
        "volumeMounts": [{"name": MODELS_VOLUME, "mountPath": MODELS_MOUNT}],
    }
    return PodModel(
        argument=str(PurePosixPath(MODELS_MOUNT) / bucket / prefix),
        volumes=[{"name": MODELS_VOLUME, "emptyDir": {}}],
        mounts=[{"name": MODELS_VOLUME, "mountPath": MODELS_MOUNT, "readOnly": True}],
        init_containers=[fetch],
    )


def run_secrets(
    deployments: Sequence[AnyDeployment], backend: Mapping[str, Any], reveal: Any
) -> list[tuple[str, dict[str, str]]]:
    """``(name, stringData)`` of the Secrets a run needs. ``reveal`` turns a ``${env:NAME}``
    reference into its value (a run) or a mask (``plan --manifests``)."""
    secrets = []
    s3 = S3Credentials.model_validate(backend.get("s3") or {})  # the model's defaults
    if any(d.model.startswith("s3://") for d in deployments):
        key_id = reveal(s3.access_key_id)
        secret = reveal(s3.secret_access_key)
        # Both spellings: boto3's variables, and the keys a Datashim Dataset's secret uses.
        data = {
            "AWS_ACCESS_KEY_ID": key_id,
            "AWS_SECRET_ACCESS_KEY": secret,
            "accessKeyID": key_id,
            "secretAccessKey": secret,
        }
        secrets.append((S3_SECRET, data))
    if backend.get("hf_token"):
        secrets.append((HF_SECRET, {"token": reveal(str(backend["hf_token"]))}))
    return secrets


def datasets(
    deployments: Sequence[ServerDeployment], backend: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The Datashim ``Dataset`` specs (name, bucket, endpoint) the run's s3 models need."""
    if not backend.get("datashim"):
        return []
    found: dict[str, dict[str, Any]] = {}
    for d in deployments:
        model = d.model
        if not model.startswith("s3://"):
            continue
        endpoint = d.s3_endpoint_url
        bucket, _ = split_s3(model)
        found[dataset_name(model, endpoint)] = {"bucket": bucket, "endpoint": endpoint}
    return [{"name": name, **spec} for name, spec in sorted(found.items())]
