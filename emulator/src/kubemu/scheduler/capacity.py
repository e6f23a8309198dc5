"""Free capacity of every node, indexed so that placing a pod costs O(kinds of node), not O(nodes).

Nodes are grouped in buckets by (what the filters read of them, their free capacity). A
thousand identical GPU nodes with 0…8 GPUs in use make at most nine buckets, so one pod is
placed or diagnosed by looking at a handful of buckets, and a storm of a thousand pending
pods costs a few thousand bucket checks instead of a million node checks. Filter results
that do not depend on capacity are cached per (pod constraints, node kind).

Placement spreads like the default scheduler's LeastAllocated score: among the buckets that
fit, the one whose nodes keep the largest share of their capacity free after the pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from kubefacts.fit import (
    NO_VICTIMS,
    NOT_HELPFUL,
    NodeFacts,
    PodFacts,
    fit_message,
    resource_reasons,
    static_reason,
    with_hostname,
)

Free = tuple[tuple[str, int], ...]
BucketKey = tuple[NodeFacts, Free]


@dataclass
class _Node:
    facts: NodeFacts
    free: dict[str, int]

    def key(self) -> BucketKey:
        return (self.facts, tuple(sorted(self.free.items())))


@dataclass
class CapacityIndex:
    """Nodes, their free capacity and the pods' reservations on them."""

    nodes: dict[str, _Node] = field(default_factory=dict)
    buckets: dict[BucketKey, dict[str, None]] = field(default_factory=dict)
    hostnames: dict[str, str] = field(default_factory=dict)
    _static: dict[tuple[str, NodeFacts], str | None] = field(default_factory=dict)

    def set_node(
        self, name: str, facts: NodeFacts, used: Mapping[str, int], hostname: str | None = None
    ) -> None:
        """Add or refresh a node; ``used`` is what the pods bound to it reserve."""
        self.remove_node(name)
        self.hostnames[name] = hostname or name
        allocatable = dict(facts.allocatable)
        free = {res: allocatable.get(res, 0) - used.get(res, 0) for res in allocatable}
        node = _Node(facts, free)
        self.nodes[name] = node
        self.buckets.setdefault(node.key(), {})[name] = None

    def remove_node(self, name: str) -> None:
        self.hostnames.pop(name, None)
        node = self.nodes.pop(name, None)
        if node is not None:
            self._unbucket(name, node)

    def reserve(self, name: str, requests: Mapping[str, int] | tuple[tuple[str, int], ...]) -> None:
        """Take ``requests`` from ``name``'s free capacity (a pod was bound to it)."""
        self._shift(name, dict(requests), -1)

    def release(self, name: str, requests: Mapping[str, int] | tuple[tuple[str, int], ...]) -> None:
        """Give ``requests`` back (the pod bound to ``name`` ended or was deleted)."""
        self._shift(name, dict(requests), +1)

    def place(self, pod: PodFacts) -> str | None:
        """The node ``pod`` should be bound to, or None when no node fits it now."""
        best: tuple[float, str] | None = None
        for facts, free, names, static in self._groups(pod):
            if static is not None:
                continue
            free_map = dict(free)
            if resource_reasons(pod.requests, free_map):
                continue
            score = _spread_score(pod, facts, free_map)
            if best is None or score > best[0]:
                best = (score, next(iter(names)))
        return None if best is None else best[1]

    def diagnose(self, pod: PodFacts) -> str:
        """Why ``pod`` fits no node, in the real scheduler's words (see ``fit.fit_message``)."""
        reasons: Counter[str] = Counter()
        preemption: Counter[str] = Counter()
        for _, free, names, static in self._groups(pod):
            count = len(names)
            if static is not None:
                reasons[static] += count
                preemption[NOT_HELPFUL] += count
                continue
            short = resource_reasons(pod.requests, dict(free))
            for reason in short:
                reasons[reason] += count
            preemption[NO_VICTIMS if short else NOT_HELPFUL] += count
        return fit_message(len(self.nodes), reasons, preemption)

    def _groups(
        self, pod: PodFacts
    ) -> Iterator[tuple[NodeFacts, Free, Collection[str], str | None]]:
        """Nodes alike for ``pod``: (facts, free, names, the failing static filter or None).

        A pod whose constraints name the hostname sees every node on its own; the others
        see whole buckets.
        """
        for (facts, free), names in self.buckets.items():
            if not names:
                continue
            if not pod.host_pinned:
                yield facts, free, names.keys(), self._static_reason(pod, facts)
                continue
            for name in names:
                own = with_hostname(facts, self.hostnames.get(name, name))
                yield own, free, (name,), static_reason(pod, own)

    def _static_reason(self, pod: PodFacts, facts: NodeFacts) -> str | None:
        key = (pod.constraints_key, facts)
        if key not in self._static:
            self._static[key] = static_reason(pod, facts)
        return self._static[key]

    def _shift(self, name: str, requests: dict[str, int], sign: int) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        self._unbucket(name, node)
        for res, value in requests.items():
            node.free[res] = node.free.get(res, 0) + sign * value
        self.buckets.setdefault(node.key(), {})[name] = None

    def _unbucket(self, name: str, node: _Node) -> None:
        key = node.key()
        names = self.buckets.get(key)
        if names is not None:
            names.pop(name, None)
            if not names:
                del self.buckets[key]


def _spread_score(pod: PodFacts, facts: NodeFacts, free: Mapping[str, int]) -> float:
    allocatable = dict(facts.allocatable)
    shares = [
        (free.get(res, 0) - wanted) / allocatable[res]
        for res, wanted in pod.requests
        if allocatable.get(res)
    ]
    return sum(shares) / len(shares) if shares else 0.0
