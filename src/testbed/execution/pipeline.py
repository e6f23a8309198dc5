"""The run pipeline as named steps (TOPSAIL's phases): open the run directory, plan,
cleanup → prepare → test → cleanup, each skippable. ``--resume`` reopens a run directory
and runs only what its ledger says is unfinished or failed for infrastructure reasons."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from testbed import __version__
from testbed.backends import backend_class
from testbed.backends.base import Backend
from testbed.config.loader import LoadedCampaign, load_campaign
from testbed.config.server_kinds import kind_of, provisioned
from testbed.core.clock import wall_label
from testbed.core.errors import InfrastructureError, InputError, Interrupted
from testbed.core.ids import short_hash
from testbed.execution.grouping import WorkerSet, make_worker_sets
from testbed.execution.inputs import check_api_keys, check_files, check_footprint
from testbed.execution.remote_probes import check_shippable
from testbed.execution.run import Run, RunOptions
from testbed.execution.steps import check_steps
from testbed.execution.steps.session import StepSession
from testbed.execution.stopping import CutShort, StopRequests, cut_short_message
from testbed.execution.strategy import run_worker_sets
from testbed.execution.treatment import write_summary
from testbed.plan.expand import expand
from testbed.plan.model import Plan, Treatment
from testbed.results.ledger import Ledger
from testbed.results.machine import machine_info
from testbed.results.provenance import provenance, source_folder
from testbed.results.rundir import LEDGER, RESOLVED, RunDir
from testbed.results.verdict import Status, Verdict

PHASES = ("cleanup", "prepare", "test", "final_cleanup")


class NotStarted(InfrastructureError):
    """The run was refused before anything ran (a shared cluster's turn, ``--no-wait``)."""


@dataclass
class RunOutcome:
    run_dir: RunDir
    plan: Plan
    verdicts: dict[str, Verdict]
    ledger_states: dict[str, tuple[str, str | None, str | None, int]]
    cleanup_error: InfrastructureError | None = None  # the final cleanup failed (exit 3)


def check_inputs(loaded: LoadedCampaign) -> Plan:
    """Everything that can be checked before anything starts: the campaign, its plan, and
    the files it names. Raises CampaignError (exit 2) with file and line."""
    plan = expand(loaded)
    check_files(loaded, plan)
    check_shippable(loaded, plan)
    if not loaded.campaign.backend.remote_probes:  # a probe run elsewhere has limits of its own
        check_footprint(loaded, plan)
    check_steps(loaded)  # templates, named commands, toolbox scripts, keep
    return plan


def check_connection(loaded: LoadedCampaign, plan: Plan, options: RunOptions) -> None:
    """A cluster campaign's kubeconfig, context or ``${env:}`` token, and the ``${env:}``
    keys of the Secrets its workers need (S3, hub token), must be usable before a run
    directory exists (InputError, exit 2), as must the ``${env:}`` API keys of external
    deployments. Reads files and variables; sends nothing."""
    check_api_keys(loaded)
    deployments = [w.config for w in plan.workers.values() if kind_of(w.config).pod]
    backend = loaded.campaign.backend
    run_backend_class(loaded, options).preflight(backend, deployments)


def open_new(loaded: LoadedCampaign, options: RunOptions) -> tuple[RunDir, Plan]:
    """Step 1 of a new run: check and plan it, write the run directory's metadata."""
    plan = check_inputs(loaded)
    check_connection(loaded, plan, options)
    if options.only is not None:
        plan = plan.only(options.only)
    parent = options.runs_dir or Path(loaded.campaign.results.dir)
    run_dir = RunDir.create(parent, loaded.campaign.name, options.out)
    meta = {
        "run_id": run_dir.run_id,
        "campaign": loaded.campaign.name,
        "description": loaded.campaign.description,
        "campaign_file": loaded.file,
        "campaign_hash": short_hash(loaded.document, 16),
        "base_dir": str(loaded.base_dir.resolve()),
        "presets": loaded.presets,
        "sets": loaded.sets,
        "started": wall_label(),
        "testbed_version": __version__,
        "machine": machine_info(),
        "only": sorted(options.only) if options.only is not None else None,
        # the label and the commit under test: testbed history names them at a change point
        **provenance(source_folder(loaded.file, loaded.base_dir), options.label, options.commit),
    }
    run_dir.write_metadata(meta, loaded.document, plan.to_json())
    return run_dir, plan


def open_resume(path: Path) -> tuple[LoadedCampaign, RunDir, Plan]:
    """Reopen a run directory: its resolved campaign gives the very same plan."""
    run_dir = RunDir.existing(path)
    meta = run_dir.metadata()
    loaded = load_campaign(run_dir.path / RESOLVED)
    loaded.base_dir = Path(meta.get("base_dir", "."))
    loaded.file = str(meta.get("campaign_file", loaded.file))
    plan = expand(loaded)
    if meta.get("only") is not None:
        plan = plan.only(meta["only"])
    return loaded, run_dir, plan


async def execute(
    loaded: LoadedCampaign, run_dir: RunDir, plan: Plan, options: RunOptions
) -> RunOutcome:
    """Run the phases; on Ctrl-C or SIGTERM release everything and raise Interrupted."""
    skip = set(options.skip_phases) | {
        p for p in PHASES if not getattr(loaded.campaign.execution.phases, p)
    }
    unknown = skip - set(PHASES)
    if unknown:
        raise InputError(
            f"--skip-phase {', '.join(sorted(unknown))}: phases are {', '.join(PHASES)}"
        )
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    stops = StopRequests(task, options.observer)
    stops.install(loop)
    try:
        with Ledger(run_dir.path / LEDGER) as ledger:
            ledger.register(
                (t.id, t.dirname, "SKIPPED" if t.status == "skipped" else "", t.reason)
                for t in plan.treatments
            )
            backend = run_backend(loaded, run_dir, options)
            run = Run(loaded, plan, run_dir, options, ledger, frozenset(skip), stops, backend)
            return await _phases(run)
    except NotStarted:
        if options.fresh_dir:
            shutil.rmtree(run_dir.path, ignore_errors=True)
        raise
    except asyncio.CancelledError:
        if stops.received:
            raise Interrupted(
                f"{stops.name}: stopped; records so far are in {run_dir.path}; finish with"
                f" `testbed run --resume {run_dir.path}`"
            ) from None
        raise
    finally:
        stops.remove(loop)


async def _phases(run: Run) -> RunOutcome:
    """Take the cluster's turn (a shared cluster's Lease), then run the phases with it held."""

    def say(message: str) -> None:
        run.observer.phase("lease", message)

    async with contextlib.AsyncExitStack() as turn:
        try:
            await turn.enter_async_context(run.backend.exclusive(not run.options.no_wait, say))
        except InfrastructureError as exc:  # refused the cluster's turn: nothing ran
            gone = f"; {run.run_dir.path} was removed" if run.options.fresh_dir else ""
            raise NotStarted(f"{exc} — nothing ran{gone}") from exc
        return await _held(run)


async def _held(run: Run) -> RunOutcome:
    """The phases, with the cluster's turn held (a shared cluster's Lease)."""
    observer, backend, skip = run.observer, run.backend, run.skip
    # a probe Job's backend runs no steps: they run at the run's controller
    steps = StepSession.open(
        run.loaded, run.run_dir, backend, observer, set(skip), not backend.probe_job
    )
    if "cleanup" not in skip:
        observer.phase("cleanup")
        for line in await backend.cleanup_leftovers(run.run_dir.path):
            observer.phase("cleanup", line)
    todo = [t for t in run.plan.planned() if t.id in run.ledger.to_run()]
    used = {w for t in todo for w in t.workers}
    cleanup_error: InfrastructureError | None = None
    try:  # from prepare on, what was made is released whatever happens
        # a failing step stops the run: later phases are NOT RUN, the final cleanup runs
        ok = "cleanup" in skip or await steps.stage("cleanup")
        if ok and "prepare" not in skip:
            observer.phase("prepare")
            configs = [run.plan.workers[w].config for w in run.plan.workers if w in used]
            for line in await backend.prepare([c for c in configs if provisioned(c)]):
                observer.phase("prepare", line)
            ok = await steps.stage("prepare")
        if ok:
            todo = await _skip_infeasible(run, todo)
        if ok and "test" not in skip:
            await _test(run, steps, todo)
    finally:
        if run.execution.keep:
            observer.phase("final cleanup", kept_message(run.run_dir))
        elif "final_cleanup" not in skip:
            cleanup_error = await _final_cleanup(run, steps)
    return RunOutcome(
        run.run_dir, run.plan, run.runner.verdicts, run.ledger.states(), cleanup_error
    )


async def _test(run: Run, steps: StepSession, todo: list[Treatment]) -> None:
    """The test phase: its steps before the treatments, the treatments, its steps after."""
    if not await steps.stage("test"):
        return
    if todo:
        run.observer.phase("test", f"{len(todo)} treatment(s)")
        execution, backend, runner = run.execution, run.backend, run.runner
        worker_sets = make_worker_sets(run.plan, todo, execution.unroll)
        budget = run.options.cpu_budget or execution.cpu_budget or float(os.cpu_count() or 1)
        await run_worker_sets(
            worker_sets,
            execution,
            budget,
            _cost(run.plan, backend),
            runner,
            runner.stop,
            lambda ws: frozenset().union(*(backend.worker_devices(w) for w in ws.workers)),
        )
    await steps.stage("test_after")


async def _skip_infeasible(run: Run, todo: list[Treatment]) -> list[Treatment]:
    """Skip, with the backend's numbers, treatments whose workers can never start there."""
    backend, observer = run.backend, run.observer
    used = {w for t in todo for w in t.workers}
    configs = {w: run.plan.workers[w].config for w in sorted(used)}
    reasons, notes = await backend.infeasible({w: c for w, c in configs.items() if provisioned(c)})
    for note in notes:
        observer.phase("prepare", note)
    keep = []
    for treatment in todo:
        reason = next((reasons[w] for w in treatment.workers if w in reasons), "")
        reason = reason or backend.conflict(treatment.workers)
        if not reason:
            keep.append(treatment)
            continue
        run.ledger.finish(treatment.id, "SKIPPED", reason)
        verdict = Verdict(status=Status.SKIPPED, reason=reason)
        out_dir = run.run_dir.treatment(treatment.dirname)
        out_dir.mkdir(parents=True, exist_ok=True)
        write_summary(out_dir, treatment, verdict, 0)
        observer.phase("prepare", f"skipped {treatment.dirname}: {reason}")
    return keep


def _cost(plan: Plan, backend: Backend):  # type: ignore[no-untyped-def]
    def cost(worker_set: WorkerSet) -> float:
        configs = (plan.workers[w].config for w in worker_set.workers)
        return sum(backend.worker_cost(config) for config in configs) or 0.5

    return cost


def kept_message(run_dir: RunDir) -> str:
    """What ``execution.keep`` left running, and how to remove it."""
    return (
        f"skipped (execution.keep): the servers and the stack are left running — remove them"
        f" with `testbed cleanup {run_dir.path}`"
    )


def make_backend(loaded: LoadedCampaign, run_dir: RunDir) -> Backend:
    """The backend the campaign names, for the run in ``run_dir``."""
    config = loaded.campaign.backend
    keep = loaded.campaign.execution.keep
    return backend_class(config.kind).for_run(run_dir.path, config, loaded.base_dir, keep)


def run_backend_class(loaded: LoadedCampaign, options: RunOptions) -> type[Backend]:
    """The backend a run uses: the campaign's, or — given the servers' URLs (``testbed
    worker --endpoint``, a run's probe Job) — one that provisions nothing."""
    if options.endpoints is not None:
        from testbed.backends.endpoints import EndpointsBackend

        return EndpointsBackend
    return backend_class(loaded.campaign.backend.kind)


def run_backend(loaded: LoadedCampaign, run_dir: RunDir, options: RunOptions) -> Backend:
    """The backend of the run in ``run_dir`` (:func:`run_backend_class`)."""
    if options.endpoints is not None:
        from testbed.backends.endpoints import EndpointsBackend

        return EndpointsBackend(options.endpoints, loaded.base_dir)
    return make_backend(loaded, run_dir)


async def _final_cleanup(run: Run, steps: StepSession) -> InfrastructureError | None:
    """The final cleanup's steps, then release what the run made. A failure to release (the
    API server gone) is returned, not raised: the run's results come first — the caller
    writes summary.json and the report, then reports it (exit 3). An error that ended the
    run already wins; this one is then only shown.

    A stop request during the steps ends them; the release runs all the same and is cut
    short only by a second request (:mod:`.stopping`): the run then says what is left."""
    observer, stops, backend = run.observer, run.stops, run.backend
    observer.phase("final cleanup")
    stopped: asyncio.CancelledError | None = None
    try:
        await steps.stage("final_cleanup")
    except asyncio.CancelledError as exc:
        if not stops.received:
            raise  # not a stop request of ours: whoever cancelled decides
        if len(stops.received) > 1:
            raise _cut_short(run, steps_done=False) from None
        stopped = exc  # raised again once what the run made is released
    try:
        await stops.removal(backend.cleanup_leftovers(run.run_dir.path))
    except CutShort:
        raise _cut_short(run, steps_done=stopped is None) from None
    except InfrastructureError as exc:
        observer.phase("final cleanup", f"failed: {exc}")
        if stopped is not None:
            raise stopped from exc
        return exc
    if stopped is not None:
        raise stopped
    return None


def _cut_short(run: Run, *, steps_done: bool) -> Interrupted:
    path = run.run_dir.path
    remains = run.backend.remains(path)
    return Interrupted(cut_short_message(run.stops.name, path, steps_done, remains, True))
