"""The times table takes the most precise source for each fact: a preemption that only
events recorded (no sampler ran while the pod lived) is still its workload's, and a Job's
exact ``Completed`` event beats its whole-second condition and its pods' whole-second ends."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.probes.scale import times
from testbed.probes.scale.sampled import Facts
from testbed.probes.scale.submitted import Header, Submitted
from tests.probes.scale.test_scale_analysis import T0, event, iso, pod, submission


def _submitted(kind: str = "Job", pods: int = 1) -> Submitted:
    sub = Submitted(
        header=Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    )
    sub.workloads[0] = submission(0, T0, kind=kind)
    sub.workloads[0].expected_pods = pods
    return sub


def _job(conditions: dict[str, float] | None = None) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {
            "name": "w-0",
            "namespace": "ns",
            "creationTimestamp": iso(T0 + 5, False),
            "labels": {"testbed.io/scale-workload": "w-0"},
        },
        "status": {
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": iso(v, False)}
                for t, v in (conditions or {}).items()
            ]
        },
    }


def test_a_preemption_no_sampler_saw_is_attributed_through_the_creators_events() -> None:
    """The victim pod was created, preempted and replaced before the sampler's first list:
    sampled.json has its events only. It joins the Job through ``Created pod:``, times
    nothing, and its preemption is the workload's."""
    sub, facts = _submitted(), Facts()
    facts.observe_object(_job(), T0 + 9000, live=False)
    created = [("w-0-a", T0 + 10), ("w-0-b", T0 + 3000)]
    for uid, (name, at) in enumerate(created):
        message = f"Created pod: {name}"
        facts.observe_event(
            event(f"c{uid}", "SuccessfulCreate", "Job", "w-0", at, message), 0, False
        )
    facts.observe_event(event("p", "Preempted", "Pod", "w-0-a", T0 + 2500), T0 + 9000, False)
    facts.observe_event(event("s", "Scheduled", "Pod", "w-0-a", T0 + 100), T0 + 9000, False)
    # a pod no event of ours created stays out, whatever its name
    facts.observe_event(event("q", "Preempted", "Pod", "w-0-z", T0 + 100), T0 + 9000, False)
    replacement = pod("w-0-b", "w-0", created=T0 + 3000, phase="Running", node="n")
    facts.observe_pod(replacement, T0 + 9000, live=False)
    [row] = times.rows(sub, Facts.from_json(facts.to_json()))
    assert row.extra["event.Pod.Preempted"] == pytest.approx(T0 + 2500)
    assert row.pods == 1  # the victim times nothing: the replacement alone is the workload's
    assert row.stages["pod_created"] == pytest.approx(T0 + 3000)


def test_a_preempted_pod_of_a_deployment_or_statefulset_is_found_up_the_chain() -> None:
    """Deployment → ReplicaSet (``Scaled up replica set``) → pod (``Created pod:``), and the
    StatefulSet controller's own words (``create Pod … in StatefulSet … successful``)."""
    for kind, creations in (
        (
            "Deployment",
            [
                ("ScalingReplicaSet", "Deployment", "w-0", "Scaled up replica set w-0-7f9 to 1"),
                ("SuccessfulCreate", "ReplicaSet", "w-0-7f9", "Created pod: w-0-7f9-x2"),
            ],
        ),
        (
            "StatefulSet",
            [
                (
                    "SuccessfulCreate",
                    "StatefulSet",
                    "w-0",
                    "create Pod w-0-7f9-x2 in StatefulSet w-0 successful",
                )
            ],
        ),
    ):
        sub, facts = _submitted(kind), Facts()
        for uid, (reason, owner_kind, owner, message) in enumerate(creations):
            facts.observe_event(
                event(f"c{uid}", reason, owner_kind, owner, T0 + 10, message), 0, False
            )
        facts.observe_event(event("p", "Preempted", "Pod", "w-0-7f9-x2", T0 + 700), 0, False)
        [row] = times.rows(sub, facts)
        assert row.extra.get("event.Pod.Preempted") == pytest.approx(T0 + 700), kind


def test_completed_is_the_jobs_exact_event_not_its_whole_second_condition() -> None:
    """A 3 s job: running at T0 + 1.95 s (exact, the kubelet's Started event), its pod ended and
    the Job completed at T0 + 4.99 s — the condition and finishedAt floor that to T0 + 4 s, the
    Job controller's ``Completed`` event says T0 + 4.99 s."""
    sub, facts = _submitted(), Facts()
    body = pod("w-0-a", "w-0", created=T0 + 10, phase="Succeeded", node="n")
    body["status"]["containerStatuses"] = [
        {
            "name": "c",
            "state": {
                "terminated": {
                    "startedAt": iso(T0 + 1950, False),
                    "finishedAt": iso(T0 + 4990, False),
                }
            },
        }
    ]
    facts.observe_pod(body, T0 + 6000, live=False)
    facts.observe_event(event("st", "Started", "Pod", "w-0-a", T0 + 1950), 0, False)
    facts.observe_object(_job({"Complete": T0 + 4990}), T0 + 6000, live=False)
    facts.observe_event(event("done", "Completed", "Job", "w-0", T0 + 4990), 0, False)
    [row] = times.rows(sub, facts)
    assert row.sources["completed"] == "event"
    assert row.stages["completed"] == pytest.approx(T0 + 4990)
    assert row.stages["completed"] - row.stages["running"] == pytest.approx(3040)
    assert row.extra["event.Job.Completed"] == pytest.approx(T0 + 4990)


def test_without_the_event_a_fractional_condition_beats_whole_second_pod_ends() -> None:
    sub, facts = _submitted(), Facts()
    body = pod("w-0-a", "w-0", created=T0 + 10, phase="Succeeded", node="n")
    body["status"]["containerStatuses"] = [
        {
            "name": "c",
            "state": {
                "terminated": {
                    "startedAt": iso(T0 + 50, False),
                    "finishedAt": iso(T0 + 4990, False),
                }
            },
        }
    ]
    facts.observe_pod(body, T0 + 6000, live=False)
    job = _job()
    job["status"]["conditions"] = [
        {"type": "Complete", "status": "True", "lastTransitionTime": iso(T0 + 4995)}
    ]
    facts.observe_object(job, T0 + 6000, live=False)
    [row] = times.rows(sub, facts)
    assert (row.stages["completed"], row.sources["completed"]) == (
        pytest.approx(T0 + 4995),
        "field",
    )
