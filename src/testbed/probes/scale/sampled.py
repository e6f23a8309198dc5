"""``sampled.json``: what the samplers have seen, as facts that merge idempotently.

A fact is a candidate time for one stage of one pod or object from one source (see
:mod:`testbed.probes.scale.stages`), or one event. Merging two sets of facts keeps, for
every (entity, stage, source), the earliest time; events are keyed by their uid. So a
sampler rerun, or two samplers at once, or a sampler restarted mid-run, all converge on the
same file: ``merge(a, a) == a`` and the order of merges does not matter. The file is
rewritten atomically under a lock, merging with what is already on disk.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from testbed.core.errors import InputError
from testbed.probes.scale import stages
from testbed.probes.scale.template import WORKLOAD_LABEL
from testbed.results.files import write_atomic

SAMPLED = "sampled.json"
VERSION = 1


class Facts:
    """Everything sampled so far: pods, workload objects, events, and until when."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.observed_until_ms = 0.0
        # Stages this process has seen each entity in: a stage that appears later was a
        # transition seen live, so its watch receive time is a candidate. Not persisted.
        self._reached: dict[str, set[str]] = {}

    # -- observing ------------------------------------------------------------------------

    def observe_pod(self, pod: dict[str, Any], received_ms: float, live: bool) -> None:
        metadata = pod.get("metadata") or {}
        key = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
        labels = metadata.get("labels") or {}
        entry = self.pods.setdefault(key, _entity(labels.get(WORKLOAD_LABEL, "")))
        entry["node"] = (pod.get("spec") or {}).get("nodeName") or entry.get("node")
        _owners(entry, metadata)
        if any(
            c.get("type") == "DisruptionTarget" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        ):
            entry["disrupted"] = True
        entry["phase"] = _later_phase(entry.get("phase"), (pod.get("status") or {}).get("phase"))
        entry["error"] = entry.get("error") or stages.pod_error(pod)
        for stage, source, millis in stages.pod_candidates(pod):
            _offer(entry, stage, source, millis)
        self._live(key, entry, stages.pod_reached(pod), received_ms, live)
        self._seen(received_ms)

    def observe_object(self, obj: dict[str, Any], received_ms: float, live: bool) -> None:
        metadata = obj.get("metadata") or {}
        kind = obj.get("kind", "")
        key = f"{metadata.get('namespace', '')}/{kind}/{metadata.get('name', '')}"
        labels = metadata.get("labels") or {}
        entry = self.objects.setdefault(key, _entity(labels.get(WORKLOAD_LABEL, "")))
        entry["kind"] = kind
        entry["uid"] = metadata.get("uid") or entry.get("uid")
        _owners(entry, metadata)
        entry["error"] = entry.get("error") or stages.object_error(obj)
        for stage, source, millis in stages.object_candidates(obj):
            _offer(entry, stage, source, millis)
        self._live(key, entry, stages.object_reached(obj), received_ms, live)
        self._seen(received_ms)

    def observe_event(self, event: dict[str, Any], received_ms: float, live: bool) -> bool:
        """Record ``event``; False when it is not about anything (no regarding object)."""
        fact = stages.event_fact(event)
        uid = (event.get("metadata") or {}).get("uid") or (event.get("metadata") or {}).get("name")
        if fact is None or not uid:
            return False
        if live:
            fact["t"]["watch"] = received_ms
        old = self.events.get(uid)
        if old is not None:
            fact["t"] = _min_merge(old["t"], fact["t"])
        self.events[uid] = fact
        self._seen(received_ms)
        return True

    def _live(
        self, key: str, entry: dict[str, Any], reached: set[str], received_ms: float, live: bool
    ) -> None:
        before = self._reached.get(key)
        if live:
            for stage in reached - (before or set()):
                # seen appear now (or the whole entity appeared now): the receive time counts
                _offer(entry, stage, "watch", received_ms)
        self._reached[key] = reached | (before or set())

    def _seen(self, received_ms: float) -> None:
        self.observed_until_ms = max(self.observed_until_ms, received_ms)

    # -- merging and files ----------------------------------------------------------------

    def merge(self, other: Facts) -> None:
        for mine, theirs in ((self.pods, other.pods), (self.objects, other.objects)):
            for key, entry in theirs.items():
                mine[key] = _merge_entity(mine[key], entry) if key in mine else _copy(entry)
        for uid, event in other.events.items():
            if uid in self.events:
                merged = dict(self.events[uid])
                merged["t"] = _min_merge(self.events[uid]["t"], event["t"])
                self.events[uid] = merged
            else:
                self.events[uid] = {**event, "t": dict(event["t"])}
        self.observed_until_ms = max(self.observed_until_ms, other.observed_until_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "observed_until_ms": self.observed_until_ms,
            "pods": dict(sorted(self.pods.items())),
            "objects": dict(sorted(self.objects.items())),
            "events": dict(sorted(self.events.items())),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], origin: str = SAMPLED) -> Facts:
        if data.get("version") != VERSION:
            raise InputError(f"{origin}: version {data.get('version')!r}; expected {VERSION}")
        facts = cls()
        facts.pods = dict(data.get("pods") or {})
        facts.objects = dict(data.get("objects") or {})
        facts.events = dict(data.get("events") or {})
        facts.observed_until_ms = float(data.get("observed_until_ms") or 0.0)
        return facts


def load(out_dir: Path) -> Facts:
    """The facts in ``out_dir/sampled.json`` (empty when there is none yet)."""
    path = out_dir / SAMPLED
    if not path.exists():
        return Facts()
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return Facts.from_json(data, str(path))


def save(out_dir: Path, facts: Facts) -> Facts:
    """Merge ``facts`` into ``out_dir/sampled.json`` under a lock; the merged facts."""
    with _locked(out_dir):
        merged = load(out_dir)
        merged.merge(facts)
        write_atomic(out_dir / SAMPLED, orjson.dumps(merged.to_json()).decode())
    return merged


class Saver:
    """Saves one sampler's facts again and again: it merges the file into them only when
    someone else wrote it since (another sampler), so a long run does not reparse its own
    output every second."""

    def __init__(self, out_dir: Path, facts: Facts) -> None:
        self.out_dir, self.facts = out_dir, facts
        self._stamp: tuple[int, int] | None = None

    def save(self) -> Facts:
        path = self.out_dir / SAMPLED
        with _locked(self.out_dir):
            stamp = _stamp(path)
            if stamp is not None and stamp != self._stamp:
                self.facts.merge(load(self.out_dir))
            write_atomic(path, orjson.dumps(self.facts.to_json()).decode())
            self._stamp = _stamp(path)
        return self.facts


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_mtime_ns, info.st_size


@contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / ".sampled.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _entity(workload: str) -> dict[str, Any]:
    return {"workload": workload, "phase": None, "node": None, "error": None, "stages": {}}


def _owners(entry: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Owner uids (a pod a custom controller made carries no testbed label: its owner does)."""
    uids = {str(ref["uid"]) for ref in metadata.get("ownerReferences") or [] if ref.get("uid")}
    if uids:
        entry["owners"] = sorted(uids | set(entry.get("owners") or ()))


def _offer(entry: dict[str, Any], stage: str, source: str, millis: float) -> None:
    sources = entry["stages"].setdefault(stage, {})
    old = sources.get(source)
    if old is None or millis < old:
        sources[source] = millis


def _min_merge(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    out = dict(a)
    for source, millis in b.items():
        out[source] = min(out.get(source, millis), millis)
    return out


def _merge_entity(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = _copy(a)
    out["workload"] = a.get("workload") or b.get("workload") or ""
    out["node"] = a.get("node") or b.get("node")
    out["error"] = a.get("error") or b.get("error")
    if a.get("disrupted") or b.get("disrupted"):
        out["disrupted"] = True
    out["phase"] = _later_phase(a.get("phase"), b.get("phase"))
    if b.get("kind"):
        out["kind"] = b["kind"]
    if b.get("uid"):
        out["uid"] = out.get("uid") or b["uid"]
    if b.get("owners") or a.get("owners"):
        out["owners"] = sorted({*(a.get("owners") or ()), *(b.get("owners") or ())})
    for stage, sources in (b.get("stages") or {}).items():
        out["stages"][stage] = _min_merge(out["stages"].get(stage, {}), sources)
    return out


def _copy(entry: dict[str, Any]) -> dict[str, Any]:
    return {**entry, "stages": {s: dict(v) for s, v in (entry.get("stages") or {}).items()}}


def _later_phase(a: str | None, b: str | None) -> str | None:
    if a not in stages.PHASES:
        return b
    if b not in stages.PHASES:
        return a
    return a if stages.PHASES.index(a) >= stages.PHASES.index(b) else b
