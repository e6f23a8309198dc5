"""Reading an object's ``status.conditions`` for a stack's readiness (pure functions).

A ``ready`` entry holds when its condition is ``True`` for the object's current generation
(where the status or the condition says which generation it describes: a replaced object's
old conditions are not believed). It fails at once when:

- the object says its controller gave up: a ``Stalled``, ``Failed`` or ``ReplicaFailure``
  condition that is True, or ``Progressing`` False for ProgressDeadlineExceeded (a
  Deployment past its deadline: the one reason ``kubectl rollout status`` gives up on — a
  LeaderWorkerSet sets Progressing False once it is ready);
- the named condition is False, unless the entry says ``on_false: wait``. By default a False
  condition of a built-in workload (Deployment, StatefulSet, ReplicaSet, DaemonSet: their
  Available starts False while pods come up) and one whose reason means "still starting"
  (Pending, MinimumReplicasUnavailable) is waited out instead.

Everything else is "not yet". The conditions, with their reasons and messages, are the
evidence an ERROR carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

WORKLOADS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"})
STARTING_REASONS = frozenset({"Pending", "MinimumReplicasUnavailable", "Progressing"})
GAVE_UP_TRUE = ("Stalled", "Failed", "ReplicaFailure")
#: The reason of a Deployment's Progressing=False that kubectl's rollout status reads as failed.
DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"


@dataclass(frozen=True)
class Reading:
    """Where one ready entry stands: ``ready``, ``waiting`` or ``failed``, and why."""

    state: Literal["ready", "waiting", "failed"]
    why: str = ""


def conditions_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = obj.get("status") or {}
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in found or [] if isinstance(c, dict)]


def describe(obj: Mapping[str, Any]) -> str:
    """Every condition as ``Type=Status (Reason): message``, or that there are none."""
    parts = []
    for c in conditions_of(obj):
        text = f"{c.get('type')}={c.get('status')}"
        if c.get("reason"):
            text += f" ({c['reason']})"
        if c.get("message"):
            text += f": {c['message']}"
        parts.append(text)
    return "; ".join(parts) or "no status.conditions yet"


def _fresh(condition: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """False when the condition says it describes an older generation of the object."""
    seen = condition.get("observedGeneration")
    generation = (obj.get("metadata") or {}).get("generation")
    return seen is None or generation is None or int(seen) >= int(generation)


def _status_fresh(obj: Mapping[str, Any]) -> bool:
    """False while the controller has not seen the object's current generation (its
    ``status.observedGeneration`` lags ``metadata.generation``): its conditions are old."""
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    return _fresh(status or {}, obj)


def read(obj: Mapping[str, Any], kind: str, condition: str, on_false: str | None) -> Reading:
    """Where ``condition`` of ``obj`` (of ``kind``) stands; see the module docstring."""
    if not _status_fresh(obj):
        return Reading("waiting", f"its controller has not seen generation"
                       f" {obj['metadata'].get('generation')} yet; {describe(obj)}")  # fmt: skip
    by_type = {str(c.get("type")): c for c in conditions_of(obj)}
    for name in GAVE_UP_TRUE:
        c = by_type.get(name)
        if c is not None and c.get("status") == "True" and name != condition:
            return Reading("failed", f"{name}: {describe(obj)}")
    progressing = by_type.get("Progressing")
    if (
        progressing is not None
        and progressing.get("status") == "False"
        and progressing.get("reason") == DEADLINE_EXCEEDED
    ):
        return Reading("failed", f"Progressing=False: {describe(obj)}")
    named = by_type.get(condition)
    if named is None or not _fresh(named, obj):
        return Reading("waiting", describe(obj))
    status = named.get("status")
    if status == "True":
        return Reading("ready")
    if status == "False":
        mode = on_false or (
            "wait" if kind in WORKLOADS or named.get("reason") in STARTING_REASONS else "error"
        )
        if mode == "error":
            return Reading("failed", describe(obj))
    return Reading("waiting", describe(obj))


def established(crd: Mapping[str, Any]) -> Reading:
    """A CustomResourceDefinition's ``Established`` (its kind is served) or why not."""
    by_type = {str(c.get("type")): c for c in conditions_of(crd)}
    names = by_type.get("NamesAccepted")
    if names is not None and names.get("status") == "False":
        return Reading("failed", describe(crd))
    if (by_type.get("Established") or {}).get("status") == "True":
        return Reading("ready")
    return Reading("waiting", describe(crd))
