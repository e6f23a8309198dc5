"""PriorityClasses and the Priority admission plugin: what a pod's priority is.

As the API server's ``Priority`` admission does on create: a pod naming
``spec.priorityClassName`` gets that class's ``value`` as ``spec.priority`` and its
``preemptionPolicy`` (a missing class is 403 ``no PriorityClass with name … was found``);
a pod naming none gets the ``globalDefault`` class (name, value, policy) when one exists,
else priority 0. A pod that writes a ``spec.priority`` differing from the computed one is
refused, as the real plugin refuses it. The two ``system-*`` classes exist from the start.
PriorityClass checks: an integer ``value`` at most one billion for user classes, a known
``preemptionPolicy`` (default ``PreemptLowerPriority``), at most one ``globalDefault``.
"""

from __future__ import annotations

from typing import Any

from kubemu.storage.errors import forbidden, invalid
from kubemu.storage.objects import Obj, Reader

KEY = "priorityclasses.scheduling.k8s.io"
GROUP = "scheduling.k8s.io"
PREEMPT = "PreemptLowerPriority"
NEVER = "Never"
#: HighestUserDefinablePriority: classes above it are reserved to ``system-`` names.
_HIGHEST_USER = 1_000_000_000
SYSTEM_CLASSES = (
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to"
        " another node if necessary.",
    ),
)


def system_classes() -> list[dict[str, Any]]:
    """The classes every cluster has (created with the store)."""
    return [
        {
            "metadata": {"name": name},
            "value": value,
            "description": text,
            "preemptionPolicy": PREEMPT,
        }
        for name, value, text in SYSTEM_CLASSES
    ]


def admit_class(store: Reader, obj: Obj) -> None:
    """Default and check a new PriorityClass (422 like the server's validation)."""
    name = obj["metadata"]["name"]
    value = obj.get("value")
    errors: list[tuple[str, str]] = []
    if not isinstance(value, int) or isinstance(value, bool):
        errors.append(("value", "Required value: an integer priority"))
    elif value > _HIGHEST_USER and not name.startswith("system-"):
        errors.append(
            (
                "value",
                f"Invalid value: {value}: maximum allowed value of a user defined"
                f" priority is {_HIGHEST_USER}",
            )
        )
    policy = obj.setdefault("preemptionPolicy", PREEMPT)
    if policy not in (PREEMPT, NEVER):
        errors.append(
            (
                "preemptionPolicy",
                f'Unsupported value: "{policy}": supported values: "{NEVER}", "{PREEMPT}"',
            )
        )
    if obj.get("globalDefault"):
        other = _global_default(store)
        if other is not None and other["metadata"]["name"] != name:
            errors.append(
                (
                    "globalDefault",
                    "Invalid value: true: PriorityClass "
                    f"{other['metadata']['name']} is already marked as default. Only one default"
                    " can exist",
                )
            )
    if errors:
        raise invalid("PriorityClass", GROUP, name, errors)


def admit_pod(store: Reader, pod: Obj) -> None:
    """Resolve ``spec.priorityClassName`` into ``spec.priority`` and ``preemptionPolicy``."""
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName") or ""
    if name:
        chosen = store.try_get(KEY, None, name)
        if chosen is None:
            raise _forbidden(pod, f"no PriorityClass with name {name} was found")
    else:
        chosen = _global_default(store)
        if chosen is not None:
            spec["priorityClassName"] = chosen["metadata"]["name"]
    value = int(chosen.get("value") or 0) if chosen is not None else 0
    given = spec.get("priority")
    if given is not None and given != value:
        raise _forbidden(
            pod,
            f"the integer value of priority ({given}) must not be provided in pod spec;"
            f" priority admission controller computed {value} from the given PriorityClass"
            " name",
        )
    spec["priority"] = value
    spec["preemptionPolicy"] = (chosen or {}).get("preemptionPolicy") or PREEMPT


def _global_default(store: Reader) -> Obj | None:
    classes, _ = store.list(KEY)
    defaults = [c for c in classes if c.get("globalDefault")]
    # with several (made by updates), the real plugin takes the lowest value
    return min(defaults, key=lambda c: int(c.get("value") or 0), default=None)


def _forbidden(pod: Obj, why: str) -> Exception:
    name = pod["metadata"]["name"]
    return forbidden("pods", "", name, f'pods "{name}" is forbidden: {why}')
