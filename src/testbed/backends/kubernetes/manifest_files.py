"""``testbed plan FILE --manifests DIR``: every object a run would create, as YAML files.

The objects are exactly those the backend applies (:func:`manifests.run_objects`, each
stack worker's rendered manifests, and with ``probes: cluster`` the campaign ConfigMap and
each treatment's first probe Job), for a run id given or derived from the campaign's name;
Secrets show ``***`` instead of values, so the files can be reviewed, diffed and committed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from testbed.backends.base import ShippedCampaign
from testbed.backends.kubernetes import manifests
from testbed.backends.kubernetes.names import owns_namespace, run_namespace
from testbed.backends.kubernetes.probe_job import configmap, env_secret, probe_job
from testbed.backends.kubernetes.stack import render_worker
from testbed.backends.kubernetes.stack_scope import CRD
from testbed.config.backend_settings import BackendSettings, KubernetesSettings
from testbed.config.deployments import AnyDeployment
from testbed.config.stacks import StackDeployment
from testbed.core.errors import InputError
from testbed.core.secrets import MASK
from testbed.plan.model import Plan


def _mask(text: str) -> str:
    del text
    return MASK


def cluster_settings(backend: BackendSettings) -> KubernetesSettings:
    """The campaign's settings, when it runs on a cluster (``--manifests`` needs one)."""
    if not isinstance(backend, KubernetesSettings):
        raise InputError(
            "--manifests writes Kubernetes objects, but the campaign's backend is"
            f" {backend.kind} — add --set backend.kind=kubernetes"
        )
    return backend


def plan_objects(
    run_id: str, backend: KubernetesSettings, workers: Mapping[str, AnyDeployment]
) -> list[dict[str, Any]]:
    """The run's objects with masked secrets."""
    ns = run_namespace(run_id, backend)
    return manifests.run_objects(run_id, ns, owns_namespace(backend), workers, backend, _mask)


def stack_objects(
    run_id: str,
    backend: KubernetesSettings,
    workers: Mapping[str, AnyDeployment],
    base_dir: Path,
) -> list[dict[str, Any]]:
    """Each stack worker's rendered objects, labelled, in the order they are applied (CRDs
    first). A namespaced object without a namespace goes to the run's at apply time, when
    discovery says which kinds are namespaced; here it is shown as written."""
    found: list[dict[str, Any]] = []
    for worker_id, config in workers.items():
        if isinstance(config, StackDeployment):
            objects = render_worker(run_id, worker_id, config, backend, base_dir)
            found += [o.obj for o in sorted(objects, key=lambda o: o.kind != CRD)]
    return found


def probe_objects(
    run_id: str, backend: KubernetesSettings, plan: Plan, campaign: ShippedCampaign | None
) -> list[dict[str, Any]]:
    """What probes run in the cluster add to a run's objects: the Secret of their ``${env:}``
    values (masked), the campaign ConfigMap and each planned treatment's first probe Job;
    none when probes run here (no ``campaign``)."""
    if campaign is None:
        return []
    namespace = run_namespace(run_id, backend)
    items = [dict(i) for i in campaign.items]
    objects = [configmap(run_id, namespace, campaign.data)]
    if campaign.env:  # shown, never revealed: the run reads the values when it applies it
        objects.insert(0, env_secret(run_id, namespace, dict.fromkeys(campaign.env, MASK)))
    for treatment in plan.planned():
        workers = {w: plan.workers[w].config for w in treatment.workers}
        where = {"id": treatment.id, "dirname": treatment.dirname}
        job = probe_job(run_id, namespace, where, 1, workers, backend, items, None, campaign.env)
        objects.append(job)
    return objects


def write_manifests(objects: list[dict[str, Any]], folder: Path) -> list[Path]:
    """One file per object, ``NN-kind-name.yaml``, in creation order."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for i, obj in enumerate(objects, 1):
        path = folder / f"{i:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        plain = json.loads(json.dumps(obj))  # no YAML anchors for shared label dicts
        path.write_text(yaml.safe_dump(plain, sort_keys=False))
        written.append(path)
    return written
