"""Gangs, priorities and preemption, through the official client against the emulator.

Two nodes of two GPUs each. Every pod change is watched; at each resourceVersion (a gang is
bound in one) every gang must be wholly bound or not at all.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from kubemu import ClusterShape
from kubemu.testing import Harness, running_plane, wait_for
from tests.fixtures.gangs import LABEL, PartialGangs

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

GROUP, VERSION = "scheduling.x-k8s.io", "v1alpha1"


def gpu_pod(name: str, gpus: int = 1, group: str = "", priority_class: str = "") -> dict:
    container = {
        "name": "c",
        "image": "busybox:1.36",
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 1}
    if priority_class:
        spec["priorityClassName"] = priority_class
    labels = {LABEL: group} if group else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def pod_group(h: Harness, name: str, min_member: int) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }
    client.CustomObjectsApi(h.api).create_namespaced_custom_object(
        GROUP, VERSION, "default", "podgroups", body
    )


def priority_class(h: Harness, name: str, value: int, policy: str | None = None) -> None:
    body: dict[str, Any] = {"metadata": {"name": name}, "value": value}
    if policy:
        body["preemptionPolicy"] = policy
    client.SchedulingV1Api(h.api).create_priority_class(body)


def condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def bound(h: Harness, names: list[str]) -> list[str]:
    return [n for n in names if h.core.read_namespaced_pod(n, "default").spec.node_name]


def test_a_gang_binds_whole_or_waits_with_coscheduling_words(tmp_path: Path) -> None:
    with running_plane(tmp_path, shape=ClusterShape(nodes=2, gpus_per_node=2)) as h:
        with PartialGangs(h.kubeconfig) as watcher:
            pod_group(h, "a", 3)
            pod_group(h, "b", 3)
            pod_group(h, "c", 3)
            for group in ("a", "b"):
                for i in range(3):
                    h.core.create_namespaced_pod("default", gpu_pod(f"{group}-{i}", group=group))
            h.core.create_namespaced_pod("default", gpu_pod("c-0", group="c"))
            a, b = [f"a-{i}" for i in range(3)], [f"b-{i}" for i in range(3)]
            wait_for("gang a bound", lambda: len(bound(h, a)) == 3)
            waiting = wait_for(
                "b-0 told why",
                lambda: condition(h.core.read_namespaced_pod("b-0", "default"), "PodScheduled"),
            )
            assert bound(h, b) == []
            assert waiting.status == "False"
            assert waiting.reason == "Unschedulable"
            assert waiting.message.startswith(
                "0/2 nodes are available: 1 Insufficient nvidia.com/gpu"
            )
            assert waiting.message.endswith(
                ", PodGroup default/b gets rejected due to Pod b-1 is unschedulable even after"
                " PostFilter"
            )
            few = wait_for(
                "c-0 told why",
                lambda: condition(h.core.read_namespaced_pod("c-0", "default"), "PodScheduled"),
            )
            assert few.message == (
                "0/2 nodes are available: pre-filter pod c-0 cannot find enough sibling pods,"
                " current pods number: 1, minMember of group: 3. preemption: 0/2 nodes are"
                " available: 2 Preemption is not helpful for scheduling., PodGroup default/c"
                " gets rejected due to Pod c-0 is unschedulable even after PostFilter"
            )
            custom = client.CustomObjectsApi(h.api)
            status = wait_for(
                "gang a Running",
                lambda: (
                    s
                    if (
                        s := custom.get_namespaced_custom_object_status(
                            GROUP, VERSION, "default", "podgroups", "a"
                        ).get("status", {})
                    ).get("phase")
                    == "Running"
                    else None
                ),
            )
            assert status["running"] == 3
            assert status["scheduleStartTime"]
            for name in a:
                h.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
            wait_for("gang b bound once a left", lambda: len(bound(h, b)) == 3)
        watcher.assert_watched(a + b)  # it saw both gangs bind: its silence means something
        assert watcher.versions > 5
        assert watcher.partial == []


def test_priority_admission_and_preemption_with_the_real_words(tmp_path: Path) -> None:
    with running_plane(tmp_path, shape=ClusterShape(nodes=2, gpus_per_node=2)) as h:
        priority_class(h, "low", 10)
        priority_class(h, "high", 1000)
        priority_class(h, "polite", 1000, "Never")
        with pytest.raises(client.ApiException) as refused:
            h.core.create_namespaced_pod("default", gpu_pod("x", priority_class="missing"))
        assert refused.value.status == 403
        assert "no PriorityClass with name missing was found" in refused.value.body
        for i in range(2):
            h.core.create_namespaced_pod("default", gpu_pod(f"low-{i}", 2, priority_class="low"))
        wait_for("low pods bound", lambda: len(bound(h, ["low-0", "low-1"])) == 2)
        low = h.core.read_namespaced_pod("low-0", "default")
        assert low.spec.priority == 10
        assert low.spec.preemption_policy == "PreemptLowerPriority"

        h.core.create_namespaced_pod("default", gpu_pod("polite", 2, priority_class="polite"))
        polite = wait_for(
            "the Never pod told why",
            lambda: condition(h.core.read_namespaced_pod("polite", "default"), "PodScheduled"),
        )
        assert polite.message == (
            "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible"
            " due to preemptionPolicy=Never."
        )
        h.core.delete_namespaced_pod("polite", "default", grace_period_seconds=0)

        seen: dict[str, Any] = {}
        stop = threading.Event()
        watching = threading.Event()

        def follow() -> None:
            w = watch.Watch()
            for event in w.stream(h.core.list_namespaced_pod, "default", timeout_seconds=30):
                watching.set()  # the low pods' ADDED events: the watch is open
                pod = event["object"]
                if condition(pod, "DisruptionTarget"):
                    seen[pod.metadata.name] = condition(pod, "DisruptionTarget")
                if stop.is_set() or seen:
                    w.stop()

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        # The preemption must happen under an open watch, not before it (a busy machine can
        # start the thread late): the victim's DisruptionTarget is only seen by a live watch.
        assert watching.wait(30), "the watch never opened"
        h.core.create_namespaced_pod("default", gpu_pod("high", 2, priority_class="high"))
        high = wait_for(
            "the preemptor bound",
            lambda: (p := h.core.read_namespaced_pod("high", "default")).spec.node_name and p,
        )
        stop.set()
        follower.join(35)
        [(victim, target)] = seen.items()
        assert target.reason == "PreemptionByScheduler"
        assert target.status == "True"
        assert (
            target.message == "default-scheduler: preempting to accommodate a higher priority pod"
        )
        assert high.status.nominated_node_name == high.spec.node_name
        preempted = [
            e
            for e in h.core.list_namespaced_event("default").items
            if e.reason == "Preempted" and e.involved_object.name == victim
        ]
        assert [e.message for e in preempted] == [
            f"Preempted by pod {high.metadata.uid} on node {high.spec.node_name}"
        ]
        other = "low-1" if victim == "low-0" else "low-0"
        assert h.core.read_namespaced_pod(other, "default").spec.node_name  # one victim only


def test_a_higher_priority_gang_preempts_a_whole_lower_gang(tmp_path: Path) -> None:
    with running_plane(tmp_path, shape=ClusterShape(nodes=2, gpus_per_node=2)) as h:
        priority_class(h, "low", 10)
        priority_class(h, "high", 1000)
        with PartialGangs(h.kubeconfig) as watcher:
            pod_group(h, "low", 4)
            for i in range(4):
                h.core.create_namespaced_pod(
                    "default", gpu_pod(f"low-{i}", group="low", priority_class="low")
                )
            low = [f"low-{i}" for i in range(4)]
            wait_for("low gang bound", lambda: len(bound(h, low)) == 4)
            pod_group(h, "high", 2)
            for i in range(2):
                h.core.create_namespaced_pod(
                    "default", gpu_pod(f"high-{i}", group="high", priority_class="high")
                )
            wait_for("high gang bound", lambda: len(bound(h, ["high-0", "high-1"])) == 2)
            wait_for(
                "every low pod gone",
                lambda: (
                    not [
                        p
                        for p in h.core.list_namespaced_pod("default").items
                        if p.metadata.name.startswith("low-")
                    ]
                ),
            )
        watcher.assert_watched([*low, "high-0", "high-1"])
        assert watcher.partial == []
