"""The load probe: prepare prompts, run the profile's stages, summarise, judge, plot.

``run(ctx)`` follows the probe contract of :mod:`testbed.probes.base`: records go to
``ctx.records`` as requests finish (through the load children's part files when
``processes`` > 1), plots go to ``ctx.out_dir``, and an unreachable server raises
:class:`~testbed.core.errors.InfrastructureError`.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from testbed.clients import openai
from testbed.clients.apis import APIS
from testbed.clients.endpoint import Endpoint
from testbed.clients.http import ConnectionPool, HttpClientError
from testbed.clients.readpath import compiled
from testbed.clients.tgis import TgisPool
from testbed.config.load import LoadProbe
from testbed.core.clock import anchor, monotonic_ns
from testbed.core.errors import InfrastructureError, InputError
from testbed.core.secrets import resolve
from testbed.probes import server_metrics, shaping
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.load import (
    dataset,
    embeddings,
    footprint,
    mix,
    multiprocess,
    profiles,
    progress,
)
from testbed.probes.load.loops import loop_name
from testbed.probes.load.recording import BackgroundWriter
from testbed.probes.load.runner import Options, Stage, StageRun
from testbed.probes.load.summary import probe_summary, stage_summary, verdict_of
from testbed.probes.load.tokens import TokenCounter, counter_for
from testbed.probes.load.workload import (
    GeneratorFactory,
    first_stages,
    generator_factory,
    items_of,
    session_spec,
)
from testbed.probes.server_metrics.summary import load_client_tokens
from testbed.results import benchmark_report


@dataclass
class Setup:
    """Everything the stages share, built once."""

    endpoint: Endpoint
    pool: ConnectionPool  # HTTP: model discovery, /tokenize, and the requests of HTTP apis
    model: str
    counter: TokenCounter
    items: list[dataset.Item]
    payloads: list[bytes]
    options: Options
    sender: ConnectionPool | TgisPool  # what the requests go through (gRPC for tgis)
    #: the values behind the headers' and the API key's references: masked in records
    secrets: list[str]


async def prepare(endpoint: Endpoint, config: LoadProbe, seed: int, base_dir: Path) -> Setup:
    """Discover the model and tokenizer, build and encode the prompts (a dataset file's
    relative path starts at ``base_dir``)."""
    footprint.raise_open_files(footprint.open_files_needed(config))
    api = APIS[config.api]
    connections = max(config.max_in_flight, config.concurrency) + 8
    pool = shaping.http_pool(endpoint, config.headers, max_connections=connections)
    try:
        model = config.model or endpoint.model
        if config.models:
            model = config.models[0].name  # the mix names every request's model
        if not model and api.lists_models:
            model = await openai.find_model(
                pool, min(10.0, config.timeout_s), "name the model (--model, or model:)"
            )
        counter = await counter_for(endpoint.tokenizer, pool)
    except HttpClientError as exc:
        await pool.aclose()
        raise InfrastructureError(f"server at {endpoint.base_url}: {exc}") from exc
    except InputError as exc:
        await pool.aclose()
        raise InputError(f"{endpoint.base_url}: {exc}") from None
    try:
        items = _items(config, counter, seed, base_dir, model)
        payloads = dataset.encode(
            items,
            pool,
            api=api,
            model=model,
            stream=config.stream,
            ignore_eos=config.ignore_eos,
            extra_body=config.extra_body,
        )
    except InputError:
        await pool.aclose()
        raise
    options = Options(
        api=config.api,
        stream=config.stream,
        timeout_s=config.timeout_s,
        max_in_flight=config.max_in_flight,
        keep_text=config.keep_text,
        # unique per run, so that a server's log of many runs joins each record once
        request_ids=f"tb-{secrets.token_hex(4)}",
    )
    try:
        sender = shaping.grpc_pool(endpoint, config.headers) if api.grpc else pool
    except InputError:
        await pool.aclose()
        raise
    refs = [config.headers, *(item.headers for item in items if item.headers)]
    revealed = shaping.secret_values([*refs, {"key": endpoint.api_key or ""}])
    return Setup(endpoint, pool, model, counter, items, payloads, options, sender, revealed)


def _items(
    config: LoadProbe, counter: TokenCounter, seed: int, base_dir: Path, model: str
) -> list[dataset.Item]:
    """The prompts, each with the model it goes to (its row's, the mix's, or ``model``)."""
    api = APIS[config.api]
    items = items_of(config.dataset, counter, seed, base_dir)
    if api.embeds:  # the prompts, in batches: each one request's inputs
        items = embeddings.batched(items, config.embeddings, seed)
    if not api.names_model and any(item.model for item in items):
        raise InputError(
            f"a dataset row names a model, but api {api.name} serves one and names none"
        )
    return mix.assign(items, config.models, model)


async def run(ctx: ProbeContext[LoadProbe]) -> ProbeOutcome:
    """Run the load probe of ``ctx.config`` against the (first) endpoint."""
    config = ctx.config
    if not ctx.endpoints:
        raise InputError("the load probe needs an endpoint")
    name, endpoint = next(iter(ctx.endpoints.items()))
    seed = config.seed if config.seed is not None else ctx.seed
    setup = await prepare(endpoint, config, seed, ctx.base_dir)
    clock = anchor()  # the records' monotonic stamps to wall time (docs/results.md, Records)
    stage_records: dict[str, list[dict[str, Any]]] = {}
    summaries: list[dict[str, Any]] = []
    try:
        async with server_metrics.sampling(
            ctx.out_dir, {name: endpoint}, config.server_metrics
        ) as session:
            stages = first_stages(config, setup.items, ctx.base_dir)
            total = progress.stage_count(config)
            while stages:
                stage = stages.pop(0)
                stage_seed = seed + len(summaries)
                where = progress.StageProgress(stage, len(summaries) + 1, total, monotonic_ns())
                async with progress.reporting(ctx.progress, where, lambda: ctx.records.count):
                    run_, records = await execute_stage(stage, setup, config, ctx, stage_seed)
                _raise_if_down(records, endpoint)
                stage_records[stage.name] = records
                summaries.append(stage_summary(stage, run_, records, config))
                if config.profile == "sweep" and len(summaries) == 2:
                    rates = profiles.sweep_rates(
                        summaries[0]["throughput"]["requests_per_s"],
                        summaries[1]["throughput"]["requests_per_s"],
                        config.sweep.rates,
                    )
                    stages = profiles.rate_stages(config, rates)
    finally:
        await setup.pool.aclose()
        if setup.sender is not setup.pool:
            await setup.sender.aclose()
    summary = probe_summary(summaries, config)
    summary["setup"] = {
        "url": endpoint.base_url,
        "model": setup.model,
        "api": config.api,
        "stream": config.stream and APIS[config.api].streams,  # embeddings: one body, always
        "tokenizer": setup.counter.name,
        "token_counts_exact": setup.counter.exact,
        "prompts": len(setup.items),
        "loop": loop_name() if config.processes == 1 else "uvloop/asyncio per process",
        # the compiled per-read path, or Python alone (installed without a C compiler)
        "read_path": "python" if compiled is None else "compiled",
        "seed": seed,
        "request_ids": setup.options.request_ids,
        "clock": clock,
    }
    summary["plots"] = _plots(ctx, stage_records, summaries) if config.plots else []
    window = summary.get("window") or {}
    summary["server_metrics"] = server_metrics.summary_of(
        session,
        {
            name: load_client_tokens(
                (r for rs in stage_records.values() for r in rs), exact=setup.counter.exact
            )
        },
        (window["start_ns"], window["end_ns"]) if "start_ns" in window else None,
    )
    every = [r for rs in stage_records.values() for r in rs]
    config_json = config.model_dump(mode="json")  # the llm-d Benchmark Report, per stage
    summary["benchmark_reports"] = benchmark_report.write_reports(
        ctx.out_dir, summary, every, config_json
    )
    return ProbeOutcome(summary=summary, verdict=verdict_of(summaries, config))


async def execute_stage(
    stage: Stage, setup: Setup, config: LoadProbe, ctx: ProbeContext[LoadProbe], seed: int
) -> tuple[StageRun, list[dict[str, Any]]]:
    if config.processes == 1:
        records: list[dict[str, Any]] = []

        def to_file(record: dict[str, Any]) -> None:  # in the writer's thread, off the loop
            ctx.records.write_line(orjson.dumps(record).decode(), record)

        with BackgroundWriter(to_file) as to_disk:

            def write(record: dict[str, Any]) -> None:
                to_disk(record)
                records.append(record)

            generator = _generator(config, setup, ctx.base_dir, seed)(
                setup.sender,
                setup.items,
                setup.payloads,
                setup.counter,
                write,
                setup.options,
                secrets=setup.secrets,
            )
            run_ = await generator.run(stage, seed=seed)
        return run_, records
    options = asdict(setup.options)
    del options["proc"], options["procs"]
    base = {
        "base_url": setup.endpoint.base_url,
        "grpc_target": setup.endpoint.grpc_target,
        "tls": asdict(setup.endpoint.tls),
        "model": setup.model,
        "api": config.api,
        "stream": config.stream,
        "ignore_eos": config.ignore_eos,
        "extra_body": config.extra_body,
        "headers": config.headers,  # ${env:NAME} references: the child reads its environment
        "counter": setup.counter.spec(),
        "items": [item.to_json() for item in setup.items],
        "sessions": session_spec(config, setup.counter, seed, ctx.base_dir),
        "options": options,
    }
    key = resolve(setup.endpoint.api_key) if setup.endpoint.api_key else None
    run_, merged = await multiprocess.run_stage(
        base,
        stage.to_json(),
        processes=config.processes,
        seed=seed,
        workdir=ctx.out_dir,
        api_key=key,
        sink=ctx.records.write,
    )
    return run_, merged


def _generator(config: LoadProbe, setup: Setup, base_dir: Path, seed: int) -> GeneratorFactory:
    """The generator of this load's dataset: prompts, or sessions (built with ``seed``)."""
    return generator_factory(
        session_spec(config, setup.counter, seed, base_dir),
        setup.pool,
        api=config.api,
        model=setup.model,
        stream=config.stream,
        ignore_eos=config.ignore_eos,
        extra_body=config.extra_body,
    )


def _raise_if_down(records: list[dict[str, Any]], endpoint: Endpoint) -> None:
    """Every request failed to connect: the server is down, which is not the product's
    fault but the infrastructure's (ERROR, not FAIL). Decided on the failures' kind (the
    client's exception type), never on their message."""
    if records and all(r.get("error_kind") == "connect" for r in records):
        raise InfrastructureError(
            f"every request to {endpoint.base_url} failed to connect: {records[0]['error']}"
        )


def _plots(
    ctx: ProbeContext[LoadProbe],
    stage_records: dict[str, list[dict[str, Any]]],
    summaries: list[Any],
) -> list[str]:
    """Write the PNGs; a plotting failure is noted, never fatal."""
    try:
        from testbed.probes.load import model_plots, plots

        written = plots.write_all(ctx.out_dir, stage_records, summaries)
        return written + model_plots.write(ctx.out_dir, summaries)
    except Exception as exc:
        return [f"plots failed: {exc}"]
