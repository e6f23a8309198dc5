"""A model's ``storageUri`` as KServe provisions it: its pod webhook and its storage initializer.

The webhook (KServe's ``storage_initializer_injector.go``, one URI) mutates a new pod whose
annotation ``internal.serving.kserve.io/storage-initializer-sourceuri`` the controller set:

- ``pvc://NAME/PATH``: the claim NAME is mounted read-only at ``/mnt/models`` of the
  ``kserve-container`` with ``subPath`` PATH (volume ``kserve-pvc-source``); nothing is copied;
- any other URI: an init container ``storage-initializer`` (``kserve/storage-initializer``)
  runs with the arguments ``URI /mnt/models`` into an emptyDir ``kserve-provision-location``,
  which the ``kserve-container`` mounts read-only at ``/mnt/models``.

Run as ``python -m kubemu.standins.kserve_storage URI DEST`` it is the storage
initializer's stand-in (the emulator's kubelet plays the image with it):

- ``hf://OWNER/MODEL[:REVISION]`` is checked as KServe's ``Storage._download_hf`` checks it
  (its words on a bad URI, exit 1); the snapshot is copied from this machine's Hugging Face
  cache when it is there, and otherwise — the emulator does not download — DEST gets a
  note of the URI (the simulator that plays the model server needs no weights);
- ``s3://BUCKET/PREFIX`` is copied from the endpoint and keys in the container's
  environment as KServe's storage initializer reads them (``AWS_ENDPOINT_URL``, else
  ``S3_ENDPOINT`` with ``S3_USE_HTTPS``; ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``);
- anything else is refused, exit 1, in KServe's words.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SOURCE_URI = "internal.serving.kserve.io/storage-initializer-sourceuri"
CONTAINER = "kserve-container"
INITIALIZER = "storage-initializer"
IMAGE = "kserve/storage-initializer:latest"
MODEL_DIR = "/mnt/models"
NOTE = "testbed-stand-in.json"


def inject(pod: dict[str, Any]) -> None:
    """The webhook's mutation of a new pod (see the module docstring)."""
    uri = ((pod.get("metadata") or {}).get("annotations") or {}).get(SOURCE_URI)
    spec = pod.setdefault("spec", {})
    main = next((c for c in spec.get("containers") or [] if c.get("name") == CONTAINER), None)
    if not uri or main is None:
        return
    if any(c.get("name") == INITIALIZER for c in spec.get("initContainers") or []):
        return  # injected already
    volumes, mounts = spec.setdefault("volumes", []), main.setdefault("volumeMounts", [])
    if str(uri).startswith("pvc://"):
        claim, _, path = str(uri).removeprefix("pvc://").partition("/")
        volumes.append(
            {
                "name": "kserve-pvc-source",
                "persistentVolumeClaim": {"claimName": claim, "readOnly": False},
            }
        )
        mounts.append({"name": "kserve-pvc-source", "mountPath": MODEL_DIR,
                       "subPath": path.strip("/"), "readOnly": True})  # fmt: skip
        return
    volumes.append({"name": "kserve-provision-location", "emptyDir": {}})
    mounts.append({"name": "kserve-provision-location", "mountPath": MODEL_DIR, "readOnly": True})
    spec.setdefault("initContainers", []).append(
        {
            "name": INITIALIZER,
            "image": IMAGE,
            "args": [str(uri), MODEL_DIR],
            "resources": {
                "requests": {"cpu": "100m", "memory": "100Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [{"name": "kserve-provision-location", "mountPath": MODEL_DIR}],
        }
    )


def hf_repo(uri: str) -> tuple[str, str | None]:
    """``(OWNER/MODEL, revision)`` of an ``hf://`` URI; RuntimeError in KServe's words."""
    components = uri.removeprefix("hf://").split("/")
    if len(components) != 2:
        raise RuntimeError(
            f"Invalid Hugging Face URI format. Expected 'hf://owner/model[:revision]', got '{uri}'"
        )
    repo, model_part = components
    if not repo:
        raise RuntimeError(f"Hugging Face repository owner cannot be empty in URI: {uri}")
    model, _, revision = model_part.partition(":")
    if not model:
        raise RuntimeError(f"Hugging Face model name cannot be empty in URI: {uri}")
    return f"{repo}/{model}", revision or None


def _from_hf(uri: str, dest: Path) -> str:
    repo_id, revision = hf_repo(uri)
    try:
        from huggingface_hub import snapshot_download

        cached = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except Exception:  # not cached, or no huggingface_hub: both mean a note
        note = {"uri": uri, "repo_id": repo_id, "revision": revision, "weights": False}
        (dest / NOTE).write_text(json.dumps(note))
        return f"{repo_id} is not in this machine's Hugging Face cache; {dest} holds a note"
    shutil.copytree(cached, dest, dirs_exist_ok=True)
    return f"copied {repo_id} from this machine's Hugging Face cache"


def _from_s3(uri: str, dest: Path, env: Mapping[str, str]) -> str:
    from kubefacts.buckets import copy_bucket

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    endpoint = env.get("AWS_ENDPOINT_URL", "")
    if not endpoint and env.get("S3_ENDPOINT"):
        scheme = "http" if env.get("S3_USE_HTTPS", "1") == "0" else "https"
        endpoint = f"{scheme}://{env['S3_ENDPOINT']}"
    keys = (env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", ""))
    scratch = dest / ".bucket"
    count = copy_bucket(bucket, scratch, endpoint, keys)
    source = scratch / prefix if prefix else scratch
    if not source.exists():
        raise RuntimeError(f"Failed to fetch model. No model found in {uri}.")
    for item in source.iterdir():
        shutil.move(str(item), dest / item.name)
    shutil.rmtree(scratch, ignore_errors=True)
    return f"copied {count} objects of {uri}"


def download(uri: str, dest: Path, env: Mapping[str, str]) -> str:
    """Provision ``uri`` into ``dest``; what was done (RuntimeError: KServe's refusal)."""
    dest.mkdir(parents=True, exist_ok=True)
    if uri.startswith("hf://"):
        return _from_hf(uri, dest)
    if uri.startswith("s3://"):
        return _from_s3(uri, dest, env)
    raise RuntimeError(
        f"Cannot recognize storage type for {uri}\n'gs://', 's3://', 'file://', 'http(s)://',"
        " 'hf://' are the storage types testbed's stand-in plays."
    )


def main(argv: Sequence[str]) -> int:
    """``URI DEST [URI DEST …]``, as KServe's storage-initializer entry point takes them."""
    if len(argv) < 2 or len(argv) % 2:
        print("usage: storage-initializer URI DEST [URI DEST ...]", file=sys.stderr)
        return 2
    for uri, dest in zip(argv[::2], argv[1::2], strict=True):
        try:
            print(f"Copying contents of {uri} to local: {download(uri, Path(dest), os.environ)}")
        except Exception as exc:  # the container's last words, as KServe's are
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
