"""The A/B verdict: each criterion judged on its interval, with its evidence.

Every criterion has a threshold the canary must meet (agreement ≥ t, p50 ratio ≤ 1 + r,
error-rate increase ≤ d) and an interval at the configured confidence. The rule is the one
of non-inferiority testing:

- **PASS**: the whole interval meets the threshold (the data show the canary is good enough);
- **FAIL**: the whole interval misses it (the data show it is not);
- **INCONCLUSIVE**: the interval straddles the threshold, or fewer than ``min_samples``
  observations exist — too little data is never a pass.

The campaign's verdict is the worst criterion's (FAIL > INCONCLUSIVE > PASS, the order of
:data:`testbed.results.verdict.SEVERITY`), and FAIL when every request to the canary failed
(errors the canary's server answered or cut short: an unreachable side is ERROR before this),
however the stable side fared — a canary that answered nothing is never good enough. A
campaign with no criterion at all is refused by :class:`~testbed.config.ab.AbCriteria`, so
there is always one to judge. Each criterion's
evidence also carries two one-sided tests against the threshold: ``p_meets`` (small: the
data show the threshold is met) and ``p_violates`` (small: they show it is missed), and
``p_value``, the one matching the status (the smaller of the two when INCONCLUSIVE).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from testbed.config.ab import AbCriteria
from testbed.probes.ab import stats
from testbed.probes.ab.compare import Samples
from testbed.probes.ab.stats import FloatArray
from testbed.results.verdict import Status, Verdict, worst

_LATENCY = (
    ("ttft_ms", "max_ttft_p50_regression"),
    ("itl_ms", "max_itl_p50_regression"),
    ("e2e_ms", "max_e2e_p50_regression"),
)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _decide(
    entry: dict[str, Any], lo: float | None, hi: float | None, higher_is_better: bool
) -> dict[str, Any]:
    """Fill ``status``, ``reason`` and ``p_value`` of one criterion from its interval."""
    threshold, n, needed = entry["threshold"], entry["n"], entry["min_samples"]
    sign = "≥" if higher_is_better else "≤"
    shown = f"{_fmt(entry['observed'])} [{_fmt(lo)}, {_fmt(hi)}]"
    if n < needed:
        status, reason = Status.INCONCLUSIVE, f"n = {n} < min_samples {needed}"
    elif lo is None or hi is None:
        status, reason = Status.INCONCLUSIVE, f"no interval from n = {n} observations"
    elif (lo >= threshold) if higher_is_better else (hi <= threshold):
        status, reason = Status.PASS, f"{shown} {sign} {threshold:.4g}"
    elif (hi < threshold) if higher_is_better else (lo > threshold):
        status = Status.FAIL
        reason = f"{shown} {'<' if higher_is_better else '>'} {threshold:.4g}"
    else:
        status = Status.INCONCLUSIVE
        reason = f"{shown} straddles {threshold:.4g}; more samples would narrow it"
    p_meets, p_violates = entry["p_meets"], entry["p_violates"]
    if status is Status.PASS:
        p_value = p_meets
    elif status is Status.FAIL:
        p_value = p_violates
    else:
        known = [p for p in (p_meets, p_violates) if p is not None]
        p_value = min(known) if known else None
    entry.update(status=status.value, reason=reason, p_value=p_value)
    return entry


def agreement_criterion(
    samples: Samples, summary: Mapping[str, Any], criteria: AbCriteria
) -> dict[str, Any] | None:
    threshold = criteria.min_agreement
    if threshold is None:
        return None
    n, agreed = len(samples.agree), sum(samples.agree)
    p_meets, p_violates = stats.binomial_margin_tests(agreed, n, threshold)
    lo, hi = summary["ci"]
    entry = {
        "name": "agreement",
        "metric": f"output agreement ({summary['method']})",
        "observed": summary["value"],
        "interval": [lo, hi],
        "threshold": threshold,
        "direction": "≥",
        "n": n,
        "min_samples": criteria.min_samples,
        "test": "exact binomial, one-sided, against the threshold",
        "p_meets": p_meets,
        "p_violates": p_violates,
    }
    return _decide(entry, lo, hi, higher_is_better=True)


def _log(values: FloatArray) -> FloatArray:
    return np.asarray(
        np.log(np.maximum(values, 1e-9)), dtype=np.float64
    )  # 0 ms: a floor is a measurement floor, not −∞


def latency_criterion(
    metric: str,
    regression: float,
    samples: Samples,
    summary: Mapping[str, Any],
    criteria: AbCriteria,
) -> dict[str, Any]:
    """``canary p50 / stable p50 ≤ 1 + regression``, on the bootstrap interval of the ratio;
    the tests are rank tests of the log ratio shifted by the margin."""
    s, c = samples.latency[metric]
    margin = math.log1p(regression)
    if samples.paired:
        d = _log(c) - _log(s) - margin
        p_meets, p_violates = stats.wilcoxon_p(d, "less"), stats.wilcoxon_p(d, "greater")
        test = "Wilcoxon signed-rank, one-sided, on log(canary/stable) − log(1 + margin)"
    else:
        shifted = _log(c) - margin
        p_meets = stats.mannwhitney_p(shifted, _log(s), "less")
        p_violates = stats.mannwhitney_p(shifted, _log(s), "greater")
        test = "Mann–Whitney U, one-sided, on log(canary) − log(1 + margin) vs log(stable)"
    lo, hi = summary["ci"]
    entry = {
        "name": f"{metric.removesuffix('_ms')}_p50",
        "metric": f"{metric} p50 ratio canary/stable",
        "observed": summary["ratio"],
        "interval": [lo, hi],
        "threshold": 1 + regression,
        "direction": "≤",
        "n": samples.latency_n(metric),
        "min_samples": criteria.min_samples,
        "test": test,
        "p_meets": p_meets,
        "p_violates": p_violates,
        "canary_p50": summary["canary_p50"],
        "stable_p50": summary["stable_p50"],
    }
    return _decide(entry, lo, hi, higher_is_better=False)


def error_criterion(
    samples: Samples, summary: Mapping[str, Any], criteria: AbCriteria
) -> dict[str, Any] | None:
    margin = criteria.max_error_rate_increase
    if margin is None:
        return None
    (x_s, n_s), (x_c, n_c) = samples.errors["stable"], samples.errors["canary"]
    p_meets, p_violates = stats.farrington_manning(x_c, n_c, x_s, n_s, margin)
    lo, hi = summary["ci"]
    entry = {
        "name": "error_rate",
        "metric": "error rate increase (canary − stable)",
        "observed": summary["difference"],
        "interval": [lo, hi],
        "threshold": margin,
        "direction": "≤",
        "n": min(n_s, n_c),
        "min_samples": criteria.min_samples,
        "test": "Farrington–Manning score test, one-sided, against the margin",
        "p_meets": p_meets,
        "p_violates": p_violates,
    }
    return _decide(entry, lo, hi, higher_is_better=False)


def judge(
    samples: Samples, summary: Mapping[str, Any], criteria: AbCriteria
) -> tuple[list[dict[str, Any]], Verdict]:
    """Every configured criterion's evidence, and the verdict they give together.

    ``summary`` is the probe's ``ab`` summary (its intervals are the ones judged, so the
    report shows exactly the numbers that decided)."""
    entries: list[dict[str, Any]] = []
    agreement = agreement_criterion(samples, summary["agreement"], criteria)
    if agreement is not None:
        entries.append(agreement)
    for metric, field in _LATENCY:
        regression = getattr(criteria, field)
        if regression is not None:
            entries.append(
                latency_criterion(metric, regression, samples, summary["latency"][metric], criteria)
            )
    errors = error_criterion(samples, summary["errors"], criteria)
    if errors is not None:
        entries.append(errors)
    evidence = {"criteria": entries, "confidence": criteria.confidence}
    assert entries, "AbCriteria refuses a probe without a criterion"
    status = worst(e["status"] for e in entries)
    failed, sent = samples.errors.get("canary", (0, 0))
    if sent and failed == sent:  # nothing to compare, whatever the stable side did
        kinds = ", ".join(summary["errors"]["kinds"].get("canary", {}))
        reason = f"every one of {sent} requests to the canary failed ({kinds})"
        return entries, Verdict(status=Status.FAIL, reason=reason, evidence=evidence)
    if status is Status.PASS:
        reason = f"all {len(entries)} criteria met at {criteria.confidence:.0%} confidence"
    else:
        # Failures first: the line a reader sees should name what broke before what is unsure.
        open_ = sorted(
            (e for e in entries if e["status"] != "PASS"), key=lambda e: e["status"] != "FAIL"
        )
        reason = "; ".join(f"{e['name']} {e['status']}: {e['reason']}" for e in open_)
    return entries, Verdict(status=status, reason=reason, evidence=evidence)
