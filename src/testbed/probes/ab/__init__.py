"""The A/B probe: the same prompts to a stable and a canary deployment, compared with
intervals and tests, judged PASS / FAIL / INCONCLUSIVE with the evidence.

``run(ctx)`` follows :mod:`testbed.probes.base`: ``ctx.endpoints`` maps the two deployment
names (``ctx.config.stable`` and ``.canary``) to endpoints; one record per request goes to
``ctx.records`` as it ends; the summary's ``ab`` key holds every number the verdict used.
Modules: :mod:`.prompts` (the prompt set), :mod:`.traffic` (order, pacing, records),
:mod:`.compare` (records → samples and summaries), :mod:`.stats` (the statistics),
:mod:`.verdict` (criteria → verdict).

The summary's ``ab`` part (read by the reports; latencies in ms, rates as fractions)::

    mode, stable, canary, seed, confidence
    n_pairs            pairs where both requests succeeded (None in split mode)
    agreement          n, exact, similarity, method, value (the one judged), ci [lo, hi],
                       similarity_min, disagreements [{prompt_id, stable, canary, similarity?}]
    latency.{ttft_ms,itl_ms,e2e_ms}
                       n, stable_p50, canary_p50, ratio, ci, shift_ms, shift_ci,
                       wilcoxon_p (paired only), mannwhitney_p, prob_canary_slower
    errors             stable/canary {errors, sent, rate}, difference, ci, kinds
    criteria           [{name, metric, observed, interval, threshold, direction, n,
                         min_samples, test, p_meets, p_violates, p_value, status, reason}]
    method             how each number was obtained, in words
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from testbed.clients import openai
from testbed.clients.apis import APIS
from testbed.clients.endpoint import Endpoint
from testbed.clients.http import HttpClientError
from testbed.config.ab import AbProbe
from testbed.core.errors import InfrastructureError, InputError
from testbed.probes import server_metrics, shaping
from testbed.probes.ab import compare, prompts, traffic
from testbed.probes.ab.traffic import SIDES, AbRequest, Side, Target
from testbed.probes.ab.verdict import judge
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.correctness.embedding import Embedder
from testbed.probes.server_metrics.summary import ab_client_tokens
from testbed.results.files import write_atomic
from testbed.results.records import AbRecord

__all__ = ["Scorer", "run"]

#: Cosine similarity of two texts (the correctness probe's embedder fits).
Scorer = Callable[[str, str], Awaitable[float]]

PROMPTS_FILE = "ab-prompts.jsonl"


async def _target(side: Side, name: str, endpoint: Endpoint, config: AbProbe) -> Target:
    """A connection pool and the model name for one side (asked from the server if unset)."""
    api = APIS[config.api]
    if api.protocol not in endpoint.protocols:
        served = ", ".join(endpoint.protocols)
        instead = "completions" if "openai" in endpoint.protocols else f"one of {served}"
        raise InputError(
            f"deployment '{name}' does not speak {api.protocol.upper()} (it serves {served});"
            f" set ab.api to {instead}{' or serve tgis (params.protocols)' if api.grpc else ''}"
        )
    connections = 1024 if config.rate is not None else config.concurrency + 4
    model = endpoint.model
    if api.grpc:  # TGIS ignores the model id: nothing to discover
        channel = shaping.grpc_pool(endpoint, config.headers)
        return Target(side, name, channel, model, config.api, config.max_tokens,
                      config.temperature, config.timeout_s,
                      extra_body=config.extra_body)  # fmt: skip
    pool = shaping.http_pool(endpoint, config.headers, max_connections=connections)
    if not model and api.lists_models:
        try:
            model = await openai.find_model(pool, config.timeout_s, "name its model (model:)")
        except HttpClientError as exc:
            await pool.aclose()
            raise InfrastructureError(
                f"{side} deployment '{name}' at {endpoint.base_url}: {exc}"
            ) from exc
        except InputError as exc:
            await pool.aclose()
            raise InputError(f"{side} deployment '{name}' at {endpoint.base_url}: {exc}") from None
    return Target(
        side,
        name,
        pool,
        model,
        config.api,
        config.max_tokens,
        config.temperature,
        config.timeout_s,
        extra_body=config.extra_body,
    )


def _order(config: AbProbe, prompt_set: Sequence[prompts.Prompt], seed: int) -> list[AbRequest]:
    rng = random.Random(seed)
    if config.mode == "paired":
        return traffic.paired_order(prompt_set, config.requests, rng)
    return traffic.split_order(prompt_set, config.requests, config.split, rng)


def _check_reached(records: Sequence[Mapping[str, Any]], targets: Mapping[Side, Target]) -> None:
    """ERROR, not FAIL, when a side could not be reached at all: every request's failure
    is of kind ``connect`` (the client's exception type, never the message's words)."""
    for side in SIDES:
        mine = [r for r in records if r["side"] == side]
        if mine and all(r.get("error_kind") == "connect" for r in mine):
            target = targets[side]
            raise InfrastructureError(
                f"every request to the {side} deployment '{target.deployment}' failed to"
                f" connect; first error: {mine[0]['error']}"
            )


async def _scores(compared: Sequence[tuple[str, str, str]], scorer: Scorer) -> list[float]:
    """Similarity per compared output; equal texts score 1 without asking the model."""
    return [1.0 if s == c else await scorer(s, c) for _, s, c in compared]


def _embedding_scorer(model_dir: str | None) -> Scorer:
    """The correctness probe's embedder (the model loads on first use, in a thread)."""
    return Embedder(model_dir).similarity


async def _send_all(
    ctx: ProbeContext[AbProbe],
    config: AbProbe,
    order: Sequence[AbRequest],
    targets: Mapping[Side, Target],
) -> list[AbRecord]:
    records: list[AbRecord] = []

    async def send(request: AbRequest) -> None:
        record = await traffic.send_one(request, targets[request.side])
        ctx.records.write(record)
        records.append(record)
        if len(records) % 10 == 0 or len(records) == len(order):
            ctx.progress(f"ab {len(records)}/{len(order)} requests")

    await traffic.drive(
        order,
        send,
        concurrency=config.concurrency,
        rate=config.rate,
        per_side=config.mode == "paired",
    )
    return records


async def run(ctx: ProbeContext[AbProbe], *, scorer: Scorer | None = None) -> ProbeOutcome:
    """Run the A/B probe of ``ctx.config``. ``scorer`` replaces the embedding model when
    ``similarity: embedding`` (tests pass a cheap one)."""
    config = ctx.config
    names = {"stable": config.stable, "canary": config.canary}
    missing = [n for n in names.values() if n not in ctx.endpoints]
    if missing:
        raise InputError(
            f"the ab probe needs endpoints for {', '.join(missing)};"
            f" got {', '.join(ctx.endpoints) or 'none'}"
        )
    seed = config.seed if config.seed is not None else ctx.seed
    count = config.prompt_count or (
        config.requests if config.mode == "paired" else max(1, math.ceil(config.requests / 4))
    )
    prompt_set = prompts.build(config.prompts, count, seed, ctx.base_dir)
    write_atomic(
        ctx.out_dir / PROMPTS_FILE,
        "".join(json.dumps(_prompt_json(p)) + "\n" for p in prompt_set),
    )
    targets: dict[Side, Target] = {}
    try:
        for side in SIDES:
            targets[side] = await _target(side, names[side], ctx.endpoints[names[side]], config)
        scraped = {names[side]: ctx.endpoints[names[side]] for side in SIDES}
        async with server_metrics.sampling(ctx.out_dir, scraped, config.server_metrics) as session:
            records = await _send_all(ctx, config, _order(config, prompt_set, seed), targets)
    finally:
        for target in targets.values():
            await target.pool.aclose()
    _check_reached(records, targets)
    if config.similarity == "embedding" and scorer is None:
        scorer = _embedding_scorer(config.embedding_model)
    outcome = await analyse(records, config, seed, scorer)
    clients = {
        name: ab_client_tokens(r for r in records if r["deployment"] == name)
        for name in names.values()
    }
    outcome.summary["server_metrics"] = server_metrics.summary_of(session, clients, None)
    return outcome


def _prompt_json(prompt: prompts.Prompt) -> dict[str, Any]:
    out: dict[str, Any] = {"id": prompt.id}
    if prompt.text is not None:
        out["prompt"] = prompt.text
    if prompt.messages is not None:
        out["messages"] = list(prompt.messages)
    if prompt.max_tokens is not None:
        out["max_tokens"] = prompt.max_tokens
    return out


async def analyse(
    records: Sequence[Mapping[str, Any]], config: AbProbe, seed: int, scorer: Scorer | None
) -> ProbeOutcome:
    """The summary and verdict of a finished probe, from its records alone."""
    paired = config.mode == "paired"
    criteria = config.criteria
    compared = compare.compared_outputs(records, paired)
    scores = (
        await _scores(compared, scorer) if config.similarity == "embedding" and scorer else None
    )
    samples = compare.Samples(paired=paired)
    samples.latency = compare.latency_samples(records, paired)
    samples.errors = compare.error_counts(records)
    samples.agree, agreement = compare.agreement_summary(
        compared, scores, config.similarity_threshold, criteria.confidence
    )
    ab: dict[str, Any] = {
        "mode": config.mode,
        "stable": config.stable,
        "canary": config.canary,
        "seed": seed,
        "n_pairs": len(compare.complete_pairs(records)) if paired else None,
        "agreement": agreement,
        "latency": compare.latency_summary(
            samples, criteria.confidence, config.bootstrap_resamples, seed
        ),
        "errors": compare.error_summary(records, criteria.confidence),
        "confidence": criteria.confidence,
        "method": compare.method_notes(
            paired, seed, config.bootstrap_resamples, agreement["method"]
        ),
    }
    ab["criteria"], verdict = judge(samples, ab, criteria)
    return ProbeOutcome(summary={"ab": ab}, verdict=verdict)
