"""Preemption: which lower-priority pods to evict from which node so that a pod fits.

Roughly kube-scheduler's DefaultPreemption: on each node that passes the static filters,
remove every pod of lower priority; if the preemptor still does not fit, the node is out.
Otherwise put victims back, highest priority first, while the preemptor still fits (the
"reprieve"); what stays removed are the victims. Among nodes, the one whose highest victim
priority is lowest wins, then the smallest sum of victim priorities, then the fewest victims.

One difference, on purpose: a victim that belongs to a gang (a PodGroup) takes its whole
gang with it (every bound member, on any node), so preemption never leaves a gang partly
bound; kube-scheduler's DefaultPreemption is gang-unaware (it would evict one member).
PodDisruptionBudgets are not read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubefacts.fit import PodFacts, resource_reasons, static_reason, with_hostname
from kubemu.scheduler.capacity import CapacityIndex


@dataclass(frozen=True)
class Victim:
    """A bound pod that could be evicted: where it runs, what it holds, its priority, and the
    unit it leaves with (its own uid, or its gang's key)."""

    uid: str
    node: str
    requests: tuple[tuple[str, int], ...]
    priority: int
    unit: str


def pick(
    index: CapacityIndex, pod: PodFacts, priority: int, candidates: Sequence[Victim]
) -> tuple[str, list[Victim]] | None:
    """The node to preempt on and every pod to evict (whole units), or None."""
    units: dict[str, list[Victim]] = {}
    for victim in candidates:
        units.setdefault(victim.unit, []).append(victim)
    eligible = {u for u, members in units.items() if max(m.priority for m in members) < priority}
    best: tuple[tuple[int, int, int, str], str, list[str]] | None = None
    for name, node in index.nodes.items():
        own = with_hostname(node.facts, index.hostnames.get(name, name))
        if static_reason(pod, own) is not None:
            continue
        here = {u for u in eligible if any(m.node == name for m in units[u])}
        free = dict(node.free)
        for unit in here:
            _give(free, units[unit], name, +1)
        if not here or resource_reasons(pod.requests, free):
            continue
        chosen = []
        for unit in sorted(here, key=lambda u: -_unit_priority(units[u])):
            _give(free, units[unit], name, -1)
            if resource_reasons(pod.requests, free):
                _give(free, units[unit], name, +1)
                chosen.append(unit)
        if not chosen:
            continue
        members = [m for u in chosen for m in units[u]]
        score = (
            max(m.priority for m in members),
            sum(m.priority for m in members),
            len(members),
            name,
        )
        if best is None or score < best[0]:
            best = (score, name, chosen)
    if best is None:
        return None
    return best[1], [m for u in best[2] for m in units[u]]


def _unit_priority(members: Sequence[Victim]) -> int:
    return max(m.priority for m in members)


def _give(free: dict[str, int], members: Sequence[Victim], node: str, sign: int) -> None:
    for member in members:
        if member.node == node:
            _shift(free, member.requests, sign)


def _shift(
    free: dict[str, int], requests: Mapping[str, int] | Sequence[tuple[str, int]], sign: int
) -> None:
    for res, value in dict(requests).items():
        free[res] = free.get(res, 0) + sign * value
