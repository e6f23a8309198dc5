"""The scale verdict: thresholds such as ``p99 scheduled→running < 5 s``, as kube-burner has.

Each threshold's quantile comes from the Kaplan–Meier curve of its interval, so workloads
still waiting count for what we know of them. When the curve cannot reach the quantile,
the answer still exists if we have waited past the limit (then more than ``1 − q`` are
known to take longer: FAIL); otherwise it is INCONCLUSIVE. Errors (failed submissions,
failed or stuck pods) above ``max_errors`` FAIL the test too, and are always listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testbed.config.scale import StageThreshold
from testbed.probes.scale.survival import Survival, kaplan_meier
from testbed.probes.scale.times import Row
from testbed.results.verdict import Status, Verdict, worst

QUANTILES = (0.5, 0.9, 0.99)


def interval_survival(table: Sequence[Row], start: str, end: str, until_ms: float) -> Survival:
    durations, observed = [], []
    for row in table:
        interval = row.interval(start, end, until_ms)
        if interval is not None:
            durations.append(interval[0])
            observed.append(interval[1])
    return kaplan_meier(durations, observed)


def summary(curve: Survival) -> dict[str, Any]:
    """The quantiles (ms; None when the data cannot tell yet) and the counts behind them."""
    out: dict[str, Any] = {f"p{q * 100:g}_ms": _round(curve.quantile(q)) for q in QUANTILES}
    out.update(reached=curve.events, waiting=curve.censored)
    return out


def check(threshold: StageThreshold, table: Sequence[Row], until_ms: float) -> dict[str, Any]:
    """One threshold judged: status, value, limit and the counts (the evidence)."""
    curve = interval_survival(table, threshold.start, threshold.end, until_ms)
    value = curve.quantile(threshold.quantile)
    evidence: dict[str, Any] = {
        "threshold": threshold.label(),
        "limit_ms": threshold.limit_ms,
        "value_ms": _round(value),
        "reached": curve.events,
        "waiting": curve.censored,
        "method": "Kaplan–Meier quantile; workloads still waiting are censored",
    }
    if curve.events + curve.censored == 0:
        status, why = Status.INCONCLUSIVE, f"no workload reached {threshold.start}"
    elif value is not None:
        ok = value <= threshold.limit_ms if threshold.inclusive else value < threshold.limit_ms
        status = Status.PASS if ok else Status.FAIL
        why = f"{value:.1f} ms {'within' if ok else 'over'} {threshold.limit_ms:g} ms"
    elif curve.longest_wait >= threshold.limit_ms:
        done = curve.fraction_done_by(threshold.limit_ms)
        status = Status.FAIL
        why = f"only {done:.1%} reached {threshold.end} within {threshold.limit_ms:g} ms"
    else:
        status = Status.INCONCLUSIVE
        why = (
            f"too many still waiting: the longest wait so far ({curve.longest_wait:.0f} ms)"
            " is below the limit — wait longer (timeout_s)"
        )
    evidence.update(status=status.value, why=why)
    return evidence


def judge(
    table: Sequence[Row],
    until_ms: float,
    thresholds: Sequence[StageThreshold],
    max_errors: int,
) -> Verdict:
    """PASS / FAIL / INCONCLUSIVE from the thresholds and the error count, with evidence."""
    if not table:
        return Verdict(status=Status.ERROR, reason="no workload was submitted")
    checks = [check(t, table, until_ms) for t in thresholds]
    errors = [{"name": r.name, "error": r.error} for r in table if r.error]
    statuses = [Status(c["status"]) for c in checks]
    if len(errors) > max_errors:
        statuses.append(Status.FAIL)
    status = worst(statuses) if statuses else Status.PASS
    lines = [f"{c['threshold']}: {c['status']} ({c['why']})" for c in checks]
    if errors:
        lines.append(f"{len(errors)} workload(s) in error (max_errors {max_errors})")
    if not checks:
        lines.append("no thresholds: the verdict rests on errors only")
    return Verdict(
        status=status,
        reason="; ".join(lines),
        evidence={"thresholds": checks, "errors": errors[:50], "error_count": len(errors)},
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
