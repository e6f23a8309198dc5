"""The Kubernetes objects every exported pipeline needs beside the pipeline itself: its
namespace, a service account with the least privilege the campaign's backend needs, the
resolved campaign (and its case files) as a ConfigMap, and a Secret of the ``${env:}``
values it references — written with ``${NAME}`` placeholders for ``envsubst``, never values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import yaml

from kubefacts.limits import MAX_DATA_BYTES
from testbed.backends import backend_class
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.diagnostics import dotted
from testbed.config.loader import LoadedCampaign
from testbed.config.stacks import StackDeployment
from testbed.core.errors import InputError
from testbed.core.ids import slugify
from testbed.core.secrets import names
from testbed.plan.model import Plan

CAMPAIGN_MOUNT = "/campaign"
RESULTS_MOUNT = "/results"
LABELS = {"app.kubernetes.io/managed-by": "testbed"}
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@dataclass(frozen=True)
class ExportOptions:
    """Where the pipeline runs and where its results go."""

    namespace: str
    image: str
    upload: str  # s3://bucket/prefix: each task uploads its one-treatment run directory there
    s3_endpoint_url: str | None = None
    campaign: str = "campaign"
    service_account: str = "testbed-runner"

    @property
    def secret(self) -> str:
        return f"testbed-{self.campaign}-env"

    @property
    def configmap(self) -> str:
        return f"testbed-{self.campaign}"


def options_for(
    loaded: LoadedCampaign,
    *,
    namespace: str | None,
    image: str | None,
    upload: str | None,
    s3_endpoint_url: str | None,
) -> ExportOptions:
    """Fill the export options from flags, then the campaign; refuse what cannot work."""
    steps = loaded.campaign.steps
    if steps.cleanup or steps.prepare or steps.test or steps.final_cleanup:
        raise InputError(
            "this campaign has steps:, which an exported pipeline does not run (its tasks"
            " are the treatments) — run it with `testbed run`, or remove steps: to export"
        )
    backend = loaded.campaign.backend
    cluster = backend if isinstance(backend, KubernetesSettings) else None
    if cluster is not None and cluster.lease:
        raise InputError(
            "backend.lease makes runs take turns, but every task of an exported pipeline would"
            " take it and they would queue behind each other — remove backend.lease to export"
        )
    results = loaded.campaign.results
    target = upload or results.upload
    if not target or not target.startswith("s3://"):
        raise InputError(
            "an exported pipeline uploads each task's results to S3: give --upload"
            " s3://bucket/prefix or set results.upload in the campaign"
        )
    return ExportOptions(
        namespace=namespace
        or (cluster and cluster.namespace)
        or slugify(f"testbed-{loaded.campaign.name}").lower()[:63],
        image=image or (cluster and cluster.image) or "testbed:latest",
        upload=target.rstrip("/"),
        s3_endpoint_url=s3_endpoint_url or results.s3_endpoint_url,
        campaign=slugify(loaded.campaign.name, max_length=40),
    )


def support_objects(
    loaded: LoadedCampaign, options: ExportOptions, campaign: CampaignVolume
) -> dict[str, list[dict[str, Any]]]:
    """File name → the objects it holds (namespace, RBAC, campaign, secret template)."""
    meta = {"namespace": options.namespace, "labels": dict(LABELS)}
    rbac: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": options.service_account, **meta}},
    ]  # fmt: skip
    backend = backend_class(loaded.campaign.backend.kind)
    rbac += backend.runner_rbac(loaded, options.namespace, options.service_account)
    admin = backend.runner_admin(loaded, options.namespace)
    files: dict[str, list[dict[str, Any]]] = {"admin.yaml": admin} if admin else {}
    return files | {
        "namespace.yaml": [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": options.namespace, "labels": dict(LABELS)}}
        ],
        "rbac.yaml": rbac,
        "campaign.yaml": [campaign.configmap],
        "secret.yaml": [
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": options.secret, **meta},
             "stringData": {name: f"${{{name}}}" for name in secret_names(loaded)}}
        ],
    }  # fmt: skip


def secret_names(loaded: LoadedCampaign) -> list[str]:
    """Every ``${env:NAME}`` the campaign references, plus the S3 keys of the upload."""
    return list(dict.fromkeys([*names(json.dumps(loaded.document)), *S3_KEYS]))


@dataclass(frozen=True)
class CampaignVolume:
    """The resolved campaign and its case files as a ConfigMap, and how it is laid out."""

    configmap: dict[str, Any]
    items: list[dict[str, str]]  # ConfigMap key → path under /campaign

    def volume(self, name: str = "campaign") -> dict[str, Any]:
        meta = self.configmap["metadata"]
        items = [dict(item) for item in self.items]  # a copy each: no YAML aliases
        return {"name": name, "configMap": {"name": meta["name"], "items": items}}


def campaign_volume(loaded: LoadedCampaign, plan: Plan, options: ExportOptions) -> CampaignVolume:
    """The resolved campaign and the files its treatments read (:func:`_probe_files`),
    mounted at /campaign."""
    data = {"campaign.yaml": yaml.safe_dump(exported_document(loaded, options), sort_keys=False)}
    items = [{"key": "campaign.yaml", "path": "campaign.yaml"}]
    for relative in _probe_files(loaded, plan):
        source = loaded.base_dir / relative
        if not source.is_file():
            raise InputError(f"{relative}: no such file under {loaded.base_dir}")
        key = slugify(relative.replace("/", "--"), max_length=200)
        data[key] = source.read_text()
        items.append({"key": key, "path": relative})
    for relative in _stack_files(loaded):  # a worker in the cluster renders them itself
        key = slugify(relative.replace("/", "--"), max_length=200)
        data[key] = (loaded.base_dir / relative).read_text()
        items.append({"key": key, "path": relative})
    _check_fits(data, items)
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": options.configmap, "namespace": options.namespace,
                     "labels": dict(LABELS)},
        "data": data,
    }  # fmt: skip
    return CampaignVolume(configmap, items)


def exported_document(loaded: LoadedCampaign, options: ExportOptions) -> dict[str, Any]:
    """The campaign as its tasks run it: on a cluster, in one namespace (the campaign's, else
    the pipeline's), where the runner's Role holds — never a namespace of each run's own,
    which would need rights in every namespace of a shared cluster — and with a stack's
    cluster-scoped objects left to the cluster's admin (``admin.yaml``), which a namespaced
    Role cannot write."""
    document = dict(loaded.document)
    if isinstance(loaded.campaign.backend, KubernetesSettings):
        given = document.get("backend")
        backend = {"kind": given} if isinstance(given, str) else dict(given or {})
        backend["namespace"] = backend.get("namespace") or options.namespace
        backend["cluster_objects"] = "admin"
        document["backend"] = backend
    return document


def _check_fits(data: dict[str, str], items: list[dict[str, str]]) -> None:
    """A real API server refuses a ConfigMap over 1 MiB of data: say so now, naming the
    largest files, rather than let ``kubectl apply`` fail in the cluster."""
    sizes = {item["path"]: len(data[item["key"]].encode()) for item in items}
    total = sum(sizes.values())
    if total <= MAX_DATA_BYTES:
        return
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:3]
    shown = ", ".join(f"{path} ({sizes[path]:,} bytes)" for path in largest)
    raise InputError(
        f"the campaign's ConfigMap would hold {total:,} bytes, over the {MAX_DATA_BYTES:,}"
        f" a Kubernetes API server accepts; the largest files: {shown} — ship fewer or"
        " smaller files with the campaign (install CRDs in the cluster beforehand rather"
        " than in a stack's manifests folder)"
    )


def _stack_files(loaded: LoadedCampaign) -> list[str]:
    """The files of every stack's ``manifests:`` (relative to the campaign's folder)."""
    found: dict[str, None] = {}
    for deployment in loaded.campaign.deployments:
        if not isinstance(deployment, StackDeployment):  # the stack variant has manifests
            continue
        given = PurePosixPath(deployment.manifests)
        if given.is_absolute() or ".." in given.parts:
            raise InputError(
                f"manifests {deployment.manifests}: a pod gets a stack's files in a ConfigMap,"
                " so they must sit inside the campaign's folder (a relative path without '..')"
            )
        root = loaded.base_dir / str(given)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            found[path.relative_to(loaded.base_dir).as_posix()] = None
    return list(found)


def _probe_files(loaded: LoadedCampaign, plan: Plan) -> list[str]:
    """The files the planned treatments' probes read (each section's ``files()``), relative
    to the campaign's folder: correctness case files, a load dataset's file (rows, sessions'
    conversations, a trace), A/B prompt files and a scale template — a probe in a pod
    resolves them under /campaign as here."""
    found: dict[str, None] = {}
    for key in dict.fromkeys(t.probe_key for t in plan.planned()):
        for at, path in plan.probe_configs[key].files():
            given = PurePosixPath(path)
            if given.is_absolute() or ".." in given.parts:
                raise InputError(
                    f"{loaded.where(at)}: {dotted(at)}: {path}: a probe in a pod gets the"
                    " campaign's files in a ConfigMap, so they must sit inside the campaign's"
                    " folder (a relative path without '..')"
                )
            found[str(given)] = None
    return list(found)
