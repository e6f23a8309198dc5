"""Metrics over time: the series of runs of one configuration, and where they changed.

A *configuration* is a treatment's ``params_key`` (the same probe, deployments and factor
values: a treatment whose id changed with a default elsewhere stays in its series) within
one campaign; a ``testbed load`` folder's is its URL and flags. For each configuration and
each metric with a direction (lower latency, higher throughput: :func:`direction`), the
series is the metric's value in every run the results index holds, oldest first.

Change points come from Apache Otava's e-divisive method (the Hunter variant: windows split
by e-divisive, change points kept while a two-sided t-test between the segments on either
side has p below ``max_pvalue``). A change point is the first run of a new segment.

The series' *state* is its last change point: when the newest run lies after one that
moved the metric the worse way by more than the threshold (relative, the segments' means),
the newest run carries a regression that has not been undone — ``testbed history`` exits
1. A later change point back (an improvement) ends that state.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from testbed.core.errors import MissingDependency
from testbed.results.index import MetricRow, ResultsIndex, RunRow, TreatmentRow
from testbed.results.summaries import NEUTRAL, direction


@dataclass(frozen=True)
class RunPoint:
    """One run's value of a metric, with what tells the run apart."""

    run_id: str
    started: str
    value: float
    testbed_version: str = ""
    servers: str = ""  # the server kinds and versions of the run, "vllm 0.6.3, …"
    label: str = ""  # the run's --label
    commit: str = ""  # the commit it tested (results/provenance.py), "+dirty" when not exactly


@dataclass(frozen=True)
class ChangePoint:
    """Where a series changed: ``index`` is the first point of the new segment."""

    index: int
    run_id: str
    mean_before: float
    mean_after: float
    pvalue: float

    @property
    def change(self) -> float:
        """Relative change of the segments' means (0.15: 15 % up)."""
        return self.mean_after / self.mean_before - 1.0 if self.mean_before else 0.0


@dataclass
class Series:
    """One metric of one configuration over the runs."""

    campaign: str
    config: str  # params_key
    label: str  # the treatment's directory in its newest run
    metric: str
    points: list[RunPoint]
    change_points: list[ChangePoint] = field(default_factory=list)

    @property
    def direction(self) -> int:
        return direction(self.metric)

    def worse(self, change: ChangePoint) -> bool:
        return change.change * self.direction < 0

    def regression(self, threshold: float) -> ChangePoint | None:
        """The last change point, when it is a regression beyond ``threshold`` that the
        newest run still carries (see the module docstring)."""
        if not self.change_points:
            return None
        last = self.change_points[-1]
        return last if self.worse(last) and abs(last.change) > threshold else None


def gather(
    index: ResultsIndex, campaign: str | None = None, metrics: Sequence[str] = ()
) -> list[Series]:
    """Every series of the index (of ``campaign``, of the metrics matching ``metrics``),
    each metric with a direction, oldest run first."""
    query = (
        select(
            RunRow.run_id,
            RunRow.started,
            RunRow.campaign,
            RunRow.testbed_version,
            RunRow.meta,
            TreatmentRow.params_key,
            TreatmentRow.dir,
            MetricRow.name,
            MetricRow.value,
        )
        .join(RunRow, RunRow.run_id == MetricRow.run_id)
        .join(
            TreatmentRow,
            (TreatmentRow.run_id == MetricRow.run_id)
            & (TreatmentRow.treatment_id == MetricRow.treatment_id),
        )
        .order_by(RunRow.started, RunRow.run_id)
    )
    if campaign is not None:
        query = query.where(RunRow.campaign == campaign)
    with Session(index.engine) as session:
        rows = session.execute(query).all()
    found: dict[tuple[str, str, str], Series] = {}
    for run_id, started, name, version, meta, key, folder, metric, value in rows:
        if direction(metric) == NEUTRAL:
            continue
        if metrics and not any(fnmatch.fnmatchcase(metric, p) for p in metrics):
            continue
        series = found.setdefault((name, key, metric), Series(name, key, folder, metric, points=[]))
        series.label = folder
        point = RunPoint(run_id, started, float(value), version or "", _servers(meta),
                         *provenance_of(meta))  # fmt: skip
        series.points.append(point)
    return list(found.values())


def provenance_of(meta: Any) -> tuple[str, str]:
    """The label and the commit a run's metadata records (empty when it does not)."""
    if not isinstance(meta, dict):
        return "", ""
    commit = str(meta.get("commit") or "")
    if commit and meta.get("dirty"):
        commit += "+dirty"
    return str(meta.get("label") or ""), commit


def _servers(meta: Any) -> str:
    servers = meta.get("servers") if isinstance(meta, dict) else None
    if not isinstance(servers, list):
        return ""
    shown = {f"{s.get('server')} {s.get('version') or ''}".strip() for s in servers if s}
    return ", ".join(sorted(shown))


def find_change_points(series: Series, max_pvalue: float, window: int = 30) -> None:
    """Fill ``series.change_points`` by Otava's e-divisive method (at least 3 points)."""
    values = [p.value for p in series.points]
    if len(values) < 3 or len(set(values)) == 1:
        series.change_points = []
        return
    try:
        from otava.analysis import compute_change_points  # type: ignore[import-untyped]
    except ImportError as exc:
        raise MissingDependency("apache-otava", "history") from exc
    found, _ = compute_change_points(values, window_len=window, max_pvalue=max_pvalue)
    series.change_points = [
        ChangePoint(
            index=int(cp.index),
            run_id=series.points[int(cp.index)].run_id,
            mean_before=float(cp.stats.mean_before()),
            mean_after=float(cp.stats.mean_after()),
            pvalue=float(cp.stats.pvalue),
        )
        for cp in sorted(found, key=lambda cp: int(cp.index))
    ]
