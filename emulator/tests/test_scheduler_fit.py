"""The scheduler's filters, its capacity index and its failure messages (pure functions)."""

from __future__ import annotations

from collections import Counter

import pytest

from kubefacts.errors import InputError
from kubefacts.fit import NodeFacts, PodFacts, fit_message, static_reason
from kubefacts.quantity import amount, pod_requests
from kubemu.scheduler.capacity import CapacityIndex


def node(name: str, gpus: int = 8, cpu: str = "32", memory: str = "256Gi", **spec: object) -> dict:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    labels = dict(spec.pop("labels", {}) or {})  # type: ignore[call-overload]
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def pod(requests: dict | None = None, **spec: object) -> dict:
    container = {"name": "c", "image": "x", "resources": {"requests": requests or {}}}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def test_quantities_follow_apimachinery_units() -> None:
    assert amount("cpu", "500m") == 500
    assert amount("cpu", 4) == 4000
    assert amount("memory", "32G") == 32 * 10**9
    assert amount("memory", "1Gi") == 2**30
    assert amount("memory", "1.5Ki") == 1536
    assert amount("cpu", "1e3") == 1_000_000
    with pytest.raises(InputError, match="unknown unit"):
        amount("memory", "3XB")


def test_pod_requests_sum_containers_and_take_the_largest_init_container() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 1}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
    }
    assert pod_requests({"spec": spec}) == {
        "cpu": 4000,
        "memory": 2**30,
        "nvidia.com/gpu": 1,
        "pods": 1,
    }


def test_filters_in_the_real_order_and_words() -> None:
    cordoned = NodeFacts.of(
        node("n", unschedulable=True, taints=[{"key": "a", "value": "b", "effect": "NoSchedule"}])
    )
    assert static_reason(PodFacts.of(pod()), cordoned) == "node(s) were unschedulable"
    tainted = NodeFacts.of(
        node("n", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    )
    assert static_reason(PodFacts.of(pod()), tainted) == "node(s) had untolerated taint {gpu: yes}"
    tolerant = pod(tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert static_reason(PodFacts.of(tolerant), tainted) is None
    prefer = NodeFacts.of(
        node("n", taints=[{"key": "k", "value": "", "effect": "PreferNoSchedule"}])
    )
    assert static_reason(PodFacts.of(pod()), prefer) is None
    labelled = NodeFacts.of(node("n", labels={"zone": "a"}))
    assert static_reason(PodFacts.of(pod(nodeSelector={"zone": "b"})), labelled) == (
        "node(s) didn't match Pod's node affinity/selector"
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "c"]}]}
                ]
            }
        }
    }
    assert static_reason(PodFacts.of(pod(affinity=affinity)), labelled) is None


def test_the_message_has_the_scheduler_shape() -> None:
    message = fit_message(
        3,
        Counter({"Insufficient nvidia.com/gpu": 3}),
        Counter({"No preemption victims found for incoming pod": 3}),
    )
    assert message == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are"
        " available: 3 No preemption victims found for incoming pod."
    )


def test_index_places_spreads_and_diagnoses() -> None:
    index = CapacityIndex()
    for i in range(3):
        index.set_node(f"n{i}", NodeFacts.of(node(f"n{i}", gpus=2)), {})
    index.set_node("cordoned", NodeFacts.of(node("cordoned", unschedulable=True)), {})
    gpu_pod = PodFacts.of(pod({"nvidia.com/gpu": 1}))
    placed = []
    for _ in range(6):
        chosen = index.place(gpu_pod)
        assert chosen is not None
        index.reserve(chosen, gpu_pod.requests)
        placed.append(chosen)
    assert Counter(placed) == {"n0": 2, "n1": 2, "n2": 2}
    assert placed[:3] != ["n0", "n0", "n1"]  # spread: a fresh node beats a half-used one
    assert index.place(gpu_pod) is None
    assert index.diagnose(gpu_pod) == (
        "0/4 nodes are available: 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu."
        " preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling,"
        " 3 No preemption victims found for incoming pod."
    )
    index.release("n1", gpu_pod.requests)
    assert index.place(gpu_pod) == "n1"


def test_mig_slices_are_resources_like_any_other() -> None:
    index = CapacityIndex()
    facts = node("n", gpus=0)
    facts["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "2"
    index.set_node("n", NodeFacts.of(facts), {})
    mig = PodFacts.of(pod({"nvidia.com/mig-1g.10gb": 1}))
    assert index.place(mig) == "n"
    assert "Insufficient nvidia.com/gpu" in index.diagnose(PodFacts.of(pod({"nvidia.com/gpu": 1})))


def test_a_thousand_alike_nodes_make_few_buckets() -> None:
    index = CapacityIndex()
    for i in range(1000):
        index.set_node(f"n{i}", NodeFacts.of(node(f"n{i}")), {})
    gpu_pod = PodFacts.of(pod({"nvidia.com/gpu": 1, "cpu": "1"}))
    for _ in range(1000):
        chosen = index.place(gpu_pod)
        assert chosen is not None
        index.reserve(chosen, gpu_pod.requests)
    assert len(index.buckets) <= 2


def test_a_pod_pinned_to_a_hostname_lands_there_and_alike_nodes_still_share_buckets() -> None:
    index = CapacityIndex()
    for i in range(3):
        index.set_node(
            f"n{i}", NodeFacts.of(node(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}"})), {}
        )
    assert len(index.buckets) == 1
    pinned = PodFacts.of(pod({"nvidia.com/gpu": 1}, nodeSelector={"kubernetes.io/hostname": "n2"}))
    assert index.place(pinned) == "n2"
    elsewhere = PodFacts.of(pod(nodeSelector={"kubernetes.io/hostname": "n9"}))
    assert index.place(elsewhere) is None
    assert index.diagnose(elsewhere).startswith(
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    )
