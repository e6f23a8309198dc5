"""The gateway stand-in (``--gateway-stand-in``) with the example stack as shipped: the published
Gateway API and GAIE CRDs, a Gateway of the stand-in's class, an HTTPRoute to an InferencePool,
llm-d's EPP Deployment with its ConfigMap, llm-d vLLM pods played by the simulator. Requests
through the Gateway's data-plane port stream back from a pool pod the EPP configuration picks:
prefix-aware sends a prompt group to one pod, random spreads, a plugin the stand-in cannot play
is a 503 naming it and the pool's ResolvedRefs=False."""

from __future__ import annotations

import http.client
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment
from kubernetes import client, utils

from kubemu import ClusterShape, ImageRules, vllm_sim_stand_in
from kubemu.testing import Harness, running_plane, wait_for

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

STACK = Path(__file__).resolve().parents[2] / "examples/stacks/inference-scheduling"
NS = "scheduling"
VALUES = {
    "install_crds": True,
    "gateway_class": "testbed-gateway-stand-in",
    "epp_config": "prefix-aware",
    "epp_image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.0",
    "vllm_image": "ghcr.io/llm-d/llm-d-cuda:v0.3.0",
    "model": "sim-model",
    "replicas": 2,
    "max_num_seqs": 8,
    "refresh_metrics_interval": "50ms",
    "kv_blocks": 256,
    "sim": {"ttft_ms": 1, "itl_ms": 1},
    "namespace": NS,
}
GROUPS = {
    "gateway.networking.k8s.io": "v1",
    "inference.networking.k8s.io": "v1",
}


def render() -> list[dict[str, Any]]:
    env = SandboxedEnvironment(undefined=StrictUndefined)
    objects = []
    for path in sorted(STACK.rglob("*.yaml")):
        text = env.from_string(path.read_text()).render(**VALUES)
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def apply(h: Harness, objects: list[dict[str, Any]]) -> None:
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    ext = client.ApiextensionsV1Api(h.api)
    for crd in crds:
        ext.create_custom_resource_definition(crd)
    for crd in crds:
        wait_for(
            f"CRD {crd['metadata']['name']} Established",
            lambda name=crd["metadata"]["name"]: any(
                c.type == "Established" and c.status == "True"
                for c in ext.read_custom_resource_definition(name).status.conditions or []
            ),
        )
    custom = client.CustomObjectsApi(h.api)
    for obj in objects:
        group = obj["apiVersion"].rsplit("/", 1)[0]
        if obj["kind"] == "CustomResourceDefinition":
            continue
        if group in GROUPS:
            plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
            custom.create_namespaced_custom_object(group, GROUPS[group], NS, plural, obj)
        else:
            utils.create_from_dict(h.api, obj, namespace=NS)


def gateway(h: Harness) -> dict[str, Any]:
    custom = client.CustomObjectsApi(h.api)
    got: dict[str, Any] = custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", NS, "gateways", "inference-gateway"
    )
    return got


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def ready_vllm_pods(h: Harness) -> list[str]:
    pods = h.core.list_namespaced_pod(NS, label_selector="app=vllm-decode").items
    return [
        p.metadata.name
        for p in pods
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def complete(port: int, prompt: str) -> tuple[int, str, str]:
    """(status, picked endpoint, body) of one streamed completion through the gateway."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = {"model": "sim-model", "prompt": prompt, "max_tokens": 3, "stream": True}
    conn.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    picked = resp.getheader("x-gateway-destination-endpoint") or ""
    conn.close()
    return resp.status, picked, text


def test_gateway_routes_through_the_pool_with_the_epp_configuration(tmp_path: Path) -> None:
    with running_plane(
        tmp_path,
        shape=ClusterShape(nodes=1, gpus_per_node=4),
        images=ImageRules(sim_stand_in=vllm_sim_stand_in),
        gateway_stand_in=True,
    ) as h:
        h.core.create_namespace({"metadata": {"name": NS}})
        apply(h, render())

        def programmed() -> dict[str, Any] | None:
            got = gateway(h)
            return got if condition(got, "Programmed").get("status") == "True" else None

        gw = wait_for("the Gateway to be Programmed", programmed, timeout_s=60)
        assert condition(gw, "Accepted")["status"] == "True"
        assert gw["status"]["addresses"][0]["type"] == "IPAddress"
        pods = wait_for(
            "both vLLM pods ready",
            lambda: len(ready_vllm_pods(h)) == 2 and ready_vllm_pods(h),
            timeout_s=60,
        )
        plane_pod = "inference-gateway-gateway-stand-in"
        port = h.call(lambda: h.plane.kubelet.runtime(NS, plane_pod).ports[80])
        log = h.core.read_namespaced_pod_log(pods[0], NS)
        assert "played by testbed's simulator" in log
        assert "kv_cache_tokens=4096" in log  # 256 blocks x 16
        assert "ignored" not in log.splitlines()[0]

        group_a = " ".join(f"a{i}" for i in range(200))
        wait_for("the pool to answer", lambda: complete(port, group_a)[0] == 200, timeout_s=30)
        picks = Counter()
        for i in range(12):
            status, picked, text = complete(port, f"{group_a} question {i}")
            assert status == 200, text
            assert text.rstrip().endswith("data: [DONE]")
            picks[picked] += 1
        assert len(picks) == 1, picks  # prefix affinity: one group, one pod

        # The same EPP with the random picker: the pool's two pods both serve.
        custom = client.CustomObjectsApi(h.api)
        configs = h.core.read_namespaced_config_map("epp-config", NS).data
        h.core.patch_namespaced_config_map(
            "epp-config", NS, {"data": {"prefix-aware.yaml": configs["random.yaml"]}}
        )

        def spread() -> Counter[str]:
            seen = Counter(complete(port, f"{group_a} question {i}")[1] for i in range(24))
            return seen if len(seen) == 2 else Counter()

        wait_for("random picks to reach both pods", spread, timeout_s=20)

        bad = configs["random.yaml"].replace("random-picker", "weighted-random-picker")
        h.core.patch_namespaced_config_map("epp-config", NS, {"data": {"prefix-aware.yaml": bad}})

        def refused() -> str:
            status, _, text = complete(port, group_a)
            return text if status == 503 else ""

        assert "weighted-random-picker" in wait_for("the bad configuration refused", refused)
        pool = custom.get_namespaced_custom_object(
            "inference.networking.k8s.io", "v1", NS, "inferencepools", "vllm-pool"
        )
        resolved = next(
            c for c in pool["status"]["parents"][0]["conditions"] if c["type"] == "ResolvedRefs"
        )
        assert resolved["status"] == "False"
        assert "weighted-random-picker" in resolved["message"]
        route = custom.get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", NS, "httproutes", "llm-route"
        )
        assert route["status"]["parents"][0]["controllerName"] == "testbed.io/gateway-stand-in"

        # A rule the stand-in cannot play is refused on the route, and nothing is routed.
        route["spec"]["rules"][0]["matches"][0]["headers"] = [{"name": "x-a", "value": "b"}]
        custom.replace_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", NS, "httproutes", "llm-route", route
        )

        def route_refused() -> dict[str, Any] | None:
            got = custom.get_namespaced_custom_object(
                "gateway.networking.k8s.io", "v1", NS, "httproutes", "llm-route"
            )
            conditions = got["status"]["parents"][0]["conditions"]
            accepted = next(c for c in conditions if c["type"] == "Accepted")
            return accepted if accepted["status"] == "False" else None

        accepted = wait_for("the route refused", route_refused)
        assert accepted["reason"] == "UnsupportedValue"
        assert "matches.headers" in accepted["message"]
        assert complete(port, group_a)[0] == 404
