"""Running one treatment: its probe against provisioned endpoints, racing the servers' death.

A probe that raises :class:`InfrastructureError`, or a server that dies while it runs, gives
an ERROR with the cause (never a FAIL). The treatment's records stream to disk as the probe
emits them; its summary is written atomically at the end; the server output produced
during the treatment is copied beside them.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.backends.base import Backend, Handle, ProbeRun, ShippedCampaign
from testbed.config.backend_settings import BackendSettings, KubernetesSettings
from testbed.config.probe_settings import ProbeSettings
from testbed.core.clock import monotonic_ns, wall_label
from testbed.core.errors import InfrastructureError, InputError
from testbed.plan.model import Plan, Treatment
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.results.files import RecordWriter, write_json
from testbed.results.rundir import RECORDS, SUMMARY
from testbed.results.verdict import Status, Verdict

SUMMARY_VERSION = 1


@dataclass
class Setting:
    """What every treatment of a run shares."""

    plan: Plan
    seed: int
    base_dir: Path  # relative paths of the campaign start here
    backend: BackendSettings | None = None  # the campaign's backend section
    campaign: ShippedCampaign | None = None  # what probes run elsewhere get (cluster Jobs)
    record_tee: Callable[[dict[str, Any]], None] | None = None  # sees each record (--stream)


async def run_treatment(
    setting: Setting,
    backend: Backend,
    treatment: Treatment,
    handles: Mapping[str, Handle],
    out_dir: Path,
    attempt: int,
    logs: Mapping[str, Path],
    progress: Any,
) -> Verdict:
    """Run ``treatment`` (its probe where ``backend`` runs probes); write records and
    summary into ``out_dir``; return the verdict."""
    out_dir.mkdir(parents=True, exist_ok=True)
    workers = [setting.plan.workers[w] for w in treatment.workers]
    offsets = {w: _size(p) for w, p in logs.items()}
    config = setting.plan.probe_configs[treatment.probe_key]  # validated by the planner
    started_label, started = wall_label(), monotonic_ns()
    outcome: ProbeOutcome | None = None
    ship = setting.campaign  # what a probe run elsewhere is given of the campaign
    with RecordWriter(out_dir / RECORDS, setting.record_tee) as records:
        ctx = ProbeContext(
            endpoints={w.deployment: handles[w.id].endpoint for w in workers},
            config=config,
            out_dir=out_dir,
            records=records,
            seed=setting.seed,
            params=treatment.params,
            deployment=workers[0].document if workers else {},
            progress=progress,
            base_dir=setting.base_dir,
            cluster=setting.backend if isinstance(setting.backend, KubernetesSettings) else None,
        )
        mine = {w.id: handles[w.id] for w in workers}
        configs = {w.id: w.config for w in workers}
        run = ProbeRun(treatment, attempt, mine, configs, out_dir, records, progress, ship)
        probe = backend.run_probe(run, functools.partial(_probe, treatment.probe, ctx))
        try:
            outcome = await _race(probe, list(mine.values()))
            verdict = outcome.verdict
        except (InfrastructureError, InputError) as exc:  # an InputError: e.g. an HTML page
            verdict = Verdict(status=Status.ERROR, reason=str(exc))  # where a model list was
        except Exception as exc:  # a probe bug must not take the run down with it
            (out_dir / "error.txt").write_text(traceback.format_exc())
            verdict = Verdict(
                status=Status.ERROR,
                reason=f"probe crashed: {type(exc).__name__}: {exc} (traceback in error.txt)",
            )
        finally:
            _copy_log_slices(logs, offsets, out_dir)
    write_summary(
        out_dir,
        treatment,
        verdict,
        attempt,
        workers=[
            {"id": w.id, "deployment": w.deployment, "server": w.server, **handles[w.id].info}
            for w in workers
        ],
        started=started_label,
        duration_s=round((monotonic_ns() - started) / 1e9, 3),
        records=records.count,
        probe_summary=outcome.summary if outcome is not None else {},
    )
    return verdict


def restate_verdict(out_dir: Path, verdict: Verdict) -> None:
    """Replace the verdict of the treatment's ``summary.json`` (the rest stays)."""
    path = out_dir / SUMMARY
    summary = json.loads(path.read_text()) if path.is_file() else {}
    summary["verdict"] = verdict.model_dump(mode="json")
    write_json(path, summary)


def write_summary(
    out_dir: Path,
    treatment: Treatment,
    verdict: Verdict,
    attempt: int,
    *,
    workers: list[dict[str, Any]] | None = None,
    started: str = "",
    duration_s: float = 0.0,
    records: int = 0,
    probe_summary: dict[str, Any] | None = None,
) -> None:
    """The treatment's ``summary.json``: who ran what, the verdict, the probe's summary."""
    write_json(
        out_dir / SUMMARY,
        {
            "schema_version": SUMMARY_VERSION,
            "id": treatment.id,
            "dir": treatment.dirname,
            "probe": treatment.probe,
            "params": treatment.params,
            "workers": workers if workers is not None else [{"id": w} for w in treatment.workers],
            "attempt": attempt,
            "started": started or wall_label(),
            "duration_s": duration_s,
            "records": records,
            "verdict": verdict.model_dump(mode="json"),
            **(probe_summary or {}),
        },
    )


async def _probe(name: str, ctx: ProbeContext[ProbeSettings]) -> ProbeOutcome:
    """Run probe ``name`` (the treatment's, whose settings ``ctx.config`` holds) in this
    process; its package is imported only when a treatment runs it (scale's needs the
    cluster client)."""
    module = importlib.import_module(f"testbed.probes.{name}")
    result: ProbeOutcome = await module.run(ctx)
    return result


async def _race(probe: Any, handles: list[Handle]) -> ProbeOutcome:
    """The probe's outcome, unless a server dies first or as it ends (InfrastructureError)."""
    task = asyncio.ensure_future(probe)
    deaths = [h.died for h in handles]
    try:
        done, _ = await asyncio.wait([task, *deaths], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        # the probe's own cleanup (deleting what it created) runs to its end before we go on
        await asyncio.gather(task, return_exceptions=True)
        raise
    if task in done and not any(d.done() for d in deaths):
        outcome: ProbeOutcome = task.result()
        return outcome
    # A death seen in the same turn as the probe's end explains that end (e.g. its errors).
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    reason = next(d.result() for d in deaths if d.done())
    raise InfrastructureError(f"server lost during the probe: {reason}")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _copy_log_slices(logs: Mapping[str, Path], offsets: Mapping[str, int], out_dir: Path) -> None:
    """The server output written while this treatment ran, beside its records."""
    for worker_id, path in logs.items():
        try:
            with path.open("rb") as handle:
                handle.seek(offsets.get(worker_id, 0))
                chunk = handle.read()
        except OSError:
            continue
        name = "server.log" if len(logs) == 1 else f"server-{worker_id}.log"
        (out_dir / name).write_bytes(chunk)
