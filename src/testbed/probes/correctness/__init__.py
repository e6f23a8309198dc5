"""The correctness probe: golden cases against one deployment, and the cross-config diff.

``run(ctx)`` loads the case files, applies the skip rules to the treatment's deployment,
runs every case (unary, then its streaming twin; an embeddings case once, unary:
:mod:`.embedding_runner`) concurrently in a shuffled order with a recorded seed, writes one
record per result as it arrives, and returns the summary and verdict: FAIL if any case
failed, else ERROR if any case got no answer, else PASS.

Public API::

    run(ctx) -> ProbeOutcome                    # the pipeline's entry point
    summarize(results, seed) -> dict            # the summary of a list of Results
    differential(reference_records, other_records, near_tie_nats) -> list[Divergence]
    load_case_files(paths) -> list[CaseFile]    # also for `testbed validate`
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testbed.clients import tgis
from testbed.clients.endpoint import Endpoint
from testbed.clients.http import ConnectionPool, pool_for
from testbed.config.correctness import CorrectnessProbe
from testbed.core.errors import InfrastructureError, InputError
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness.cases import CaseFile, load_case_files
from testbed.probes.correctness.differential import Divergence, differential
from testbed.probes.correctness.embedding import Embedder
from testbed.probes.correctness.embedding_runner import EmbeddingRunner, plan_embedding_items
from testbed.probes.correctness.evaluators import Settings
from testbed.probes.correctness.exchange import api_of
from testbed.probes.correctness.runner import UNCHECKED, Result, Runner, plan_items
from testbed.results.verdict import Status, Verdict

__all__ = [
    "CaseFile",
    "Divergence",
    "differential",
    "load_case_files",
    "run",
    "summarize",
]


async def run(ctx: ProbeContext[CorrectnessProbe]) -> ProbeOutcome:
    """Run the campaign's case files against the treatment's endpoint."""
    config = ctx.config
    seed = config.shuffle_seed if config.shuffle_seed is not None else ctx.seed
    try:
        files = load_case_files([ctx.base_dir / path for path in config.cases])
    except InputError as exc:
        return ProbeOutcome(
            {"cases": _counts([]), "seed": seed, "failures": []},
            Verdict(status=Status.ERROR, reason=f"case files: {exc}"),
        )
    endpoint = next(iter(ctx.endpoints.values()))
    served: list[str] = [
        p for p in endpoint.protocols if p != "tgis" or endpoint.grpc_target is not None
    ]
    items, skipped = plan_items(files, config, ctx.deployment, served)
    vector_items, vector_skipped = plan_embedding_items(files, ctx.deployment, served)
    skipped += vector_skipped
    results: list[Result] = []

    def emit(result: Result) -> None:
        ctx.records.write(result.record())
        results.append(result)
        done = sum(1 for r in results if r.status != Status.SKIPPED)
        bad = sum(1 for r in results if r.status in (Status.FAIL, Status.ERROR))
        ctx.progress(f"{done} results, {bad} not passed")

    ctx.records.write(
        {
            "kind": "plan",
            "seed": seed,
            "cases": [f"{i.case.name}/{i.protocol}" for i in items]
            + [f"{i.case.name}/openai" for i in vector_items],
        }
    )
    for result in skipped:
        emit(result)
    pool = pool_for(endpoint, max_connections=config.concurrency * 2)
    over_grpc = any(api_of(i.protocol, i.case.request).grpc for i in items)
    grpc = tgis.pool_for(endpoint) if over_grpc else None
    try:
        model = await _model(endpoint, pool, served)
        settings = Settings(
            tolerance=config.tolerance,
            near_tie_nats=config.near_tie_nats,
            similarity_threshold=config.embedding.threshold,
            embedder=Embedder(config.embedding.model),
        )
        extra = config.differential_logprobs if config.reference is not None else 0
        runner = Runner(config, pool, model, settings, emit, extra or None, grpc)
        await runner.run(items, seed)
        await EmbeddingRunner(config, pool, model, emit).run(vector_items, seed)
    finally:
        await pool.aclose()
        if grpc is not None:
            await grpc.aclose()
    summary = summarize(results, seed)
    summary["deployment"] = ctx.deployment.get("name")
    summary["model"] = model
    return ProbeOutcome(summary, verdict_of(summary))


async def _model(endpoint: Endpoint, pool: ConnectionPool, served: list[str]) -> str:
    """The model name requests carry: the endpoint's, or the first the server lists."""
    if endpoint.model or "openai" not in served:
        return endpoint.model
    from testbed.clients.openai import discover_model

    try:
        return await discover_model(pool) or ""
    except (InfrastructureError, TimeoutError):
        return ""  # the cases will meet the same failure, each with its own ERROR


def _counts(results: Sequence[Result]) -> dict[str, int]:
    def count(outcome: str) -> int:
        return sum(1 for r in results if r.outcome == outcome)

    return {
        "total": len(results),
        "passed": count(Status.PASS),
        "unchecked": count(UNCHECKED),
        "failed": count(Status.FAIL),
        "errored": count(Status.ERROR),
        "skipped": count(Status.SKIPPED),
    }


def summarize(results: Sequence[Result], seed: int) -> dict[str, Any]:
    """The probe's summary: counts, the shuffle seed, each failure with its first divergence,
    each error with its cause, each skip with its rule."""
    ordered = sorted(results, key=lambda r: r.id)
    failures = []
    for result in ordered:
        if result.status != Status.FAIL:
            continue
        for check in result.checks:
            if check.passed:
                continue
            failures.append(
                {
                    "case": result.id,
                    "evaluator": check.evaluator,
                    "detail": check.detail,
                    "expected": check.expected,
                    "actual": check.actual,
                    "first_divergence": check.divergence.to_json() if check.divergence else None,
                }
            )
    return {
        "cases": _counts(results),
        "seed": seed,
        "failures": failures,
        "errors": [{"case": r.id, "reason": r.reason} for r in ordered if r.status == Status.ERROR],
        "skipped": [
            {"case": r.id, "reason": r.reason} for r in ordered if r.status == Status.SKIPPED
        ],
        "unchecked": [
            {"case": r.id, "reason": r.reason} for r in ordered if r.outcome == UNCHECKED
        ],
    }


def verdict_of(summary: dict[str, Any]) -> Verdict:
    """FAIL if any case failed, else ERROR if any got no answer, else SKIPPED if none ran,
    else INCONCLUSIVE if none was compared (every one ran ``skip_check``), else PASS."""
    counts = summary["cases"]
    evidence = {"cases": counts, "seed": summary["seed"]}
    if counts["failed"]:
        first = summary["failures"][0]
        reason = f"{counts['failed']} of {counts['total']} failed; first: {first['case']}"
        return Verdict(status=Status.FAIL, reason=reason, evidence=evidence)
    if counts["errored"]:
        first = summary["errors"][0]
        reason = f"{counts['errored']} got no answer; first: {first['case']}: {first['reason']}"
        return Verdict(status=Status.ERROR, reason=reason, evidence=evidence)
    if counts["total"] == counts["skipped"]:
        return Verdict(status=Status.SKIPPED, reason="every case was skipped", evidence=evidence)
    unchecked = counts.get("unchecked", 0)
    if not counts["passed"]:
        reason = f"no case was compared: {unchecked} ran unchecked (skip_check)"
        return Verdict(status=Status.INCONCLUSIVE, reason=reason, evidence=evidence)
    reason = f"{counts['passed']} passed" + (f", {unchecked} unchecked" if unchecked else "")
    if counts["skipped"]:  # a partial skip is said in the verdict, not only in the counts
        reason += f", {counts['skipped']} skipped"
    return Verdict(status=Status.PASS, reason=reason, evidence=evidence)
