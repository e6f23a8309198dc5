"""Which ServingRuntime serves an InferenceService's model, and the predictor container it makes.

As KServe's controller decides (read from kserve/kserve: ``pkg/apis/serving/v1beta1/
predictor_model.go``, ``pkg/controller/v1beta1/inferenceservice/components/predictor.go`` and
``…/utils/utils.go``):

- ``spec.predictor.model.runtime`` names one: a ServingRuntime of the namespace, else a
  ClusterServingRuntime; it must exist (``RuntimeNotRecognized``), not be disabled
  (``RuntimeDisabled``), speak the model's protocol and support its format
  (``NoSupportingRuntime``) — autoSelect is not needed when it is named;
- otherwise every runtime that is enabled, single-model, single-node, speaks the model's
  protocol (``protocolVersion``, default ``v1``; a runtime listing none speaks all) and lists
  the model's format (``modelFormat.name``, and ``version`` when the model gives one) with
  ``autoSelect: true`` is a candidate. Namespace runtimes come first, then cluster ones; each
  group is ordered by the lowest protocol it speaks, newest first, then by name, and then —
  stably — by the format's ``priority``, highest first (a runtime giving none last);
- the runtime's ``kserve-container`` is merged with the model's container: the model's fields
  win (env by name, volume mounts by path, resources key by key), ``args`` are the runtime's
  followed by the model's; ``{{.Name}}``-style placeholders are filled from the
  InferenceService's metadata.

A refusal is :class:`InvalidSpec`: KServe's failure reason and message (its
``status.modelStatus.lastFailureInfo``) and the controller's error (its Warning event).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemu.storage.store import Store

GROUP = "serving.kserve.io"
RUNTIMES = f"servingruntimes.{GROUP}"
CLUSTER_RUNTIMES = f"clusterservingruntimes.{GROUP}"
CONTAINER = "kserve-container"
#: KServe's protocol versions in its order (constants.ProtocolVersion); others sort last.
PROTOCOLS = ("v1", "v2", "grpc-v1", "grpc-v2")
_PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}")
#: Container lists a strategic merge patch merges by key (the rest are replaced).
_MERGE_KEYS = {"env": "name", "volumeMounts": "mountPath", "ports": "containerPort"}


class InvalidSpec(Exception):
    """KServe's InvalidSpec: ``reason`` and ``message`` for the model status, ``error`` for
    the event."""

    def __init__(self, reason: str, message: str, error: str) -> None:
        super().__init__(error)
        self.reason, self.message, self.error = reason, message, error


@dataclass(frozen=True)
class Runtime:
    """A chosen runtime: its name, spec and whether it is a ClusterServingRuntime."""

    name: str
    spec: Mapping[str, Any]
    cluster: bool


def _labels(model: Mapping[str, Any], spec: Mapping[str, Any], named: bool) -> set[str]:
    found = set()
    for fmt in spec.get("supportedModelFormats") or []:
        if named or fmt.get("autoSelect") is True:
            found.add(f"mt:{fmt.get('name')}")
            if fmt.get("version") is not None:
                found.add(f"mt:{fmt.get('name')}:{fmt.get('version')}")
    return found


def supports(model: Mapping[str, Any], spec: Mapping[str, Any], named: bool) -> bool:
    """KServe's RuntimeSupportsModel: the model's format label is among the runtime's."""
    fmt = model.get("modelFormat") or {}
    label = f"mt:{fmt.get('name')}"
    if fmt.get("version") is not None:
        label += f":{fmt.get('version')}"
    return label in _labels(model, spec, named)


def speaks(spec: Mapping[str, Any], protocol: str) -> bool:
    versions = spec.get("protocolVersions") or []
    return not protocol or not versions or protocol in versions


def _protocol_rank(spec: Mapping[str, Any]) -> int:
    versions = spec.get("protocolVersions") or []
    ranks = [PROTOCOLS.index(v) if v in PROTOCOLS else len(PROTOCOLS) for v in versions]
    return min(ranks, default=len(PROTOCOLS))


def _priority(spec: Mapping[str, Any], fmt_name: str) -> int | None:
    for fmt in spec.get("supportedModelFormats") or []:
        if fmt.get("name") == fmt_name:
            value = fmt.get("priority")
            return int(value) if value is not None else None
    return None


def _ordered(items: list[dict[str, Any]], fmt_name: str) -> list[dict[str, Any]]:
    # Creation time newest first, then name: two stable sorts, the second on the earlier key.
    items = sorted(items, key=lambda o: str(o["metadata"]["name"]))
    items.sort(key=lambda o: str(o["metadata"].get("creationTimestamp") or ""), reverse=True)
    items.sort(key=lambda o: _protocol_rank(o.get("spec") or {}))
    with_priority = [o for o in items if _priority(o.get("spec") or {}, fmt_name) is not None]
    without = [o for o in items if _priority(o.get("spec") or {}, fmt_name) is None]
    with_priority.sort(key=lambda o: -(_priority(o.get("spec") or {}, fmt_name) or 0))
    return with_priority + without


def _candidate(spec: Mapping[str, Any], model: Mapping[str, Any], protocol: str) -> bool:
    return (
        spec.get("disabled") is not True
        and spec.get("multiModel") is not True
        and spec.get("workerSpec") is None
        and supports(model, spec, named=False)
        and speaks(spec, protocol)
    )


def select_runtime(store: Store, namespace: str, model: Mapping[str, Any]) -> Runtime:
    """The runtime KServe gives ``model`` (``spec.predictor.model``); InvalidSpec if none."""
    protocol = str(model.get("protocolVersion") or "v1")
    named = model.get("runtime")
    if named:
        return _named(store, namespace, model, str(named), protocol)
    fmt_name = str((model.get("modelFormat") or {}).get("name"))
    chosen: list[Runtime] = []
    for key, cluster in ((RUNTIMES, False), (CLUSTER_RUNTIMES, True)):
        found, _ = store.list(key, None if cluster else namespace)
        fitting = [o for o in found if _candidate(o.get("spec") or {}, model, protocol)]
        chosen += [
            Runtime(str(o["metadata"]["name"]), o.get("spec") or {}, cluster)
            for o in _ordered(fitting, fmt_name)
        ]
    if not chosen:
        fmt = model.get("modelFormat") or {}
        raise InvalidSpec(
            "NoSupportingRuntime",
            "No runtime found to support specified framework/version",
            "no runtime found to support predictor with model type:"
            f" {{{fmt.get('name')} {fmt.get('version', '<nil>')}}}",
        )
    return chosen[0]


def _named(
    store: Store, namespace: str, model: Mapping[str, Any], name: str, protocol: str
) -> Runtime:
    found = store.try_get(RUNTIMES, namespace, name)
    cluster = found is None
    if found is None:
        found = store.try_get(CLUSTER_RUNTIMES, None, name)
    if found is None:
        raise InvalidSpec(
            "RuntimeNotRecognized",
            "Waiting for runtime to become available",
            f"No ServingRuntimes or ClusterServingRuntimes with the name: {name}",
        )
    spec = found.get("spec") or {}
    if spec.get("disabled") is True:
        raise InvalidSpec(
            "RuntimeDisabled",
            "Specified runtime is disabled",
            f"specified runtime {name} is disabled",
        )
    if not speaks(spec, protocol):
        raise InvalidSpec(
            "NoSupportingRuntime",
            "Specified runtime does not support specified protocol version",
            f"specified runtime {name} does not support specified protocol version",
        )
    if not supports(model, spec, named=True):
        raise InvalidSpec(
            "NoSupportingRuntime",
            "Specified runtime does not support specified framework/version",
            f"specified runtime {name} does not support specified framework/version",
        )
    return Runtime(name, spec, cluster)


def merged_container(runtime: Runtime, model: Mapping[str, Any]) -> dict[str, Any]:
    """The runtime's ``kserve-container`` with the model's container merged in (KServe's
    MergeRuntimeContainers: a strategic merge, args concatenated)."""
    containers = runtime.spec.get("containers") or []
    base = next((c for c in containers if c.get("name") == CONTAINER), None)
    if base is None:
        message = f"failed to find {CONTAINER} in ServingRuntime containers"
        raise InvalidSpec("InvalidPredictorSpec", message, message)
    own = {
        k: v
        for k, v in model.items()
        if k not in ("modelFormat", "runtime", "runtimeVersion", "protocolVersion", "storageUri")
        and k not in ("storage",)
    }
    merged = _merge(copy.deepcopy(dict(base)), own)
    merged["args"] = [*(base.get("args") or []), *(model.get("args") or [])]
    merged["name"] = CONTAINER
    return merged


def _merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if key in _MERGE_KEYS and isinstance(value, list):
            by = _MERGE_KEYS[key]
            items = {item.get(by): item for item in base.get(key) or []}
            items.update({item.get(by): item for item in value})
            base[key] = list(items.values())
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            base[key] = _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def fill_placeholders(value: Any, meta: Mapping[str, Any], runtime: str) -> Any:
    """``{{.Name}}``, ``{{.Namespace}}``, ``{{.Labels.K}}``, ``{{.Annotations.K}}`` and
    ``{{index .Labels "K"}}`` in every string, from the InferenceService's metadata (KServe's
    ReplacePlaceholders executes a Go template over it); anything else is InvalidSpec."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: _field(m.group(1), meta, runtime), value)
    if isinstance(value, list):
        return [fill_placeholders(v, meta, runtime) for v in value]
    if isinstance(value, Mapping):
        return {k: fill_placeholders(v, meta, runtime) for k, v in value.items()}
    return value


def _field(expression: str, meta: Mapping[str, Any], runtime: str) -> str:
    simple = {".Name": meta.get("name"), ".Namespace": meta.get("namespace")}
    if expression in simple:
        return str(simple[expression] or "")
    match = re.fullmatch(r'\.(Labels|Annotations)\.(\w+)|index \.(Labels|Annotations) "([^"]+)"',
                         expression)  # fmt: skip
    if match:
        kind = (match.group(1) or match.group(3)).lower()
        # A missing key of a Go map renders as "<no value>", as KServe's template does.
        return str((meta.get(kind) or {}).get(match.group(2) or match.group(4), "<no value>"))
    message = f"failed to replace placeholders in serving runtime {runtime} Container {CONTAINER}"
    raise InvalidSpec("InvalidPredictorSpec", message, f"{message}: {{{{{expression}}}}}")
