"""The times table: one row per workload, every stage's time, from submissions and facts.

A workload's pod stage is reached when all its pods have reached it (a gang of workers
is running when the last worker runs) and at least the expected number of pods exists;
its time is then the latest of theirs. Events fill in what objects only know to the second:
the scheduler's ``Scheduled`` and the kubelet's ``Started`` (per pod), a Job's
``SuccessfulCreate`` (the pod's creation), a Job's ``Completed`` (the workload's end: the
most precise of it, its condition and its pods' ends wins); other events about a workload's
objects (a PodGroup's) become extra columns ``event.<Kind>.<Reason>``. A pod known only from
events (preempted and replaced while no sampler ran) joins its workload through the
``SuccessfulCreate`` that names it: its preemption is still the workload's.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubefacts.times import MILLIS, format_time
from testbed.config.scale import STAGES
from testbed.probes.scale import stages
from testbed.probes.scale.sampled import Facts
from testbed.probes.scale.submitted import Submission, Submitted

#: Sources that are ceilings: the change happened before it was seen (or acknowledged).
_CEILINGS = ("watch", "ack")
POD_STAGES = ("pod_created", "scheduled", "initialized", "started", "running", "ready")
#: A workload object's events that mark its end (the Job controller's reasons).
_ENDING_EVENTS = {
    ("Job", "Completed"): "completed",
    ("Job", "BackoffLimitExceeded"): "failed",
    ("Job", "DeadlineExceeded"): "failed",
    ("Job", "PodFailurePolicy"): "failed",
    ("Job", "MaxFailedIndexesExceeded"): "failed",
}
TIMES_CSV = "times.csv"


@dataclass
class Row:
    """One workload's times (epoch milliseconds) and where each came from."""

    index: int
    name: str
    submitted_ms: float
    stages: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    pods: int = 0
    error: str | None = None
    failed_ms: float | None = None

    def interval(self, start: str, end: str, until_ms: float) -> tuple[float, bool] | None:
        """``end − start`` in ms and True; or, not there yet, the wait so far and False
        (censored: at the failure if it failed, else at ``until_ms``). None without start."""
        begin = self.stages.get(start)
        if begin is None:
            return None
        finish = self.stages.get(end)
        if finish is not None:
            return finish - begin, True
        stop = self.failed_ms if self.failed_ms is not None else until_ms
        return max(stop - begin, 0.0), False


def rows(submitted: Submitted, facts: Facts) -> list[Row]:
    """The table, in submission order."""
    by_workload: dict[str, list[dict[str, Any]]] = defaultdict(list)
    owner = _owner_workloads(facts)
    for key, entry in facts.pods.items():
        workload = entry.get("workload") or owner(entry)
        by_workload[workload].append({**entry, "key": key})
    pod_events, object_events = _events(facts)
    for key, workload in _unseen_pods(facts, pod_events, owner):
        # gone before any sampler listed it: it times nothing, but its events are its workload's
        by_workload[workload].append({"key": key, "stages": {}, "unseen": True})
    out = []
    for sub in submitted.ordered():
        row = Row(sub.index, sub.name, sub.sent_ms)
        row.stages["submitted"] = sub.sent_ms
        row.sources["submitted"] = "client"
        if sub.status == "error":
            row.error = f"submit: {sub.error}"
            out.append(row)
            continue
        every = by_workload.get(sub.name, [])
        # a preempted pod is gone for good (its controller makes another): it times nothing
        pods = [p for p in every if not p.get("disrupted") and not p.get("unseen")]
        row.pods = len(pods)
        _pod_stages(row, pods, pod_events, sub.expected_pods)
        own_events = {k: v for k, v in object_events.items() if k[1] == sub.name}
        _object_stages(row, facts, sub, pods, own_events)
        _lower_late(row)  # first: ceilings settle among exact times and each other…
        _raise_floored(row)  # …then floors rise to whatever is known before them
        for (kind, _), reasons in own_events.items():
            for reason, candidates in reasons.items():
                chosen = stages.best(candidates)
                if chosen is not None:
                    row.extra[f"event.{kind}.{reason}"] = chosen[0]
        _gang_and_preemption(row, pods, every, pod_events)
        out.append(row)
    return out


def _owner_workloads(facts: Facts) -> Callable[[dict[str, Any]], str]:
    """A pod's workload through its owners: an object of ours that owns it, or owns its owner
    (a custom kind's controller makes pods without our labels)."""
    by_uid = {e["uid"]: e for e in facts.objects.values() if e.get("uid")}

    def resolve(entry: dict[str, Any]) -> str:
        frontier, seen = list(entry.get("owners") or ()), set()
        while frontier:
            uid = frontier.pop()
            if uid in seen or uid not in by_uid:
                continue
            seen.add(uid)
            if by_uid[uid].get("workload"):
                return str(by_uid[uid]["workload"])
            frontier += by_uid[uid].get("owners") or []
        return ""

    return resolve


def _gang_and_preemption(
    row: Row,
    pods: list[dict[str, Any]],
    every: list[dict[str, Any]],
    pod_events: dict[str, dict[str, dict[str, float]]],
) -> None:
    """``gang.first_scheduled``: when the first of several pods was scheduled (the whole
    gang's is ``scheduled``); ``event.Pod.Preempted``: the first preemption of its pods."""
    firsts, preempted = [], []
    for pod in pods:
        events = pod_events.get(pod["key"], {})
        chosen = stages.best({**pod["stages"].get("scheduled", {}), **events.get("scheduled", {})})
        if chosen is not None:
            firsts.append(chosen[0])
    for pod in every:
        preempted += list(pod_events.get(pod["key"], {}).get("preempted", {}).values())
    if len(pods) > 1 and firsts and "scheduled" in row.stages:
        row.extra["gang.first_scheduled"] = min(*firsts, row.stages["scheduled"])
    if preempted:
        row.extra["event.Pod.Preempted"] = min(preempted)


def _unseen_pods(
    facts: Facts,
    pod_events: dict[str, dict[str, dict[str, float]]],
    owner: Callable[[dict[str, Any]], str],
) -> list[tuple[str, str]]:
    """(pod key, workload) for each pod that events name but no sampler saw. Its creator's
    events lead up to the workload — pod ← ReplicaSet ← Deployment, pod ← Job or StatefulSet —
    stopping at an object the sampler saw (its label or owners name the workload); the last
    name reached is the workload's (a bare Pod is its own)."""
    parents: dict[tuple[str, str, str], tuple[str, str]] = {}
    for event in facts.events.values():
        child = _created(event)
        if child is not None:
            parents[(event["namespace"], *child)] = (event["kind"], event["name"])
    out = []
    for key in sorted(pod_events.keys() - facts.pods.keys()):
        namespace, name = key.split("/", 1)
        kind, seen = "Pod", {("Pod", name)}
        while (namespace, kind, name) in parents:
            entry = facts.objects.get(f"{namespace}/{kind}/{name}")
            if entry is not None:
                break
            kind, name = parents[(namespace, kind, name)]
            if (kind, name) in seen:
                break
            seen.add((kind, name))
        entry = facts.objects.get(f"{namespace}/{kind}/{name}")
        workload = entry and (entry.get("workload") or owner(entry))
        out.append((key, workload or name))
    return out


def _created(event: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of what a controller's event says it created, in each controller's words."""
    message, reason = event["message"], event["reason"]
    if reason == "SuccessfulCreate" and "Created pod: " in message:  # Job, ReplicaSet, DaemonSet
        return "Pod", message.split("Created pod: ", 1)[1].split()[0]
    if reason == "SuccessfulCreate" and message.startswith("create Pod "):  # StatefulSet
        return "Pod", message.split()[2]
    if reason == "ScalingReplicaSet" and message.startswith("Scaled up replica set "):
        return "ReplicaSet", message.split()[4]
    return None


def _events(
    facts: Facts,
) -> tuple[
    dict[str, dict[str, dict[str, float]]], dict[tuple[str, str], dict[str, dict[str, float]]]
]:
    """Event times per pod key and stage, and per (kind, name), reason and source."""
    pods: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    objects: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(dict)
    for event in facts.events.values():
        chosen = stages.best(event["t"])
        if chosen is None:
            continue
        millis, source = chosen
        kind, reason = event["kind"], event["reason"]
        if kind == "Pod" and reason in ("Scheduled", "Started"):
            stage = "scheduled" if reason == "Scheduled" else "started"
            key = f"{event['namespace']}/{event['name']}"
            old = pods[key].get(stage, {}).get(source)
            # the pod has started when its last container has
            pick = max if stage == "started" else min
            pods[key].setdefault(stage, {})[source] = millis if old is None else pick(old, millis)
        elif kind == "Pod" and reason == "Preempted":
            key = f"{event['namespace']}/{event['name']}"
            old = pods[key].get("preempted", {}).get(source)
            pods[key].setdefault("preempted", {})[source] = (
                millis if old is None else min(old, millis)
            )
        elif (created := _created(event)) is not None and created[0] == "Pod":
            key = f"{event['namespace']}/{created[1]}"
            pods[key].setdefault("pod_created", {})[source] = millis
        elif kind != "Pod":
            # every source kept: a reason that ends the workload competes by precision
            known = objects[(kind, event["name"])].setdefault(reason, {})
            for origin, at in event["t"].items():
                known[origin] = min(known.get(origin, at), at)
    return pods, objects


def _pod_stages(
    row: Row,
    pods: list[dict[str, Any]],
    pod_events: dict[str, dict[str, dict[str, float]]],
    expected: int,
) -> None:
    for pod in pods:
        if pod.get("error") and row.error is None:
            row.error = f"{pod['key']}: {pod['error']}"
        failed = pod["stages"].get("failed")
        if failed or pod.get("phase") == "Failed":
            chosen = stages.best(failed or {})
            stamp = chosen[0] if chosen else None
            row.failed_ms = (
                stamp if row.failed_ms is None or stamp is None else min(row.failed_ms, stamp)
            )
            row.error = row.error or f"{pod['key']}: failed"
    if len(pods) < max(expected, 1):
        return
    for stage in (*POD_STAGES, "completed"):
        times = []
        for pod in pods:
            candidates = {
                **pod["stages"].get(stage, {}),
                **pod_events.get(pod["key"], {}).get(stage, {}),
            }
            chosen = stages.best(candidates)
            if chosen is None:
                break
            times.append(chosen)
        else:
            millis, source = max(times)
            row.stages[stage], row.sources[stage] = millis, source


def _raise_floored(row: Row) -> None:
    """A whole-second time is a floor: the true time is in [t, t + 1 s). When a stage
    before it has a later time — exact, a floor, or a receive time (a stage seen live just
    before a relist, whose next stage only the relist's whole-second field knows) — the stage
    cannot have happened before it, so a delta is never negative merely because the API
    rounded down. Such times are raised to it and marked ``>prev``."""
    floor: float | None = None
    for stage in STAGES:
        here, source = row.stages.get(stage), row.sources.get(stage, "")
        if here is None:
            continue
        if floor is not None and here < floor and source in stages.COARSE:
            row.stages[stage] = here = floor
            row.sources[stage] = f"{source}>prev"
        floor = here if floor is None else max(floor, here)


def _lower_late(row: Row) -> None:
    """A watch receive time or a create call's return is a ceiling: the change happened
    before it was seen. A later stage known to have happened earlier (an event, or another
    ceiling) is a tighter ceiling, so such a time is lowered to it and marked ``<next``."""
    ceiling: float | None = None
    for stage in reversed(STAGES):
        here, source = row.stages.get(stage), row.sources.get(stage, "")
        if here is None:
            continue
        if ceiling is not None and here > ceiling and source in _CEILINGS:
            row.stages[stage] = here = ceiling
            row.sources[stage] = f"{source}<next"
        if source.split(">")[0] not in stages.COARSE:  # exact times and ceilings
            ceiling = here if ceiling is None else min(ceiling, here)


def _object_stages(
    row: Row,
    facts: Facts,
    sub: Submission,
    pods: list[dict[str, Any]],
    own_events: dict[tuple[str, str], dict[str, dict[str, float]]],
) -> None:
    if sub.kind == "Pod":
        own = next((p for p in pods if p["key"] == f"{sub.namespace}/{sub.name}"), None)
        if own is not None and "pod_created" in row.stages:
            row.stages["created"] = row.stages["pod_created"]
            row.sources["created"] = row.sources["pod_created"]
        return
    entry = facts.objects.get(f"{sub.namespace}/{sub.kind}/{sub.name}")
    found_by_stage = {s: dict(f) for s, f in (entry or {}).get("stages", {}).items()}
    for reason, candidates in own_events.get((sub.kind, sub.name), {}).items():
        ending = _ENDING_EVENTS.get((sub.kind, reason))
        if ending is not None:  # the controller's event of the end: often finer than its condition
            found = found_by_stage.setdefault(ending, {})
            for source, millis in candidates.items():
                found[source] = min(found.get(source, millis), millis)
    for stage, found in found_by_stage.items():
        chosen = stages.best({**found, "ack": sub.acked_ms} if stage == "created" else found)
        if chosen is None:
            continue
        if stage in ("created", "completed") and _finer(chosen[1], row.sources.get(stage)):
            row.stages[stage], row.sources[stage] = chosen
        elif stage == "failed":
            row.failed_ms = chosen[0]
        elif stage.startswith("condition."):
            row.extra[stage] = chosen[0]
    if entry is not None and entry.get("error"):
        row.error = row.error or entry["error"]


def _finer(source: str, than: str | None) -> bool:
    """True when ``source`` is more precise than ``than`` (None: nothing known yet)."""
    return than is None or stages.PRECEDENCE.index(source) < stages.PRECEDENCE.index(than)


def select(
    table: Sequence[Row], head: int | None, tail: int | None, skip_errors: bool
) -> list[Row]:
    """The rows a plot shows: the first ``head`` or last ``tail``, errors left out if asked."""
    chosen = list(table)
    if head is not None:
        chosen = chosen[:head]
    if tail is not None:
        chosen = chosen[-tail:]
    return [r for r in chosen if not (skip_errors and r.error)]


def origin_ms(table: Iterable[Row]) -> float:
    return min((r.submitted_ms for r in table), default=0.0)


def write_csv(path: Path, table: Sequence[Row]) -> Path:
    """``times.csv``: every stage (ms since the first submission), its source, the delta
    from the previous stage reached, the extra event/condition columns, status and error."""
    t0 = origin_ms(table)
    extras = sorted({k for r in table for k in r.extra})
    header = ["index", "name", "status", "error", "pods", "submitted_at"]
    header += [f"{s}_ms" for s in STAGES] + [f"{s}_delta_ms" for s in STAGES[1:]]
    header += [f"{s}_source" for s in STAGES] + [f"{k}_ms" for k in extras]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in table:
            writer.writerow(_csv_row(row, t0, extras))
    return path


def _csv_row(row: Row, t0: float, extras: list[str]) -> list[Any]:
    status = "error" if row.error else "done" if "running" in row.stages else "pending"
    submitted_at = dt.datetime.fromtimestamp(row.submitted_ms / 1000, dt.UTC)
    cells: list[Any] = [row.index, row.name, status, row.error or "", row.pods]
    cells.append(format_time(submitted_at, MILLIS))
    cells += [_ms(row.stages.get(s), t0) for s in STAGES]
    previous = row.stages["submitted"]
    for stage in STAGES[1:]:
        here = row.stages.get(stage)
        cells.append("" if here is None else f"{here - previous:.3f}")
        previous = here if here is not None else previous
    cells += [row.sources.get(s, "") for s in STAGES]
    cells += [_ms(row.extra.get(k), t0) for k in extras]
    return cells


def _ms(value: float | None, t0: float) -> str:
    return "" if value is None else f"{value - t0:.3f}"
