"""From the A/B records to the comparison: samples, agreement, latency and errors.

Pure functions of the records :mod:`testbed.probes.ab.traffic` wrote (so every number of the
summary can be recomputed from ``records.jsonl``). Per-request latency quantities:

- ``ttft_ms`` and ``e2e_ms`` as defined in :mod:`testbed.results.metrics`;
- ``itl_ms``: the request's *mean* inter-chunk gap, ``(last chunk − first chunk) / (chunks − 1)``
  — one value per request, so that it can be paired; unaffected by chunks that arrive in one
  network read.

Paired mode compares the pairs where both sides succeeded (and both have the quantity);
split mode compares the two sides' successful requests as independent samples, and output
agreement over the prompts that reached both sides (the first answer of each side).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from testbed.probes.ab import stats
from testbed.probes.ab.stats import FloatArray
from testbed.probes.ab.traffic import SIDES, Side
from testbed.results import metrics

Record = Mapping[str, Any]
METRICS = ("ttft_ms", "itl_ms", "e2e_ms")
_EXAMPLES = 5  # disagreeing prompts shown in the summary
_SNIPPET = 120  # characters of each output shown


def mean_itl_ms(record: Record) -> float | None:
    """The request's mean gap between content chunks (ms); None below two chunks."""
    chunks = record.get("chunks_ns") or []
    if len(chunks) < 2:
        return None
    return float((chunks[-1] - chunks[0]) / (len(chunks) - 1) * 1e-6)


_QUANTITY = {"ttft_ms": metrics.ttft_ms, "itl_ms": mean_itl_ms, "e2e_ms": metrics.e2e_ms}


@dataclass
class Samples:
    """The observations the criteria are judged on."""

    paired: bool
    latency: dict[str, tuple[FloatArray, FloatArray]] = field(default_factory=dict)
    agree: list[bool] = field(default_factory=list)  # per compared prompt
    errors: dict[Side, tuple[int, int]] = field(default_factory=dict)  # (errors, sent)

    def latency_n(self, metric: str) -> int:
        s, c = self.latency[metric]
        return min(s.size, c.size)


def by_side(records: Iterable[Record]) -> dict[Side, list[Record]]:
    out: dict[Side, list[Record]] = {side: [] for side in SIDES}
    for record in records:
        out[record["side"]].append(record)
    return out


def complete_pairs(records: Iterable[Record]) -> list[tuple[Record, Record]]:
    """``(stable, canary)`` records of every pair in which both requests succeeded, by pair."""
    pairs: dict[int, dict[str, Record]] = {}
    for record in records:
        pairs.setdefault(record["pair"], {})[record["side"]] = record
    out = []
    for pair in sorted(pairs):
        s, c = pairs[pair].get("stable"), pairs[pair].get("canary")
        if s is not None and c is not None and metrics.is_ok(s) and metrics.is_ok(c):
            out.append((s, c))
    return out


def compared_outputs(records: Sequence[Record], paired: bool) -> list[tuple[str, str, str]]:
    """``(prompt id, stable text, canary text)`` for each comparison of outputs."""
    if paired:
        return [(s["prompt_id"], s["text"], c["text"]) for s, c in complete_pairs(records)]
    first: dict[Side, dict[str, str]] = {side: {} for side in SIDES}
    for record in sorted(records, key=lambda r: r["seq"]):
        if metrics.is_ok(record):
            first[record["side"]].setdefault(record["prompt_id"], record["text"])
    common = [p for p in first["stable"] if p in first["canary"]]
    return [(p, first["stable"][p], first["canary"][p]) for p in sorted(common)]


def latency_samples(
    records: Sequence[Record], paired: bool
) -> dict[str, tuple[FloatArray, FloatArray]]:
    """Per metric, the stable and canary values (aligned by pair when ``paired``)."""
    out = {}
    for name, quantity in _QUANTITY.items():
        if paired:
            values = [(quantity(s), quantity(c)) for s, c in complete_pairs(records)]
            kept = [(a, b) for a, b in values if a is not None and b is not None]
            s_arr = np.array([a for a, _ in kept], dtype=float)
            c_arr = np.array([b for _, b in kept], dtype=float)
        else:
            sides = by_side(records)
            s_arr, c_arr = (
                np.array(
                    [v for r in sides[side] if metrics.is_ok(r) and (v := quantity(r)) is not None],
                    dtype=float,
                )
                for side in SIDES
            )
        out[name] = (s_arr, c_arr)
    return out


def error_counts(records: Iterable[Record]) -> dict[Side, tuple[int, int]]:
    """``(errors, sent)`` per side."""
    sides = by_side(records)
    return {side: (sum(not metrics.is_ok(r) for r in rs), len(rs)) for side, rs in sides.items()}


# -- summaries -----------------------------------------------------------------------------


def latency_summary(
    samples: Samples, confidence: float, resamples: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Per metric: p50 of each side, their ratio with its bootstrap interval, the
    Hodges–Lehmann shift with its interval, and the paired and unpaired test p-values."""
    out = {}
    for offset, (name, (s, c)) in enumerate(samples.latency.items()):
        ratio = stats.ratio_of_medians(
            s,
            c,
            paired=samples.paired,
            confidence=confidence,
            resamples=resamples,
            seed=seed + offset,
        )
        if samples.paired:
            shift = stats.hodges_lehmann_paired(c - s, confidence)
            wilcoxon = stats.wilcoxon_p(c - s)
        else:
            shift = stats.hodges_lehmann_shift(c, s, confidence)
            wilcoxon = None
        out[name] = {
            "n": samples.latency_n(name) if samples.paired else [int(s.size), int(c.size)],
            "stable_p50": stats.median(s),
            "canary_p50": stats.median(c),
            "ratio": ratio.value,
            "ci": ratio.interval,
            "shift_ms": shift.value,
            "shift_ci": shift.interval,
            "wilcoxon_p": wilcoxon,
            "mannwhitney_p": stats.mannwhitney_p(c, s),
            "prob_canary_slower": stats.prob_superiority(c, s),
        }
    return out


def agreement_summary(
    compared: Sequence[tuple[str, str, str]],
    scores: Sequence[float] | None,
    threshold: float,
    confidence: float,
) -> tuple[list[bool], dict[str, Any]]:
    """The agreement flags the criterion uses (by similarity when ``scores`` are given,
    exact otherwise) and the summary: both proportions, the interval, examples of
    disagreement."""
    exact = [s == c for _, s, c in compared]
    similar = [x >= threshold for x in scores] if scores is not None else None
    flags = similar if similar is not None else exact
    interval = stats.wilson(sum(flags), len(flags), confidence)
    examples: list[dict[str, Any]] = []
    for i, (prompt_id, s, c) in enumerate(compared):
        if flags[i]:
            continue
        example: dict[str, Any] = {
            "prompt_id": prompt_id,
            "stable": s[:_SNIPPET],
            "canary": c[:_SNIPPET],
        }
        if scores is not None:
            example["similarity"] = round(scores[i], 4)
        examples.append(example)
        if len(examples) >= _EXAMPLES:
            break
    summary = {
        "n": len(flags),
        "exact": sum(exact) / len(exact) if exact else None,
        "similarity": sum(similar) / len(similar) if similar else None,
        "method": "exact" if scores is None else f"embedding cosine ≥ {threshold:g}",
        "value": interval.value,
        "ci": interval.interval,
        "similarity_min": min(scores) if scores else None,
        "disagreements": examples,
    }
    return flags, summary


def _kind(record: Record) -> str:
    """A failed request's class: its ``error_kind`` when no answer came (``connect``,
    ``timeout``, ``protocol``), ``HTTP 500`` for an error status, and for a 2xx answer that
    is the server's error the head of the client's words (``stream cut short``)."""
    kind = record.get("error_kind")
    if kind is not None and kind != "server":
        return str(kind)
    status = record.get("status") or 0
    if not 200 <= status < 300:
        return f"HTTP {status}"
    return str(record["error"]).split(":", 1)[0]


def error_summary(records: Sequence[Record], confidence: float) -> dict[str, Any]:
    """Error rates per side, their difference (canary − stable) with Newcombe's interval."""
    counts = error_counts(records)
    (x_s, n_s), (x_c, n_c) = counts["stable"], counts["canary"]
    diff = stats.newcombe_difference(x_c, n_c, x_s, n_s, confidence)
    kinds: dict[str, dict[str, int]] = {side: {} for side in SIDES}
    for record in records:
        if not metrics.is_ok(record):
            kind = _kind(record)
            kinds[record["side"]][kind] = kinds[record["side"]].get(kind, 0) + 1
    return {
        "stable": {"errors": x_s, "sent": n_s, "rate": x_s / n_s if n_s else None},
        "canary": {"errors": x_c, "sent": n_c, "rate": x_c / n_c if n_c else None},
        "difference": diff.value,
        "ci": diff.interval,
        "kinds": kinds,
    }


def method_notes(paired: bool, seed: int, resamples: int, agreement_method: str) -> dict[str, str]:
    """How each number was obtained, in words, for the report."""
    order = (
        f"every prompt to both sides; pairs in random order (seed {seed}), the side sent first"
        " chosen at random per pair"
        if paired
        else f"one stream split between the sides at random (seed {seed})"
    )
    ratio = "paired" if paired else "unpaired"
    return {
        "order": order,
        "agreement": f"{agreement_method}; Wilson score interval; exact binomial tests against"
        " the threshold",
        "latency": f"ratio = canary p50 / stable p50, {ratio} percentile bootstrap"
        f" ({resamples} resamples); shift = Hodges–Lehmann"
        + (" (paired, Wilcoxon-inverted interval)" if paired else " (Mann–Whitney-inverted)")
        + "; wilcoxon_p: signed-rank test on paired differences, two-sided;"
        " mannwhitney_p: Mann–Whitney U, two-sided; itl_ms is each request's mean gap",
        "errors": "difference of error rates (canary − stable), Newcombe hybrid score interval;"
        " Farrington–Manning score test against the allowed increase",
        "decision": "PASS when the whole interval meets the threshold, FAIL when the whole"
        " interval misses it, INCONCLUSIVE when it straddles it or n < min_samples",
    }
