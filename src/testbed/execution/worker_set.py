"""Running one worker set: provision its workers together, run its treatments one after the
other, release the workers — always. Infrastructure errors are retried on fresh workers."""

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
from testbed.execution.treatment import Setting, run_treatment, write_summary
from testbed.plan.model import Treatment
from testbed.results.ledger import Ledger
from testbed.results.rundir import RunDir
from testbed.results.verdict import Status, Verdict


@dataclass
class WorkerSetRunner:
    """Everything a worker set needs, shared by all worker sets of a run."""

    setting: Setting
    backend: Backend
    run_dir: RunDir
    ledger: Ledger
    observer: Observer
    retries: int
    fail_fast: bool
    stop: asyncio.Event
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
        failures = 0  # infrastructure failures of this worker set, against the retry budget
        while remaining and not self.stop.is_set():
            try:
                async with self._provision(worker_set) as handles:
                    failures = await self._serve(remaining, handles, failures)
            except InfrastructureError as exc:  # the workers did not start
                failures += 1
                if failures > self.retries:
                    self._give_up(remaining, Verdict(status=Status.ERROR, reason=str(exc)))
                    return

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
        self, remaining: list[Treatment], handles: dict[str, Handle], failures: int
    ) -> int:
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
            if verdict.status == Status.ERROR and failures < self.retries:
                failures += 1
                self.observer.progress(treatment, f"ERROR, retrying: {verdict.reason[:200]}")
                if died:
                    return failures
                continue
            remaining.pop(0)
            self._finish(treatment, verdict)
            if died:
                return failures
        return failures

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
