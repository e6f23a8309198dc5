"""From records and stage runs to the summary.json of a load treatment, and its verdict.

summary.json (a stage, or the headline stage of a sweep) has ``ttft_ms``, ``itl_ms``,
``tpot_ms``, ``e2e_ms`` (each ``p50 p90 p95 p99 p999 mean std n``), ``throughput``
(``requests_per_s``, ``output_tokens_per_s``, ``goodput_requests_per_s``), ``harness``
(``schedule_lag_ms`` p50/p99, ``requested_rate``, ``achieved_rate``, ``cpu_ms_per_request``
…), ``requests`` (counts: ``asked``, the stage's request count or null, ``total`` that ran
…), ``window`` and ``cut_short`` (why fewer than ``asked`` ran, or null). A sweep adds
``stages`` and ``max_rate_meeting_slo``. A load of sessions adds ``by_turn`` and
``sessions`` (:mod:`testbed.probes.load.turns`). A load over several models (``models:``, or a
dataset whose rows name them) adds ``models``: per model name, the same latency and
throughput fields and its request counts (top errors included), from the same window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from testbed.clients.apis import APIS
from testbed.config.load import LoadProbe
from testbed.probes.load import embeddings
from testbed.probes.load.runner import Stage, StageRun
from testbed.probes.load.selfcheck import check
from testbed.probes.load.turns import session_figures
from testbed.results import metrics
from testbed.results.metrics import Record
from testbed.results.verdict import Status, Verdict

#: An error's first characters, its key in ``top_errors``: enough for a refusal's whole
#: sentence ("HTTP 400: the server refused the request: <vLLM's message> (type, param…)").
ERROR_KEY = 240


def stage_summary(
    stage: Stage, run: StageRun, records: Sequence[Record], config: LoadProbe
) -> dict[str, Any]:
    """The summary of one stage from its records (pure but for the harness facts in run)."""
    win = metrics.window(run.t_start_ns, run.t_stop_ns, stage.warmup_s, stage.cooldown_s)
    population = metrics.in_window(records, win)
    slo = config.slo.model_dump() if config.slo else {}
    total = len(records)
    ok = sum(1 for r in records if metrics.is_ok(r))
    errors = Counter(str(r["error"])[:ERROR_KEY] for r in records if not metrics.is_ok(r))
    self_check = check(run, records, win, config.selfcheck)
    summary: dict[str, Any] = {
        "stage": stage.name,
        "load": {
            "concurrency": stage.concurrency,
            "rate": stage.arrivals.rate if stage.arrivals else None,
            "arrival": stage.arrivals.arrival if stage.arrivals else None,
        },
        **metrics.latency(population),
        "throughput": {
            **metrics.throughput(records, win),
            "goodput_requests_per_s": metrics.goodput(records, win, slo) if slo else None,
        },
        "harness": self_check.harness,
        "requests": {
            "asked": stage.max_requests,
            "total": total,
            "ok": ok,
            "errors": total - ok,
            "server_errors": sum(1 for r in records if r.get("error_by") == "server"),
            "in_window": len(population),
            "success_ratio": ok / total if total else 0.0,
            "token_mismatches": sum(1 for r in records if r.get("token_mismatch")),
            "top_errors": dict(errors.most_common(3)),
        },
        "window": {"start_ns": win.start_ns, "end_ns": win.end_ns, "seconds": win.seconds},
        "selfcheck": {"ok": self_check.ok, "problems": self_check.problems},
        "cut_short": cut_short(stage, total),
        "notes": self_check.notes,
    }
    if slo:
        summary["slo_violations"] = metrics.slo_violations(
            summary, slo, summary["requests"]["success_ratio"]
        )
    sessions = session_figures(records, win)
    if sessions is not None:  # a multi-turn load: figures per turn index and per session
        summary.update(sessions)
    if APIS[config.api].embeds:  # inputs and their tokens per second, batch sizes
        summary["embeddings"] = embeddings.figures(records, win)
    by_model = per_model(records, win, slo, several=config.models is not None)
    if by_model is not None:
        summary["models"] = by_model
    return summary


def per_model(
    records: Sequence[Record], win: metrics.Window, slo: dict[str, Any], *, several: bool
) -> dict[str, Any] | None:
    """Each model's figures (in order of first appearance), or None when every record went
    to one model and no mix was asked for."""
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(str(record.get("model")), []).append(record)
    if len(groups) < 2 and not several:
        return None
    out = {}
    for name, group in groups.items():
        ok = sum(1 for r in group if metrics.is_ok(r))
        errors = Counter(str(r["error"])[:ERROR_KEY] for r in group if not metrics.is_ok(r))
        out[name] = {
            **metrics.latency(metrics.in_window(group, win)),
            "throughput": {
                **metrics.throughput(group, win),
                "goodput_requests_per_s": metrics.goodput(group, win, slo) if slo else None,
            },
            "requests": {
                "total": len(group),
                "ok": ok,
                "errors": len(group) - ok,
                "success_ratio": ok / len(group),
                "top_errors": dict(errors.most_common(3)),
            },
        }
    return out


def cut_short(stage: Stage, ran: int) -> str | None:
    """Why a stage asked for a request count ran fewer (its duration ended it first), or
    None: a count is what the user asked to measure, so fewer is never silent."""
    if stage.max_requests is None or ran >= stage.max_requests:
        return None
    return (
        f"{ran} of {stage.max_requests} requests ran: duration_s ({stage.duration_s:g} s)"
        " ended the stage first — raise duration_s, or leave it unset to run every request"
    )


def verdict_of(stages: list[dict[str, Any]], config: LoadProbe) -> Verdict:
    """PASS / FAIL (an SLO missed; without SLOs, any failed request) / INCONCLUSIVE (the
    harness or the data cannot tell).

    For a sweep, the SLOs judge the lightest stage (synchronous) and the evidence carries
    the highest rate meeting them; the saturation stage is allowed to overload the harness.
    """
    judged = stages[:1] if config.profile == "sweep" else stages
    checked = [s for s in stages if s["stage"] != "saturation"]
    # fewer requests than asked is short in every stage, the saturation stage's too
    short = [f"{s['stage']}: {s['cut_short']}" for s in stages if s.get("cut_short")]
    problems = [f"{s['stage']}: {p}" for s in checked for p in s["selfcheck"]["problems"]]
    evidence: dict[str, Any] = {
        "method": "steady-state window percentiles vs SLO bounds; harness self-check",
        "slo": config.slo.model_dump() if config.slo else None,
    }
    if config.profile == "sweep" and config.slo:
        evidence["max_rate_meeting_slo"] = metrics.max_rate_meeting_slo(
            stages, config.slo.model_dump()
        )
    failed_all = [s for s in judged if s["requests"]["total"] and not s["requests"]["ok"]]
    if failed_all:  # the server answered, wrongly, every time: the product is wrong
        return Verdict(
            status=Status.FAIL,
            reason="; ".join(
                f"{s['stage']}: every one of {s['requests']['total']} requests failed"
                f" ({', '.join(s['requests']['top_errors'])})"
                for s in failed_all
            ),
            evidence=evidence,
        )
    answered = _answered_failures(judged, config)
    if answered:  # the server's own answers miss the bound whatever the harness did
        return Verdict(status=Status.FAIL, reason="; ".join(answered), evidence=evidence)
    if any(s["requests"]["in_window"] == 0 for s in judged):
        return Verdict(
            status=Status.INCONCLUSIVE,
            reason="; ".join([*short, "no successful request in the steady-state window"]),
            evidence=evidence,
        )
    if short or problems:
        return Verdict(
            status=Status.INCONCLUSIVE, reason="; ".join(short + problems), evidence=evidence
        )
    violations = [f"{s['stage']}: {v}" for s in judged for v in s.get("slo_violations", [])]
    if not config.slo:  # without SLOs every request must still succeed
        violations += [
            f"{s['stage']}: {s['requests']['errors']} of {s['requests']['total']} requests"
            f" failed ({', '.join(s['requests']['top_errors'])})"
            for s in judged
            if s["requests"]["errors"]
        ]
    if violations:
        return Verdict(status=Status.FAIL, reason="; ".join(violations), evidence=evidence)
    reason = "SLOs met" if config.slo else "no SLOs set; harness self-check ok"
    return Verdict(status=Status.PASS, reason=reason, evidence=evidence)


def _answered_failures(judged: list[dict[str, Any]], config: LoadProbe) -> list[str]:
    """Failures the server answered itself (an HTTP error, an error event, no content), enough
    to miss the success bound even if every client-side failure (timeout, connection) were
    the harness's fault. Without SLOs every request must succeed."""
    minimum = config.slo.min_success_ratio if config.slo else 1.0
    out = []
    for s in judged:
        total, answered = s["requests"]["total"], s["requests"].get("server_errors", 0)
        if not total or 1 - answered / total >= minimum:
            continue
        bound = f"success ratio {1 - answered / total:.4f} < {minimum:g}: " if config.slo else ""
        out.append(
            f"{s['stage']}: {bound}{answered} of {total} requests failed with the server's"
            f" answer ({', '.join(s['requests']['top_errors'])})"
        )
    return out


def probe_summary(stages: list[dict[str, Any]], config: LoadProbe) -> dict[str, Any]:
    """summary.json: the headline stage's fields at the top, every stage under ``stages``
    when there are several."""
    if len(stages) == 1:
        return {"profile": config.profile, **stages[0]}
    headline = _headline(stages, config)
    out = {"profile": config.profile, **headline, "stages": stages}
    if config.slo:
        out["max_rate_meeting_slo"] = metrics.max_rate_meeting_slo(stages, config.slo.model_dump())
    return out


def _headline(stages: list[dict[str, Any]], config: LoadProbe) -> dict[str, Any]:
    """A sweep's headline: the fastest stage meeting the SLOs, else the saturation stage."""
    if config.slo:
        slo = config.slo.model_dump()
        good = [
            s for s in stages if not metrics.slo_violations(s, slo, s["requests"]["success_ratio"])
        ]
        if good:
            return max(good, key=lambda s: s["throughput"]["requests_per_s"])
    named = {s["stage"]: s for s in stages}
    return named.get("saturation", stages[-1])
