"""Lifecycle stages read from Kubernetes objects and events — pure functions over JSON.

Each stage time has a *source*, because their precision differs by three orders of magnitude:

- ``event``: an events.k8s.io/v1 Event's ``eventTime`` (a MicroTime: microseconds);
- ``field``: an object timestamp written with a fraction (some servers do);
- ``watch``: the wall time at which this sampler's watch received the change, taken only for
  changes it saw happen live (never for the state an initial LIST returns);
- ``ack``: for the workload object only, the wall time the submitter's create call returned
  (the object was committed before it);
- ``event_s`` and ``field_s``: timestamps in whole seconds (legacy events, most conditions
  and ``creationTimestamp`` on a real API server).

:data:`PRECEDENCE` says which wins when several exist: microseconds, then fractional
fields, then the live watch, then whole seconds.
"""

from __future__ import annotations

from typing import Any

from kubefacts import times

PRECEDENCE: tuple[str, ...] = ("event", "field", "watch", "ack", "event_s", "field_s")
#: Sources in whole seconds: the API floors them, so the true time is up to 1 s later.
COARSE = frozenset({"event_s", "field_s"})

#: Pod condition types and the stage each one marks when it turns True.
_CONDITIONS = {"PodScheduled": "scheduled", "Initialized": "initialized", "Ready": "ready"}
#: Container waiting reasons that mean the pod will not run without someone's help.
_STUCK = {
    "ErrImagePull",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "RunContainerError",
}
PHASES = ("Pending", "Running", "Succeeded", "Failed")

Candidate = tuple[str, str, float]  # (stage, source, epoch milliseconds)


def parse_time(text: Any) -> tuple[float, bool] | None:
    """An RFC 3339 timestamp as (epoch milliseconds, has a fraction), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = times.parse_time(text)
    except ValueError:
        return None
    return moment.timestamp() * 1000.0, "." in text


def _field(stage: str, text: Any) -> list[Candidate]:
    parsed = parse_time(text)
    if parsed is None:
        return []
    millis, fine = parsed
    return [(stage, "field" if fine else "field_s", millis)]


def pod_candidates(pod: dict[str, Any]) -> list[Candidate]:
    """Stage times written in a pod object: creation, conditions, container start and end."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    out = _field("pod_created", metadata.get("creationTimestamp"))
    for condition in status.get("conditions") or []:
        stage = _CONDITIONS.get(condition.get("type", ""))
        if stage and condition.get("status") == "True":
            out += _field(stage, condition.get("lastTransitionTime"))
    containers = status.get("containerStatuses") or []
    spec_count = len((pod.get("spec") or {}).get("containers") or []) or len(containers)
    starts = [_started_at(c) for c in containers]
    if containers and len(containers) >= spec_count and all(starts):
        latest = max(starts, key=lambda s: parse_time(s) or (0.0, False))
        # phase Running is set in the same status update that reports the containers started
        out += _field("started", latest) + _field("running", latest)
    if status.get("phase") in ("Succeeded", "Failed"):
        ends = [
            ((c.get("state") or {}).get("terminated") or {}).get("finishedAt") for c in containers
        ]
        if ends and all(ends):
            stage = "completed" if status["phase"] == "Succeeded" else "failed"
            out += _field(stage, max(ends, key=lambda s: parse_time(s) or (0.0, False)))
    return out


def _started_at(container: dict[str, Any]) -> str | None:
    state = container.get("state") or {}
    running = state.get("running") or state.get("terminated") or {}
    started = running.get("startedAt")
    return started if isinstance(started, str) else None


def pod_reached(pod: dict[str, Any]) -> set[str]:
    """The stages a pod has reached in this state (to time transitions a watch sees live)."""
    status = pod.get("status") or {}
    reached = {"pod_created"}
    for condition in status.get("conditions") or []:
        stage = _CONDITIONS.get(condition.get("type", ""))
        if stage and condition.get("status") == "True":
            reached.add(stage)
    if (pod.get("spec") or {}).get("nodeName"):
        reached.add("scheduled")
    containers = status.get("containerStatuses") or []
    if containers and all(_started_at(c) for c in containers):
        reached.add("started")
    phase = status.get("phase")
    if phase == "Running":
        reached.add("running")
    elif phase == "Succeeded":
        reached.add("completed")
    elif phase == "Failed":
        reached.add("failed")
    return reached


def pod_error(pod: dict[str, Any]) -> str | None:
    """Why a pod will not get to the end on its own, or None."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return f"pod failed: {status.get('reason') or ''} {status.get('message') or ''}".strip()
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _STUCK:
            return f"container {container.get('name')}: {waiting['reason']}"
    return None


def object_candidates(obj: dict[str, Any]) -> list[Candidate]:
    """Stage times of a workload object: its creation, and each condition that is True
    (a Job's Complete → ``completed``, Failed → ``failed``; others as ``condition.<Type>``)."""
    metadata, status = obj.get("metadata") or {}, obj.get("status") or {}
    out = _field("created", metadata.get("creationTimestamp"))
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True" or not condition.get("type"):
            continue
        kind = condition["type"]
        stage = {"Complete": "completed", "Failed": "failed"}.get(kind, f"condition.{kind}")
        out += _field(stage, condition.get("lastTransitionTime"))
    return out


def object_reached(obj: dict[str, Any]) -> set[str]:
    reached = {"created"}
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type"):
            kind = condition["type"]
            reached.add(
                {"Complete": "completed", "Failed": "failed"}.get(kind, f"condition.{kind}")
            )
    return reached


def object_error(obj: dict[str, Any]) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return f"{obj.get('kind', 'object')} failed: {condition.get('reason') or ''}".strip()
    return None


def event_fact(event: dict[str, Any]) -> dict[str, Any] | None:
    """The parts of an events.k8s.io/v1 Event (or a core/v1 one) that the times need."""
    regarding = event.get("regarding") or event.get("involvedObject") or {}
    if not regarding.get("name"):
        return None
    times: dict[str, float] = {}
    precise = parse_time(event.get("eventTime"))
    if precise is not None:
        times["event" if precise[1] else "event_s"] = precise[0]
    else:
        for key in ("deprecatedFirstTimestamp", "firstTimestamp"):
            coarse = parse_time(event.get(key))
            if coarse is not None:
                times["event_s"] = coarse[0]
                break
    return {
        "reason": event.get("reason") or "",
        "type": event.get("type") or "",
        "kind": regarding.get("kind") or "",
        "name": regarding["name"],
        "namespace": regarding.get("namespace") or "",
        "message": (event.get("note") or event.get("message") or "")[:300],
        "t": times,
    }


def best(candidates: dict[str, float]) -> tuple[float, str] | None:
    """The time to believe among a stage's candidates, and its source (see PRECEDENCE)."""
    for source in PRECEDENCE:
        if source in candidates:
            return candidates[source], source
    return None
