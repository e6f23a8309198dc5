"""How a stack's ``ready`` entries read an object's conditions (pure): True holds, a False
of a custom resource fails with its message, "still starting" is waited out, a controller
that gave up fails, and a status older than the object's generation is not believed."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.backends.kubernetes.conditions import established, read


def obj(
    *conditions: dict[str, Any], generation: int = 1, observed: int | None = 1
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if observed is not None:
        status["observedGeneration"] = observed
    return {"metadata": {"name": "x", "generation": generation}, "status": status}


def c(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


ISVC, FAILED = "InferenceService", c("Ready", "False", "RevisionFailed", "image not found")
DEADLINE = c("Progressing", "False", "ProgressDeadlineExceeded")
OLD_READY = {**c("Ready", "True"), "observedGeneration": 1}


@pytest.mark.parametrize(
    ("kind", "seen", "on_false", "state"),
    [
        ("InferenceService", obj(c("Ready", "True")), None, "ready"),
        ("InferenceService", obj(c("Ready", "Unknown")), None, "waiting"),
        ("InferenceService", obj(), None, "waiting"),
        (ISVC, obj(FAILED), None, "failed"),
        (ISVC, obj(c("Ready", "False", "MinimumReplicasUnavailable")), None, "waiting"),
        ("Gateway", obj(c("Programmed", "False", "Pending")), None, "waiting"),
        ("Gateway", obj(c("Programmed", "False", "Invalid")), "wait", "waiting"),
        ("Deployment", obj(c("Available", "False", "MinimumReplicasUnavailable")), None, "waiting"),
        ("Deployment", obj(c("Available", "False", "Whatever")), "error", "failed"),
        ("Deployment", obj(c("Available", "False"), DEADLINE), None, "failed"),
        ("Widget", obj(c("Ready", "Unknown"), c("Stalled", "True", "Broken")), None, "failed"),
        ("LeaderWorkerSet", obj(c("Available", "True"), c("Progressing", "False")), None, "ready"),
        ("Deployment", obj(c("Available", "True"), generation=2, observed=1), None, "waiting"),
        ("Widget", obj(OLD_READY, generation=2, observed=None), None, "waiting"),
    ],
)  # fmt: skip
def test_a_ready_entry_reads(
    kind: str, seen: dict[str, Any], on_false: str | None, state: str
) -> None:
    condition = (
        "Available"
        if kind in ("Deployment", "LeaderWorkerSet")
        else "Programmed"
        if kind == "Gateway"
        else "Ready"
    )
    assert read(seen, kind, condition, on_false).state == state


def test_a_failure_carries_the_objects_own_words() -> None:
    reading = read(
        obj(c("Ready", "False", "RevisionFailed", "image not found")), "X", "Ready", None
    )
    assert reading.why == "Ready=False (RevisionFailed): image not found"


def test_a_crd_is_established_or_refused_its_names() -> None:
    assert established(obj(c("Established", "True"))).state == "ready"
    assert established(obj(c("NamesAccepted", "False", "NameConflict"))).state == "failed"
    assert established(obj()).state == "waiting"
