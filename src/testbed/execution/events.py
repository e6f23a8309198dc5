"""What the pipeline tells its observer (the live display, a log): a small protocol, so the
execution layer never depends on how progress is shown."""

from __future__ import annotations

from typing import Protocol

from testbed.plan.model import Treatment
from testbed.results.verdict import Verdict


class Observer(Protocol):
    def phase(self, name: str, detail: str = "") -> None: ...
    def worker(self, worker_id: str, state: str) -> None: ...
    def started(self, treatment: Treatment, attempt: int) -> None: ...
    def progress(self, treatment: Treatment, message: str) -> None: ...
    def finished(self, treatment: Treatment, verdict: Verdict) -> None: ...


class Silent:
    """An observer that shows nothing."""

    def phase(self, name: str, detail: str = "") -> None:
        pass

    def worker(self, worker_id: str, state: str) -> None:
        pass

    def started(self, treatment: Treatment, attempt: int) -> None:
        pass

    def progress(self, treatment: Treatment, message: str) -> None:
        pass

    def finished(self, treatment: Treatment, verdict: Verdict) -> None:
        pass
