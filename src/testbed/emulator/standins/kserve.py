"""KServe's InferenceService on the emulator (``testbed cluster emulate --kserve-stand-in``).

A stand-in for KServe's controller in RawDeployment mode, for this one kind — not KServe.
It serves the ``inferenceservices.serving.kserve.io`` CRD (the shipped
``crds/serving.kserve.io_inferenceservices.yaml``) and, for each InferenceService, does what
KServe's controller does in that mode:

- a Deployment and a Service named ``NAME-predictor``, owned by the InferenceService
  (deleted with it), labelled ``serving.kserve.io/inferenceservice: NAME``; the
  InferenceService's labels and annotations are copied onto the pod template;
- the predictor container is ``spec.predictor.containers[0]`` as written (a custom
  predictor). For ``spec.predictor.model`` (a model format served by a runtime such as
  vLLM or Hugging Face) testbed plays the runtime: its simulator (``testbed serve sim``)
  by default, its reference server with the bundled model when the InferenceService is
  annotated ``serving.testbed.io/stand-in-server: hf``, serving the model under the
  InferenceService's name on port 8080, as KServe's runtimes do. The model's
  ``storageUri``, ``args`` and runtime are not used;
- its status: ``PredictorReady``, ``IngressReady`` and ``Ready`` conditions — False with
  MinimumReplicasUnavailable while the predictor starts, True once its Deployment is
  Available, False with the pod's own reason and message when it cannot start
  (CrashLoopBackOff, ErrImagePull …) — and, once ready, ``status.url`` and
  ``status.address.url`` ``http://NAME-predictor.NAMESPACE.svc.cluster.local``.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from testbed import __version__
from testbed.emulator.machinery.loop import ControllerLoop, itself, owned_by
from testbed.emulator.storage import meta as _meta

if TYPE_CHECKING:
    from testbed.emulator.storage.store import Store

GROUP = "serving.kserve.io"
KEY = f"inferenceservices.{GROUP}"
CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
ISVC_LABEL = "serving.kserve.io/inferenceservice"
SERVER_ANNOTATION = "serving.testbed.io/stand-in-server"
IMAGE = f"testbed:{__version__}"
PORT = 8080
#: Container waiting reasons that mean the predictor cannot start.
FAILING = frozenset(
    {"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError",
     "CreateContainerError", "RunContainerError"}
)  # fmt: skip


def crd() -> dict[str, Any]:
    """The InferenceService CRD this stand-in serves (the shipped YAML)."""
    text = (
        importlib.resources.files(__package__) / "crds" / f"{GROUP}_inferenceservices.yaml"
    ).read_text()
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def install(store: Store) -> InferenceServiceController:
    """Serve the InferenceService kind; the controller to run."""
    if store.try_get(CRD_KEY, None, KEY) is None:
        store.create(CRD_KEY, crd())
    return InferenceServiceController(store)


def _by_label(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    meta = obj["metadata"]
    owner = (meta.get("labels") or {}).get(ISVC_LABEL)
    return [(str(meta.get("namespace")), str(owner))] if owner else []


class InferenceServiceController:
    """Gives each InferenceService its predictor and its status."""

    def __init__(self, store: Store) -> None:
        self.store = store
        watched = {KEY: itself, "deployments.apps": _by_label, "pods": _by_label}
        self.loop = ControllerLoop(store, "inferenceservice", watched, self.reconcile)

    async def run(self) -> None:
        await self.loop.run()

    def reconcile(self, namespace: str, name: str) -> float | None:
        isvc = self.store.try_get(KEY, namespace, name)
        if isvc is None or isvc["metadata"].get("deletionTimestamp"):
            return None
        predictor = f"{name}-predictor"
        deployment = self.store.try_get("deployments.apps", namespace, predictor)
        if deployment is None:
            deployment = self.store.create(
                "deployments.apps", predictor_deployment(isvc), namespace
            )
        if self.store.try_get("services", namespace, predictor) is None:
            self.store.create("services", predictor_service(isvc), namespace)
        if not owned_by(deployment, isvc["metadata"]["uid"]):
            return None  # a Deployment of that name that is not ours: left alone
        pods, _ = self.store.list("pods", namespace, f"{ISVC_LABEL}={name}")
        status = status_for(isvc, deployment, pods)
        if _comparable(isvc.get("status")) != _comparable(status):
            self.store.mutate(
                KEY, namespace, name, lambda o: {**o, "status": status}, subresource="status"
            )
        return None


def _comparable(status: Any) -> Any:
    """A status without its transition times (rewriting them alone is no change)."""
    if not isinstance(status, dict):
        return status
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return {**status, "conditions": conditions}


def _owner(isvc: Mapping[str, Any]) -> dict[str, Any]:
    meta = isvc["metadata"]
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "InferenceService",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def predictor_container(isvc: Mapping[str, Any]) -> dict[str, Any]:
    """The custom predictor's container, or testbed playing the model's runtime."""
    spec = (isvc.get("spec") or {}).get("predictor") or {}
    if spec.get("containers"):
        custom = dict(spec["containers"][0])
        custom.setdefault("name", "kserve-container")
        return custom
    name = isvc["metadata"]["name"]
    annotations = isvc["metadata"].get("annotations") or {}
    model = spec.get("model") or {}
    if annotations.get(SERVER_ANNOTATION) == "hf":
        args = ["serve", "hf", "--model", "bundled:smollm2-135m",
                "--set", f"served_model_name={name}"]  # fmt: skip
    else:
        args = ["serve", "sim", "--set", f"model_name={name}"]
    container: dict[str, Any] = {
        "name": "kserve-container",
        "image": IMAGE,
        "args": [*args, "--port", str(PORT), "--host", "0.0.0.0"],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": 1},
    }
    if model.get("resources"):
        container["resources"] = model["resources"]
    return container


def predictor_deployment(isvc: Mapping[str, Any]) -> dict[str, Any]:
    meta = isvc["metadata"]
    name = f"{meta['name']}-predictor"
    selector = {ISVC_LABEL: meta["name"], "app": f"isvc.{name}"}
    labels = {**(meta.get("labels") or {}), **selector}
    spec = (isvc.get("spec") or {}).get("predictor") or {}
    pod: dict[str, Any] = {"containers": [predictor_container(isvc)]}
    if spec.get("serviceAccountName"):
        pod["serviceAccountName"] = spec["serviceAccountName"]
    template_meta: dict[str, Any] = {"labels": labels}
    if meta.get("annotations"):
        template_meta["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [_owner(isvc)]},
        "spec": {
            "replicas": int(spec.get("minReplicas") or 1),
            "selector": {"matchLabels": selector},
            "template": {"metadata": template_meta, "spec": pod},
        },
    }


def predictor_service(isvc: Mapping[str, Any]) -> dict[str, Any]:
    meta = isvc["metadata"]
    name = f"{meta['name']}-predictor"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "labels": {**(meta.get("labels") or {}), ISVC_LABEL: meta["name"]},
            "ownerReferences": [_owner(isvc)],
        },
        "spec": {
            "selector": {ISVC_LABEL: meta["name"], "app": f"isvc.{name}"},
            "ports": [{"name": "http", "port": 80, "targetPort": PORT, "protocol": "TCP"}],
        },
    }


def _pod_failure(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in FAILING:
                message = waiting.get("message") or ""
                return str(waiting["reason"]), f"pod {pod['metadata']['name']}: {message}"
    return None


def status_for(
    isvc: Mapping[str, Any], deployment: Mapping[str, Any], pods: list[dict[str, Any]]
) -> dict[str, Any]:
    """The InferenceService's status, from its predictor's Deployment and pods."""
    meta = isvc["metadata"]
    available = any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in (deployment.get("status") or {}).get("conditions") or []
    )
    failure = None if available else _pod_failure(pods)
    if available:
        state, reason, message = "True", "", ""
    elif failure is not None:
        state, (reason, message) = "False", failure
    else:
        state, reason = "False", "MinimumReplicasUnavailable"
        message = "Deployment does not have minimum availability."
    previous = {c.get("type"): c for c in (isvc.get("status") or {}).get("conditions") or []}
    conditions = []
    for kind in ("IngressReady", "PredictorReady", "Ready"):
        condition: dict[str, Any] = {"type": kind, "status": state}
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        old = previous.get(kind) or {}
        same = old.get("status") == state
        condition["lastTransitionTime"] = old.get("lastTransitionTime") if same else _meta.now()
        conditions.append(condition)
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "conditions": conditions,
    }
    if available:
        url = f"http://{meta['name']}-predictor.{meta['namespace']}.svc.cluster.local"
        status["url"] = url
        status["address"] = {"url": url}
    return status
