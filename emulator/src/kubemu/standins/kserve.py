"""KServe's InferenceService on the emulator (``testbed cluster emulate --kserve-stand-in``).

A stand-in for KServe's controller in RawDeployment (Standard) mode, for this one kind — not
KServe. It serves the ``inferenceservices``, ``servingruntimes`` and
``clusterservingruntimes`` CRDs of ``serving.kserve.io`` (``crds/``), creates KServe's
``kserve-huggingfaceserver`` and ``kserve-vllmserver`` ClusterServingRuntimes as its release
ships them (``runtimes/``), admits pods as KServe's storage-initializer webhook does
(:mod:`.kserve_storage`) and, for each InferenceService, does what KServe's controller does:

- ``spec.predictor.model``: the runtime KServe would pick (:mod:`.kserve_runtime`: the
  ``runtime:`` field, else modelFormat name/version, autoSelect, priority, protocol), its
  ``kserve-container`` merged with the model's (image, env, resources …; the model's
  ``args`` after the runtime's), placeholders filled, ``INFERENCE_SERVICE_NAME`` set, the
  runtime's volumes and the predictor's pod fields; ``storageUri`` handed to the webhook by
  the ``internal.serving.kserve.io/storage-initializer-sourceuri`` annotation. The images
  then run as the kubelet plays them (:mod:`.kserve_images`: KServe's Hugging Face server by
  testbed's simulator, answering at ``/openai/v1/…`` under the ``--model_name`` it is given).
  No runtime fits: ``status.modelStatus`` says ``InvalidSpec`` with KServe's failure reason
  and message, a Warning ``InternalError`` event carries the controller's error, and no
  Deployment is made (retried every few seconds: a runtime may come);
- ``spec.predictor.containers``: the first container as written (a custom predictor);
- a Deployment and a Service named ``NAME-predictor``, owned by the InferenceService,
  labelled ``serving.kserve.io/inferenceservice: NAME`` and ``component: predictor``; the
  Service's port 80 (named after it when the container declares none, as KServe names it)
  targets the container's first port, else 8080;
- its status: ``PredictorReady``, ``IngressReady`` and ``Ready`` — False with
  MinimumReplicasUnavailable while the predictor starts, True once its Deployment is
  Available, False with the pod's own reason and message when it cannot start
  (CrashLoopBackOff, ErrImagePull, an init container's failure …) — and, once ready,
  ``status.url`` and ``status.address.url``
  ``http://NAME-predictor.NAMESPACE.svc.cluster.local``.
"""

from __future__ import annotations

import copy
import importlib.resources
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from kubemu.machinery import events
from kubemu.machinery.loop import ControllerLoop, itself, owned_by
from kubemu.standins import kserve_storage
from kubemu.standins.kserve_runtime import (
    CLUSTER_RUNTIMES,
    CONTAINER,
    GROUP,
    InvalidSpec,
    fill_placeholders,
    merged_container,
    select_runtime,
)
from kubemu.storage import meta as _meta
from kubemu.storage.errors import forbidden

if TYPE_CHECKING:
    from kubemu.storage.store import Store

KEY = f"inferenceservices.{GROUP}"
CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
CRDS = ("inferenceservices", "servingruntimes", "clusterservingruntimes")
#: The ClusterServingRuntimes KServe's release installs that testbed can play or name.
SHIPPED = ("kserve-huggingfaceserver", "kserve-vllmserver")
ISVC_LABEL = "serving.kserve.io/inferenceservice"
COMPONENT = "kserve-controller-manager"
PORT = 8080  # KServe's InferenceServiceDefaultHttpPort
RETRY_S = 5.0  # KServe's controller retries a failed reconcile with a backoff
#: Container waiting reasons that mean the predictor cannot start.
FAILING = frozenset(
    {"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError",
     "CreateContainerError", "RunContainerError"}
)  # fmt: skip


def _shipped(folder: str, name: str) -> dict[str, Any]:
    text = (importlib.resources.files(__package__) / folder / name).read_text()
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def crd(plural: str = "inferenceservices") -> dict[str, Any]:
    """A CRD this stand-in serves (the shipped YAML)."""
    return _shipped("crds", f"{GROUP}_{plural}.yaml")


def install(store: Store) -> InferenceServiceController:
    """Serve KServe's kinds and runtimes, admit pods as its webhook; the controller to run."""
    for plural in CRDS:
        if store.try_get(CRD_KEY, None, f"{plural}.{GROUP}") is None:
            store.create(CRD_KEY, crd(plural))
    for name in SHIPPED:
        if store.try_get(CLUSTER_RUNTIMES, None, name) is None:
            store.create(CLUSTER_RUNTIMES, _shipped("runtimes", f"{name}.yaml"))
    store.admit_with("pods", kserve_storage.inject)
    store.admit_with(KEY, validate_name)
    return InferenceServiceController(store)


#: KServe's IsvcNameFmt (inference_service_validation.go): its names become DNS-1035 labels.
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def validate_name(isvc: dict[str, Any]) -> None:
    """KServe's validating webhook on create: a name that is not a DNS-1035 label is denied
    (its Service and Deployment could not be made) in the webhook's words."""
    name = str(isvc.get("metadata", {}).get("name") or "")
    if NAME.match(name):
        return
    raise forbidden(
        "inferenceservices",
        GROUP,
        name,
        'admission webhook "inferenceservice.kserve-webhook-server.validator.webhook" denied'
        f' the request: the InferenceService "{name}" is invalid: a InferenceService name must'
        " consist of lower case alphanumeric characters or '-', and must start with"
        ' alphabetical character. (e.g. "my-name" or "abc-123", regex used for validation is'
        " '[a-z]([-a-z0-9]*[a-z0-9])?')",
    )


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
            try:
                template = predictor_deployment(self.store, isvc)
            except InvalidSpec as exc:
                self._invalid(isvc, exc)
                return RETRY_S
            deployment = self.store.create("deployments.apps", template, namespace)
        if self.store.try_get("services", namespace, predictor) is None:
            self.store.create("services", predictor_service(isvc, deployment), namespace)
        if not owned_by(deployment, isvc["metadata"]["uid"]):
            return None  # a Deployment of that name that is not ours: left alone
        pods, _ = self.store.list("pods", namespace, f"{ISVC_LABEL}={name}")
        self._write_status(isvc, status_for(isvc, deployment, pods))
        return None

    def _invalid(self, isvc: Mapping[str, Any], exc: InvalidSpec) -> None:
        model_status = {
            "transitionStatus": "InvalidSpec",
            "modelRevisionStates": {"targetModelState": "FailedToLoad"},
            "lastFailureInfo": {"reason": exc.reason, "message": exc.message},
        }
        status = {**(isvc.get("status") or {}), "modelStatus": model_status,
                  "deploymentMode": "RawDeployment"}  # fmt: skip
        if self._write_status(isvc, status):
            events.record(self.store, isvc, "Warning", "InternalError", exc.error, COMPONENT)

    def _write_status(self, isvc: Mapping[str, Any], status: dict[str, Any]) -> bool:
        if _comparable(isvc.get("status")) == _comparable(status):
            return False
        meta = isvc["metadata"]
        self.store.mutate(
            KEY, meta["namespace"], meta["name"], lambda o: {**o, "status": status},
            subresource="status",
        )  # fmt: skip
        return True


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


def _predictor_pod(
    store: Store, isvc: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """``(pod spec, runtime labels, runtime annotations)`` of the predictor."""
    meta = isvc["metadata"]
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    pod = {k: copy.deepcopy(v) for k, v in predictor.items() if k in _POD_FIELDS}
    if predictor.get("containers") and not predictor.get("model"):
        custom = copy.deepcopy(predictor["containers"][0])
        custom.setdefault("name", CONTAINER)
        pod["containers"] = [custom]
        return pod, {}, {}
    model = predictor.get("model") or {}
    runtime = select_runtime(store, str(meta["namespace"]), model)
    container = fill_placeholders(merged_container(runtime, model), meta, runtime.name)
    env = [e for e in container.get("env") or [] if e.get("name") != "INFERENCE_SERVICE_NAME"]
    container["env"] = [*env, {"name": "INFERENCE_SERVICE_NAME", "value": meta["name"]}]
    pod["containers"] = [container]
    volumes = {v["name"]: v for v in runtime.spec.get("volumes") or []}
    volumes.update({v["name"]: v for v in pod.get("volumes") or []})
    if volumes:
        pod["volumes"] = list(volumes.values())
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "schedulerName"):
        if key in runtime.spec and key not in pod:
            pod[key] = copy.deepcopy(runtime.spec[key])
    return pod, dict(runtime.spec.get("labels") or {}), dict(runtime.spec.get("annotations") or {})


#: PodSpec fields of ``spec.predictor`` KServe copies onto the predictor's pod.
_POD_FIELDS = frozenset(
    {"serviceAccountName", "volumes", "nodeSelector", "tolerations", "affinity",
     "imagePullSecrets", "schedulerName", "securityContext", "hostIPC", "priorityClassName",
     "runtimeClassName", "initContainers", "dnsPolicy"}
)  # fmt: skip


def predictor_deployment(store: Store, isvc: Mapping[str, Any]) -> dict[str, Any]:
    """The predictor's Deployment (InvalidSpec when no runtime serves the model)."""
    meta = isvc["metadata"]
    name = f"{meta['name']}-predictor"
    spec = (isvc.get("spec") or {}).get("predictor") or {}
    pod, runtime_labels, runtime_annotations = _predictor_pod(store, isvc)
    selector = {ISVC_LABEL: meta["name"], "app": f"isvc.{name}"}
    labels = {**runtime_labels, **(meta.get("labels") or {}), **(spec.get("labels") or {}),
              **selector, "component": "predictor"}  # fmt: skip
    annotations = {**runtime_annotations, **(meta.get("annotations") or {}),
                   **(spec.get("annotations") or {})}  # fmt: skip
    storage_uri = (spec.get("model") or {}).get("storageUri")
    if storage_uri:
        annotations[kserve_storage.SOURCE_URI] = str(storage_uri)
    template_meta: dict[str, Any] = {"labels": labels}
    if annotations:
        template_meta["annotations"] = annotations
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


def predictor_service(isvc: Mapping[str, Any], deployment: Mapping[str, Any]) -> dict[str, Any]:
    """KServe's createDefaultSvc: port 80 → the container's first port, else 8080 (then the
    port is named after the Service)."""
    meta = isvc["metadata"]
    name = f"{meta['name']}-predictor"
    containers = deployment["spec"]["template"]["spec"].get("containers") or [{}]
    declared = containers[0].get("ports") or []
    if declared:
        port = {"name": declared[0].get("name"), "port": 80,
                "targetPort": declared[0]["containerPort"], "protocol": "TCP"}  # fmt: skip
        port = {k: v for k, v in port.items() if v is not None}
    else:
        port = {"name": name, "port": 80, "targetPort": PORT, "protocol": "TCP"}
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
            "ports": [port],
        },
    }


def _pod_failure(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    for pod in pods:
        pod_status = pod.get("status") or {}
        statuses = [*(pod_status.get("initContainerStatuses") or []),
                    *(pod_status.get("containerStatuses") or [])]  # fmt: skip
        for status in statuses:
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
