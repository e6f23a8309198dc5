"""The ``scale:`` probe of a campaign: submit, sample while submitting, wait, plot, judge.

The submitter and the sampler run side by side in threads (the official client is
synchronous), owned by this coroutine: a Ctrl-C or a timeout stops both, keeps what they
recorded, deletes the submitted objects (``cleanup``) and still writes the table. The
treatment directory is the scale test's output directory, so ``testbed scale plot -o DIR``
works on it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.clients.kube.connection import ConnectionSpec
from testbed.clients.kube.rest import Kube
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.scale import ScaleProbe
from testbed.core.errors import InfrastructureError, InputError, TestbedError
from testbed.core.ids import short_hash
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.scale import analysis, submitted, times
from testbed.probes.scale.sample import Sampler, Stats
from testbed.probes.scale.sampled import Facts
from testbed.probes.scale.submit import (
    Outcome,
    Submitter,
    delete_all,
    template_for,
)

DEFAULT_NAMESPACE = "testbed-scale"


def connection(cluster: KubernetesSettings | None) -> Kube:
    """The cluster of a campaign's backend section (InputError when it names none)."""
    if cluster is None:
        raise InputError("the scale probe needs a cluster: set `backend: kubernetes`")
    return Kube.connect(ConnectionSpec.from_backend(cluster))


def finished(out_dir: Path, wait_for: str, submitting: threading.Event) -> Callable[[Facts], bool]:
    """True once submission is over and every workload reached ``wait_for`` or failed."""

    def check(facts: Facts) -> bool:
        if submitting.is_set():
            return False
        table = times.rows(submitted.load(out_dir), facts)
        return all(r.error or r.failed_ms is not None or wait_for in r.stages for r in table)

    return check


async def run(ctx: ProbeContext[ScaleProbe]) -> ProbeOutcome:
    config = ctx.config
    kube = await asyncio.to_thread(connection, ctx.cluster)
    given = ctx.cluster.namespace if ctx.cluster is not None else None
    namespace = config.namespace or given or DEFAULT_NAMESPACE
    template = template_for(config, ctx.base_dir)
    prefix = f"tb-{short_hash(str(ctx.out_dir.resolve()), 8)}"
    stop_submit, stop_sample, submitting = threading.Event(), threading.Event(), threading.Event()
    submitter = await asyncio.to_thread(
        Submitter.open,
        kube,
        ctx.out_dir,
        config,
        template,
        namespace,
        prefix,
        stop_submit,
        ctx.progress,
    )
    sampler = Sampler(kube, ctx.out_dir, submitter.header)
    submitting.set()
    sampling = asyncio.ensure_future(
        asyncio.to_thread(
            sampler.run, True, stop_sample, finished(ctx.out_dir, config.wait_for, submitting)
        )
    )
    submitting_task = asyncio.ensure_future(asyncio.to_thread(submitter.run))
    finished_ok = False
    try:
        outcome = await asyncio.shield(submitting_task)
        submitting.clear()
        ctx.progress(
            f"submitted {outcome.created + outcome.existed}; waiting for {config.wait_for}"
        )
        try:
            async with asyncio.timeout(config.timeout_s):
                stats = await asyncio.shield(sampling)
        except TimeoutError:
            stop_sample.set()
            stats = await sampling
        finished_ok = True
    finally:
        stop_submit.set()
        stop_sample.set()
        # the submitter thread must be over before deleting, or it could create after us
        await asyncio.gather(submitting_task, sampling, return_exceptions=True)
        if config.cleanup:
            _, failed = await asyncio.to_thread(delete_all, kube, submitted.load(ctx.out_dir))
            for line in failed[:20]:
                ctx.progress(f"cleanup: could not delete {line}")
            if submitter.made_namespace:  # ours alone: nothing else lives in it
                await asyncio.to_thread(kube.delete, "Namespace", namespace)
        if not finished_ok:  # interrupted or failed: the table of what was seen is still kept
            with contextlib.suppress(TestbedError, OSError):
                analysis.analyze(ctx.out_dir, draw=False)
    return _judge(ctx, config, outcome, stats)


def _judge(
    ctx: ProbeContext[ScaleProbe], config: ScaleProbe, outcome: Outcome, stats: Stats
) -> ProbeOutcome:
    """The plotter's step on the treatment directory, the records, the summary, the verdict."""
    result = analysis.analyze(
        ctx.out_dir,
        plot=config.plot,
        head=config.head,
        tail=config.tail,
        skip_errors=config.skip_errors,
        thresholds=config.thresholds,
        max_errors=config.max_errors,
    )
    for row in result.table:
        ctx.records.write(_record(row))
    if outcome.created + outcome.existed == 0 and outcome.errors:
        raise InfrastructureError(f"no workload could be submitted: {result.table[0].error}")
    summary = result.summary()
    summary["scale"]["submit"] = {
        "created": outcome.created,
        "existed": outcome.existed,
        "errors": outcome.errors,
        "rate_per_s": round(outcome.rate, 2),
    }
    summary["scale"]["sampler"] = {
        "watch_events": stats.live,
        "listed": stats.listed,
        "cpu_per_event_ms": round(stats.cpu_per_event_ms, 4),
    }
    assert result.verdict is not None
    return ProbeOutcome(summary=summary, verdict=result.verdict)


def _record(row: times.Row) -> dict[str, Any]:
    """One workload's lifecycle (epoch ms per stage and the source of each)."""
    return {
        "workload": row.name,
        "index": row.index,
        "stages_ms": row.stages,
        "sources": row.sources,
        "extra_ms": row.extra,
        "pods": row.pods,
        "error": row.error,
    }
