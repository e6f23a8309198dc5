"""What the cluster says about a pod, read as testbed's verdict on a worker's start."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.backends.kubernetes.podstate import PodState, restarts, same_again, verdict_of


def pod(
    phase: str = "Pending", conditions: Any = (), containers: Any = (), init: Any = ()
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {},
        "status": {
            "phase": phase,
            "conditions": list(conditions),
            "containerStatuses": list(containers),
            "initContainerStatuses": list(init),
        },
    }


SCHEDULED = {"type": "PodScheduled", "status": "True"}
READY = {"type": "Ready", "status": "True"}


def test_ready_only_when_running_and_ready() -> None:
    assert verdict_of(pod("Running", [SCHEDULED, READY])).state == "ready"
    assert verdict_of(pod("Running", [SCHEDULED])).state == "waiting"
    waiting = verdict_of(pod("Pending", [SCHEDULED]))
    assert waiting.state == "waiting"
    assert waiting.scheduled


def test_unschedulable_carries_the_schedulers_message() -> None:
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    state = verdict_of(
        pod(
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ]
        )
    )
    assert (state.state, state.reason, state.message) == ("failed", "Unschedulable", message)


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_image_pull_failures(reason: str) -> None:
    status = {"name": "server", "state": {"waiting": {"reason": reason, "message": "not found"}}}
    state = verdict_of(pod(conditions=[SCHEDULED], containers=[status]))
    assert (state.state, state.reason, state.message) == ("failed", reason, "not found")


def test_crash_loop_and_oom() -> None:
    crash = {
        "name": "server",
        "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}},
    }
    state = verdict_of(pod("Running", [SCHEDULED], [crash]))
    assert (state.reason, state.message, state.container) == (
        "CrashLoopBackOff",
        "exit code 2",
        "server",
    )
    assert restarts(pod(containers=[crash])) == 3
    oom = {**crash, "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    assert verdict_of(pod("Running", [SCHEDULED], [oom])).reason == "OOMKilled"


def test_failed_init_container_and_evicted_pod() -> None:
    init = {"name": "fetch-model", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    state = verdict_of(pod(conditions=[SCHEDULED], init=[init]))
    assert (state.state, state.container) == ("failed", "fetch-model")
    evicted = pod("Failed", [SCHEDULED])
    evicted["status"]["reason"] = "Evicted"
    assert verdict_of(evicted).reason == "Evicted"


@pytest.mark.parametrize(
    ("reason", "restarted", "why"),
    [
        ("ErrImagePull", 0, "a fresh start pulls the same image"),
        ("ImagePullBackOff", 0, "a fresh start pulls the same image"),
        ("InvalidImageName", 0, "a fresh start pulls the same image"),
        ("CreateContainerConfigError", 0, "a fresh start makes the container from the same"),
        ("CrashLoopBackOff", 2, "a fresh start runs the same image with the same arguments"),
        ("OOMKilled", 3, "a fresh start runs the same image with the same arguments"),
        ("CrashLoopBackOff", 1, None),  # one crash may be a race with a dependency
        ("OOMKilled", 0, None),
        ("Unschedulable", 0, None),  # capacity may free up
        ("Evicted", 0, None),  # another node may hold it
    ],
)
def test_what_a_fresh_start_meets_again(reason: str, restarted: int, why: str | None) -> None:
    said = same_again(PodState("failed", reason, container="server"), restarted)
    if why is None:
        assert said is None
    else:
        assert str(said).startswith(why), said
