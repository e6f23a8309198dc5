"""The endpoint picker's scheduling, as GAIE's EPP and llm-d's inference scheduler configure it.

The EPP reads an ``EndpointPickerConfig`` (``inference.networking.x-k8s.io/v1alpha1``):
``plugins`` (each a ``type``, an optional ``name`` and ``parameters``) and
``schedulingProfiles`` whose ``plugins`` refer to them by ``pluginRef`` with a ``weight``. For
each request a profile filters the pool's endpoints, sums each scorer's score (0..1) times its
weight, and its picker chooses. Implemented plugin types (any other is refused, naming it):

- ``queue-scorer``: ``(max − q) / (max − min)`` of the endpoints' waiting queues
  (``vllm:num_requests_waiting``); 1 for all when they are equal (GAIE's);
- ``kv-cache-scorer`` (also ``kv-cache-utilization-scorer``): ``1 − vllm:kv_cache_usage_perc``;
- ``load-aware-scorer`` (llm-d): 0.5 for an empty queue, ``0.5 × (1 − q / threshold)`` below
  ``parameters.threshold`` (default 128), 0 above;
- ``prefix-cache-scorer``: the prompt cut into blocks of ``blockSize`` tokens × 4 characters
  (GAIE's estimate of a token; ``hashBlockSize`` gives characters, as older GAIE did), each
  block's hash chained over the previous; the score is the fraction of the prompt's blocks an
  endpoint holds as a leading run, by the scorer's own index of what it routed where (per
  endpoint an LRU of ``lruCapacityPerServer`` blocks; at most ``maxPrefixBlocksToMatch``
  blocks are matched). The picked endpoint's index gets the prompt's blocks;
- ``decode-filter`` (llm-d): keeps endpoints whose ``llm-d.ai/role`` label is absent,
  ``decode`` or ``both``;
- ``max-score-picker`` (ties broken at random), ``random-picker``;
- ``single-profile-handler``: one profile (a second is refused: P/D is not emulated).

Without ``schedulingProfiles`` the one profile holds every plugin with weight 1; a profile
without a picker uses ``max-score-picker`` (GAIE's defaults). Metrics are what the gateway
last scraped (:mod:`.scrape`), as stale as the EPP's are.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

CHARS_PER_TOKEN = 4
ROLE_LABEL = "llm-d.ai/role"


class EppConfigError(Exception):
    """The EPP's configuration names something the stand-in cannot do (message says what)."""


@dataclass
class Endpoint:
    """One pool member as the picker sees it: its pod, where it listens, what it last said."""

    name: str
    address: str  # host:port on this machine
    labels: Mapping[str, str] = field(default_factory=dict)
    waiting: float = 0.0
    running: float = 0.0
    kv_usage: float = 0.0


class Scorer(Protocol):
    def score(self, prompt: str, endpoints: Sequence[Endpoint]) -> list[float]: ...

    def picked(self, prompt: str, endpoint: Endpoint) -> None: ...


class _Stateless:
    def picked(self, prompt: str, endpoint: Endpoint) -> None:
        del prompt, endpoint


class QueueScorer(_Stateless):
    def score(self, prompt: str, endpoints: Sequence[Endpoint]) -> list[float]:
        queues = [e.waiting for e in endpoints]
        low, high = min(queues), max(queues)
        if high == low:
            return [1.0] * len(endpoints)
        return [(high - q) / (high - low) for q in queues]


class KvCacheScorer(_Stateless):
    def score(self, prompt: str, endpoints: Sequence[Endpoint]) -> list[float]:
        return [max(0.0, 1.0 - e.kv_usage) for e in endpoints]


class LoadAwareScorer(_Stateless):
    def __init__(self, threshold: int = 128) -> None:
        if threshold <= 0:
            raise EppConfigError("load-aware-scorer: threshold must be a positive number")
        self.threshold = threshold

    def score(self, prompt: str, endpoints: Sequence[Endpoint]) -> list[float]:
        out = []
        for e in endpoints:
            q = e.waiting
            out.append(
                0.5 if q == 0 else 0.0 if q > self.threshold else 0.5 * (1 - q / self.threshold)
            )
        return out


class PrefixCacheScorer:
    """GAIE's approximate prefix index (see the module docstring)."""

    def __init__(self, block_chars: int, max_blocks: int, capacity: int) -> None:
        if min(block_chars, max_blocks, capacity) <= 0:
            raise EppConfigError("prefix-cache-scorer: block size, blocks and capacity must be > 0")
        self.block_chars = block_chars
        self.max_blocks = max_blocks
        self.capacity = capacity
        self._index: dict[str, OrderedDict[int, None]] = {}

    def hashes(self, prompt: str) -> list[int]:
        out, parent = [], 0
        size = self.block_chars
        for start in range(0, min(len(prompt) // size, self.max_blocks) * size, size):
            parent = hash((parent, prompt[start : start + size]))
            out.append(parent)
        return out

    def score(self, prompt: str, endpoints: Sequence[Endpoint]) -> list[float]:
        hashes = self.hashes(prompt)
        if not hashes:
            return [0.0] * len(endpoints)
        out = []
        for e in endpoints:
            held = self._index.get(e.name)
            matched = 0
            if held is not None:
                for h in hashes:
                    if h not in held:
                        break
                    matched += 1
            out.append(matched / len(hashes))
        return out

    def picked(self, prompt: str, endpoint: Endpoint) -> None:
        held = self._index.setdefault(endpoint.name, OrderedDict())
        for h in self.hashes(prompt):
            held[h] = None
            held.move_to_end(h)
        while len(held) > self.capacity:
            held.popitem(last=False)


def _decode_filter(endpoints: Sequence[Endpoint]) -> list[Endpoint]:
    return [e for e in endpoints if e.labels.get(ROLE_LABEL, "decode") in ("decode", "both")]


@dataclass
class Profile:
    """One scheduling profile: filters, weighted scorers, a picker."""

    filters: list[str] = field(default_factory=list)
    scorers: list[tuple[Scorer, float]] = field(default_factory=list)
    picker: str = "max-score-picker"


class Picker:
    """Picks an endpoint per request with one profile (see the module docstring)."""

    def __init__(self, profile: Profile, seed: int | None = None) -> None:
        self.profile = profile
        self._rng = random.Random(seed)

    def pick(self, prompt: str, endpoints: Sequence[Endpoint]) -> Endpoint | None:
        candidates = list(endpoints)
        for name in self.profile.filters:
            if name == "decode-filter":
                candidates = _decode_filter(candidates)
        if not candidates:
            return None
        if self.profile.picker == "random-picker" or not self.profile.scorers:
            chosen = self._rng.choice(candidates)
        else:
            totals = [0.0] * len(candidates)
            for scorer, weight in self.profile.scorers:
                for i, value in enumerate(scorer.score(prompt, candidates)):
                    totals[i] += weight * value
            best = max(totals)
            chosen = self._rng.choice(
                [c for c, t in zip(candidates, totals, strict=True) if t == best]
            )
        for scorer, _ in self.profile.scorers:
            scorer.picked(prompt, chosen)
        return chosen


# -- the configuration ----------------------------------------------------------------------
_PICKERS = ("max-score-picker", "random-picker")
_FILTERS = ("decode-filter",)
_HANDLERS = ("single-profile-handler",)


def _scorer(kind: str, params: Mapping[str, Any]) -> Scorer:
    if kind == "queue-scorer":
        return QueueScorer()
    if kind in ("kv-cache-scorer", "kv-cache-utilization-scorer"):
        return KvCacheScorer()
    if kind == "load-aware-scorer":
        return LoadAwareScorer(int(params.get("threshold", 128)))
    if kind == "prefix-cache-scorer":
        if "blockSize" in params and "hashBlockSize" in params:
            raise EppConfigError("prefix-cache-scorer: give blockSize (tokens) or hashBlockSize")
        chars = (
            int(params["hashBlockSize"])
            if "hashBlockSize" in params
            else int(params.get("blockSize", 16)) * CHARS_PER_TOKEN
        )
        return PrefixCacheScorer(
            chars,
            int(params.get("maxPrefixBlocksToMatch", 256)),
            int(params.get("lruCapacityPerServer", 31250)),
        )
    raise EppConfigError(
        f"plugin type {kind!r} is not implemented by the gateway stand-in (it plays"
        " queue-scorer, kv-cache-scorer, load-aware-scorer, prefix-cache-scorer, decode-filter,"
        " max-score-picker, random-picker, single-profile-handler)"
    )


def parse_config(text: str, seed: int | None = None) -> Picker:
    """The picker an ``EndpointPickerConfig`` document describes (EppConfigError if not)."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise EppConfigError(f"the EPP configuration is not YAML: {exc}") from None
    if (
        not isinstance(doc, dict)
        or doc.get("kind", "EndpointPickerConfig") != "EndpointPickerConfig"
    ):
        raise EppConfigError("the EPP configuration must be a kind: EndpointPickerConfig document")
    plugins: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for entry in doc.get("plugins") or []:
        if not isinstance(entry, dict) or not entry.get("type"):
            raise EppConfigError(f"a plugin without a type: {entry!r}")
        kind = str(entry["type"])
        plugins[str(entry.get("name") or kind)] = (kind, entry.get("parameters") or {})
    profiles = doc.get("schedulingProfiles") or [
        {"name": "default", "plugins": [{"pluginRef": name} for name in plugins]}
    ]
    if len(profiles) != 1:
        raise EppConfigError(
            f"{len(profiles)} scheduling profiles: the gateway stand-in plays one"
            " (single-profile-handler; P/D disaggregation is not emulated)"
        )
    profile = Profile()
    for ref in profiles[0].get("plugins") or []:
        name = str(ref.get("pluginRef"))
        if name not in plugins:
            raise EppConfigError(f"profile plugin {name!r} is not among the plugins")
        kind, params = plugins[name]
        if kind in _PICKERS:
            profile.picker = kind
        elif kind in _FILTERS:
            profile.filters.append(kind)
        elif kind not in _HANDLERS:
            profile.scorers.append((_scorer(kind, params), float(ref.get("weight", 1))))
    for name, (kind, _) in plugins.items():
        if kind not in (*_PICKERS, *_FILTERS, *_HANDLERS):
            _scorer(kind, {})  # refuse unknown types even when no profile uses them
        del name
    return Picker(profile, seed)


#: GAIE's default plugins when the EPP is given no configuration.
DEFAULT_CONFIG = """
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: max-score-picker
- type: single-profile-handler
"""
