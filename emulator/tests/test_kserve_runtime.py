"""KServe's runtime selection and container merge as its controller does them
(``standins/kserve_runtime.py``), against the rules read from kserve/kserve's
``predictor_model.go`` and ``utils.go``, with the ClusterServingRuntimes KServe ships."""

from __future__ import annotations

from typing import Any

import pytest

from kubemu.standins.kserve import SHIPPED, _shipped
from kubemu.standins.kserve_runtime import (
    RUNTIMES,
    InvalidSpec,
    Runtime,
    fill_placeholders,
    merged_container,
    select_runtime,
)


class Runtimes:
    """The two runtime kinds of a store: what select_runtime reads."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = list(objects)

    def list(self, key: str, namespace: str | None) -> tuple[list[dict[str, Any]], str]:
        kind = "ServingRuntime" if key == RUNTIMES else "ClusterServingRuntime"
        found = [
            o
            for o in self.objects
            if o["kind"] == kind and namespace in (None, o["metadata"].get("namespace"))
        ]
        return found, "1"

    def try_get(self, key: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found, _ = self.list(key, namespace)
        return next((o for o in found if o["metadata"]["name"] == name), None)


def shipped() -> list[dict[str, Any]]:
    return [_shipped("runtimes", f"{name}.yaml") for name in SHIPPED]


def runtime(name: str, formats: list[dict[str, Any]], namespace: str | None = "ns",
            created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if namespace:
        meta["namespace"] = namespace
    kind = "ServingRuntime" if namespace else "ClusterServingRuntime"
    containers = [{"name": "kserve-container", "image": f"{name}:1", "args": ["--a=1"]}]
    spec = {"supportedModelFormats": formats, "containers": containers, **spec}
    return {"kind": kind, "metadata": meta, "spec": spec}


def pick(store: Runtimes, **model: Any) -> str:
    return select_runtime(store, "ns", model).name  # type: ignore[arg-type]


HF = {"modelFormat": {"name": "huggingface"}}


def test_a_huggingface_model_gets_kserves_huggingface_runtime() -> None:
    chosen = select_runtime(Runtimes(*shipped()), "ns", HF)  # type: ignore[arg-type]
    assert (chosen.name, chosen.cluster) == ("kserve-huggingfaceserver", True)
    assert pick(Runtimes(*shipped()), modelFormat={"name": "vLLM"}) == "kserve-vllmserver"
    assert pick(Runtimes(*shipped()), modelFormat={"name": "huggingface", "version": "1"}) == (
        "kserve-huggingfaceserver"
    )


def test_a_version_no_runtime_lists_is_no_supporting_runtime_in_kserves_words() -> None:
    with pytest.raises(InvalidSpec) as caught:
        pick(Runtimes(*shipped()), modelFormat={"name": "huggingface", "version": "2"})
    assert caught.value.reason == "NoSupportingRuntime"
    assert caught.value.message == "No runtime found to support specified framework/version"
    assert "no runtime found to support predictor with model type" in caught.value.error


def test_namespace_runtimes_come_before_cluster_ones_whatever_their_priority() -> None:
    mine = runtime("mine", [{"name": "huggingface", "autoSelect": True}])
    assert pick(Runtimes(*shipped(), mine), **HF) == "mine"


def test_priority_orders_runtimes_and_one_without_priority_comes_last() -> None:
    low = runtime("low", [{"name": "huggingface", "autoSelect": True, "priority": 1}])
    high = runtime("high", [{"name": "huggingface", "autoSelect": True, "priority": 5}])
    none = runtime("none", [{"name": "huggingface", "autoSelect": True}], created="2027-01-01")
    assert pick(Runtimes(low, none, high), **HF) == "high"
    assert pick(Runtimes(low, none), **HF) == "low"


def test_among_equals_the_newest_wins_then_the_name() -> None:
    old = runtime("a-old", [{"name": "huggingface", "autoSelect": True}], created="2026-01-01")
    new = runtime("z-new", [{"name": "huggingface", "autoSelect": True}], created="2026-06-01")
    assert pick(Runtimes(old, new), **HF) == "z-new"
    twin = runtime("b-twin", [{"name": "huggingface", "autoSelect": True}], created="2026-06-01")
    assert pick(Runtimes(old, new, twin), **HF) == "b-twin"


def test_a_runtime_without_autoselect_serves_only_when_named() -> None:
    manual = runtime("manual", [{"name": "huggingface"}])
    assert pick(Runtimes(*shipped(), manual), **HF) == "kserve-huggingfaceserver"
    assert pick(Runtimes(*shipped(), manual), **HF, runtime="manual") == "manual"


def test_the_models_protocol_must_be_one_the_runtime_speaks() -> None:
    v1_only = runtime("v1", [{"name": "huggingface", "autoSelect": True}], protocolVersions=["v1"])
    store = Runtimes(*shipped(), v1_only)
    assert pick(store, **HF) == "v1"
    assert pick(store, **HF, protocolVersion="v2") == "kserve-huggingfaceserver"
    with pytest.raises(InvalidSpec, match="protocol version"):
        pick(store, **HF, protocolVersion="v2", runtime="v1")


def test_disabled_multi_model_and_multi_node_runtimes_are_never_picked() -> None:
    formats = [{"name": "huggingface", "autoSelect": True, "priority": 9}]
    off = runtime("off", formats, disabled=True)
    mms = runtime("mms", formats, multiModel=True)
    multi = runtime("multi", formats, workerSpec={"containers": []})
    assert pick(Runtimes(*shipped(), off, mms, multi), **HF) == "kserve-huggingfaceserver"
    with pytest.raises(InvalidSpec) as caught:
        pick(Runtimes(off), **HF, runtime="off")
    assert (caught.value.reason, caught.value.message) == (
        "RuntimeDisabled",
        "Specified runtime is disabled",
    )


def test_a_named_runtime_that_does_not_exist_is_waited_for() -> None:
    with pytest.raises(InvalidSpec) as caught:
        pick(Runtimes(*shipped()), **HF, runtime="nope")
    assert caught.value.reason == "RuntimeNotRecognized"
    assert caught.value.message == "Waiting for runtime to become available"
    assert caught.value.error == "No ServingRuntimes or ClusterServingRuntimes with the name: nope"
    with pytest.raises(InvalidSpec, match="framework/version"):
        pick(Runtimes(*shipped()), modelFormat={"name": "sklearn"}, runtime="kserve-vllmserver")


def test_the_models_args_follow_the_runtimes_and_its_fields_win() -> None:
    (hf,) = [r for r in shipped() if r["metadata"]["name"] == "kserve-huggingfaceserver"]
    model = {
        "modelFormat": {"name": "huggingface"},
        "storageUri": "hf://Qwen/Qwen2.5-0.5B-Instruct",
        "args": ["--model_name=qwen", "--max_model_len=2048"],
        "env": [{"name": "LMCACHE_USE_EXPERIMENTAL", "value": "False"},
                {"name": "HF_TOKEN", "value": "t"}],
        "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}},
    }  # fmt: skip
    merged = merged_container(Runtime("kserve-huggingfaceserver", hf["spec"], True), model)
    filled = fill_placeholders(merged, {"name": "qwen-llm", "namespace": "ns"}, "hf")
    assert filled["args"] == ["--model_name=qwen-llm", "--model_name=qwen", "--max_model_len=2048"]
    assert filled["image"] == "kserve/huggingfaceserver:latest"
    assert filled["env"] == [{"name": "LMCACHE_USE_EXPERIMENTAL", "value": "False"},
                             {"name": "HF_TOKEN", "value": "t"}]  # fmt: skip
    # Resources merged key by key: the model's limits over the runtime's, its requests kept.
    assert filled["resources"]["limits"] == {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}
    assert filled["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert "storageUri" not in filled
    assert "modelFormat" not in filled


def test_placeholders_come_from_the_inference_services_metadata() -> None:
    meta = {"name": "q", "namespace": "ns", "labels": {"tier": "gold"}}
    args = ["--a={{.Name}}", "--b={{ .Namespace }}", '--c={{index .Labels "tier"}}',
            "--d={{.Labels.tier}}", "--e={{.Annotations.missing}}"]  # fmt: skip
    assert fill_placeholders(args, meta, "rt") == [
        "--a=q", "--b=ns", "--c=gold", "--d=gold", "--e=<no value>"
    ]  # fmt: skip
    with pytest.raises(InvalidSpec, match="failed to replace placeholders in serving runtime rt"):
        fill_placeholders(["{{.Spec.Whatever}}"], meta, "rt")
