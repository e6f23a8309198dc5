"""Judging a run's ``criteria:`` (:mod:`testbed.config.criteria`): treatments against treatments.

For each candidate, the change of the metric from the baseline treatment is estimated with
the bootstrap of :func:`testbed.results.stats.differences` — both treatments' requests
resampled independently, ``RESAMPLES`` times — at the criterion's confidence. With the margin
``m`` (relative, or absolute in the metric's unit) and the metric's direction (lower latency,
higher throughput are better), the comparison is

- **PASS** when the whole interval lies beyond ``m`` on the better side (we are confident the
  candidate beats the baseline by at least the margin);
- **FAIL** when the whole interval lies on the other side of ``m`` (confident it does not);
- **INCONCLUSIVE** when the interval straddles ``m``, or when the records cannot give an
  interval (a percentile beyond what the sample can show: p90 needs ≥ 50 requests);
- **ERROR** when a side chose no treatment or one without a result.

A criterion's status is the worst of its comparisons; the run's status includes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from testbed.config.criteria import Criterion
from testbed.core.ids import short_hash
from testbed.report.metric_change import tail_shortfall
from testbed.results import stats
from testbed.results.files import read_records
from testbed.results.run_summary import TreatmentRow
from testbed.results.rundir import RECORDS, RESOLVED, read_summary
from testbed.results.summaries import LOWER, NEUTRAL, Samples, direction
from testbed.results.verdict import Status, worst

RESAMPLES = 2000


def campaign_criteria(run_path: Path) -> list[Criterion]:
    """The resolved campaign's criteria (none when it has no such section)."""
    try:
        document = yaml.safe_load((run_path / RESOLVED).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    raw = document.get("criteria") if isinstance(document, dict) else None
    return [Criterion.model_validate(c) for c in raw or []]


def _chosen(rows: Sequence[TreatmentRow], values: Mapping[str, Any]) -> list[TreatmentRow]:
    return [
        r
        for r in rows
        if r.probe == "load" and all(r.params.get(k) == v for k, v in values.items())
    ]


def judge_all(run_path: Path, rows: Sequence[TreatmentRow]) -> list[dict[str, Any]]:
    """Every criterion of the run, judged (see the module docstring)."""
    out = []
    for i, criterion in enumerate(campaign_criteria(run_path)):
        comparisons = [
            _compare(run_path, rows, criterion, candidate, seed=i * 100 + j)
            for j, candidate in enumerate(criterion.candidates)
        ]
        status = worst(c["status"] for c in comparisons)
        out.append(
            {
                "name": criterion.name,
                "metric": criterion.metric,
                "better_by": criterion.better_by,
                "confidence": criterion.confidence,
                "status": status.value,
                "comparisons": comparisons,
            }
        )
    return out


def _compare(
    run_path: Path,
    rows: Sequence[TreatmentRow],
    criterion: Criterion,
    candidate: Mapping[str, Any],
    seed: int,
) -> dict[str, Any]:
    result: dict[str, Any] = {"baseline_values": criterion.baseline, "candidate_values": candidate}
    sides = []
    for what, values in (("baseline", criterion.baseline), ("candidate", candidate)):
        chosen = _chosen(rows, values)
        if len(chosen) != 1:
            reason = f"the {what} {dict(values)} chooses {len(chosen)} load treatments, not one"
            return {**result, "status": Status.ERROR.value, "reason": reason}
        if chosen[0].status in (Status.ERROR.value, Status.NOT_RUN.value):
            reason = f"the {what} treatment {chosen[0].dir} has no result ({chosen[0].status})"
            return {**result, "status": Status.ERROR.value, "reason": reason}
        sides.append(chosen[0])
    base, cand = sides
    result |= {"baseline": base.dir, "candidate": cand.dir}
    sense = direction(criterion.metric)
    if sense == NEUTRAL:
        return {
            **result,
            "status": Status.ERROR.value,
            "reason": f"{criterion.metric} has no better direction",
        }
    difference, why, sizes = _difference(run_path, base.dir, cand.dir, criterion, seed)
    if difference is None:
        return {**result, "status": Status.INCONCLUSIVE.value, "reason": why}
    return {**result, **_verdict(criterion, difference, sense, sizes)}


def _difference(
    run_path: Path, base_dir: str, cand_dir: str, criterion: Criterion, seed: int
) -> tuple[stats.Difference | None, str, tuple[int, int]]:
    pairs = []
    for folder in (base_dir, cand_dir):
        summary = read_summary(run_path / folder)
        got = Samples(summary, read_records(run_path / folder / RECORDS)).get(criterion.metric)
        if got is None:
            return None, f"{criterion.metric} cannot be computed from {folder}'s records", (0, 0)
        pairs.append(got)
    (b_sample, b_stat), (c_sample, c_stat) = pairs
    smallest = min(b_sample.size, c_sample.size)
    needed = tail_shortfall(b_stat, smallest)
    if needed is not None:
        why = f"too few requests for p{b_stat.q:g} ({smallest}; {needed} needed)"
        return None, why, (b_sample.n_clusters, c_sample.n_clusters)
    salt = int(short_hash([base_dir, cand_dir, criterion.metric], 8), 16)
    diff = stats.differences(
        b_sample, c_sample, [b_stat], [c_stat], criterion.confidence, RESAMPLES, seed + salt
    )[0]
    return diff, "", (b_sample.n_clusters, c_sample.n_clusters)


def _verdict(
    criterion: Criterion, diff: stats.Difference, sense: int, sizes: tuple[int, int]
) -> dict[str, Any]:
    """PASS, FAIL or INCONCLUSIVE from the interval of the change and the margin."""
    if criterion.relative:
        if diff.relative is None:
            return {"status": Status.INCONCLUSIVE.value, "reason": "the baseline value is 0"}
        change = diff.relative
    else:
        change = diff.delta
    margin = criterion.margin
    low, high = change.low, change.high
    if sense == LOWER:  # better is a negative change
        passed, failed = high < -margin, low >= -margin
    else:
        passed, failed = low > margin, high <= margin
    unit = "%" if criterion.relative else ""
    scale = 100 if criterion.relative else 1
    est, lo, hi = (f"{v * scale:+.1f}{unit}" for v in (change.estimate, low, high))
    shown = f"{est} [{lo}, {hi}]"
    status = Status.PASS if passed else Status.FAIL if failed else Status.INCONCLUSIVE
    words = {
        Status.PASS: "beats the baseline by more than the margin",
        Status.FAIL: "does not beat the baseline by the margin",
        Status.INCONCLUSIVE: "the interval straddles the margin",
    }[status]
    return {
        "status": status.value,
        "base_value": diff.base.estimate,
        "candidate_value": diff.candidate.estimate,
        "change": change.estimate,
        "interval": [low, high],
        "relative": criterion.relative,
        "reason": f"{criterion.metric} change {shown} ({criterion.confidence:.0%}): {words}",
        "method": f"bootstrap of requests, {RESAMPLES} resamples, n={sizes[0]}/{sizes[1]}",
    }
