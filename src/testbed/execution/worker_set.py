"""Running one worker set: provision its workers together, run its treatments one after the
other, release the workers — always. Infrastructure errors are retried on fresh workers; an
ERROR that ends the retries also says how the first attempt ended (the retry's own failure
may be another, and the first is the one that cost the workers)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from testbed.backends.base import Backend, Handle
from testbed.core.errors import InfrastructureError
from testbed.execution.captures import Captures
from testbed.execution.events import Observer
from testbed.execution.grouping import WorkerSet
from testbed.execution.treatment import (
    Setting,
    restate_verdict,
    run_treatment,
    write_summary,
)
from testbed.plan.model import Treatment
from testbed.results.ledger import Ledger
from testbed.results.rundir import RunDir
from testbed.results.verdict import Status, Verdict


@dataclass
class _Budget:
    """Infrastructure failures of one worker set, against the retry budget, and the first."""

    failures: int = 0
    first: str | None = None

    def spend(self, reason: str) -> None:
        self.failures += 1
        self.first = self.first or reason

    def told(self, verdict: Verdict) -> Verdict:
        """``verdict``, an ERROR after a retry also naming how the first attempt ended."""
        if verdict.status != Status.ERROR or self.first in (None, verdict.reason):
            return verdict
        reason = f"{verdict.reason}; the first attempt ended: {str(self.first)[:600]}"
        return verdict.model_copy(update={"reason": reason})


@dataclass(kw_only=True)
class WorkerSetRunner:
    """Everything a worker set needs, shared by all worker sets of a run (by name: eight
    fields in a row are easily given in the wrong order)."""

    setting: Setting
    backend: Backend
    run_dir: RunDir
    ledger: Ledger
    observer: Observer
    retries: int
    fail_fast: bool
    stop: asyncio.Event = field(default_factory=asyncio.Event)  # set: start nothing more
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    captures: Captures | None = None  # state and Prometheus around each treatment

    async def __call__(self, worker_set: WorkerSet) -> None:
        try:
            await self._run(worker_set)
        except Exception as exc:  # a bug or an unforeseen failure ends this worker set, not the run
            reason = f"unexpected error: {type(exc).__name__}: {exc}"
            left = [t for t in worker_set.treatments if t.id not in self.verdicts]
            if left:
                self._give_up(left, Verdict(status=Status.ERROR, reason=reason))
            else:  # the treatments are done; the failure came while releasing the workers
                for worker_id in worker_set.workers:
                    self.observer.worker(worker_id, f"release failed: {reason}")

    async def _run(self, worker_set: WorkerSet) -> None:
        remaining = list(worker_set.treatments)
        budget = _Budget()
        while remaining and not self.stop.is_set():
            try:
                async with self._provision(worker_set) as handles:
                    await self._serve(remaining, handles, budget)
            except InfrastructureError as exc:  # the workers did not start
                budget.spend(str(exc))
                if budget.failures > self.retries or not exc.retryable:
                    verdict = budget.told(Verdict(status=Status.ERROR, reason=str(exc)))
                    self._give_up(remaining, verdict)
                    return
                for worker_id in worker_set.workers:  # said, never silent
                    cause = str(exc).split("\n", 1)[0][:300]
                    self.observer.worker(worker_id, f"did not start, retrying: {cause}")

    def _give_up(self, treatments: list[Treatment], verdict: Verdict) -> None:
        """``verdict`` (an ERROR) for each of ``treatments``, with a summary on disk."""
        for treatment in treatments:
            attempt = self.ledger.start(treatment.id)
            # an interrupted earlier attempt's records go to attempts/, not beside this
            # ERROR's summary
            self.run_dir.reset_treatment(treatment.dirname, attempt - 1)
            write_summary(self.run_dir.treatment(treatment.dirname), treatment, verdict, attempt)
            self._finish(treatment, verdict)

    async def _serve(
        self, remaining: list[Treatment], handles: dict[str, Handle], budget: _Budget
    ) -> None:
        """Run treatments until done, or until a server died (the caller re-provisions)."""
        logs = {w: self.run_dir.worker(w) / "server.log" for w in handles}
        while remaining and not self.stop.is_set():
            treatment = remaining[0]
            attempt = self.ledger.start(treatment.id)
            self.run_dir.reset_treatment(treatment.dirname, attempt - 1)
            self.observer.started(treatment, attempt)
            out_dir = self.run_dir.treatment(treatment.dirname)
            mark = await self.captures.before(treatment, out_dir) if self.captures else None
            verdict = await run_treatment(
                self.setting,
                self.backend,
                treatment,
                handles,
                out_dir,
                attempt,
                {w: logs[w] for w in treatment.workers},
                self._progress(treatment),
            )
            if self.captures is not None and mark is not None:
                await self.captures.after(treatment, out_dir, mark)
            died = any(h.died.done() for h in handles.values())
            if verdict.status == Status.ERROR and budget.failures < self.retries:
                budget.spend(verdict.reason)
                self.observer.progress(treatment, f"ERROR, retrying: {verdict.reason[:200]}")
                if died:
                    return
                continue
            remaining.pop(0)
            told = budget.told(verdict)
            if told is not verdict:
                restate_verdict(out_dir, told)
            self._finish(treatment, told)
            if died:
                return

    def _finish(self, treatment: Treatment, verdict: Verdict) -> None:
        self.ledger.finish(treatment.id, verdict.status.value, verdict.reason)
        self.verdicts[treatment.id] = verdict
        self.observer.finished(treatment, verdict)
        if self.fail_fast and verdict.status in (Status.FAIL, Status.ERROR):
            self.stop.set()

    def _progress(self, treatment: Treatment) -> Callable[[str], None]:
        return lambda message: self.observer.progress(treatment, message)

    @contextlib.asynccontextmanager
    async def _provision(self, worker_set: WorkerSet):  # type: ignore[no-untyped-def]
        async with contextlib.AsyncExitStack() as stack:
            handles: dict[str, Handle] = {}
            for worker_id in worker_set.workers:
                worker = self.setting.plan.workers[worker_id]
                self.observer.worker(worker_id, "starting")
                stack.callback(self.observer.worker, worker_id, "stopped")
                handles[worker_id] = await stack.enter_async_context(
                    self.backend.open_worker(
                        worker_id, worker.config, self.run_dir.worker(worker_id)
                    )
                )
                self.observer.worker(worker_id, f"ready at {handles[worker_id].endpoint.base_url}")
            yield handles
