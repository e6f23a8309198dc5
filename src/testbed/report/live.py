"""The live progress display of ``testbed run``.

On a terminal: a rich live panel with the workers' states, the running treatments and the
verdict counts. Elsewhere (CI logs): one plain line per event, nothing redrawn.
"""

from __future__ import annotations

from collections import Counter
from types import TracebackType
from typing import Self

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from testbed.core.secrets import redact
from testbed.plan.model import Treatment
from testbed.results.verdict import Status, Verdict

STYLE = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.ERROR: "magenta",
    Status.INCONCLUSIVE: "yellow",
    Status.SKIPPED: "dim",
    Status.NOT_RUN: "magenta",
}


class LiveDisplay:
    """An :class:`~testbed.execution.events.Observer` that draws progress."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.counts: Counter[Status] = Counter()
        self.workers: dict[str, str] = {}
        self.running: dict[str, str] = {}
        self._live: Live | None = None

    def __enter__(self) -> Self:
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(et, e, tb)

    def _line(self, text: str) -> None:
        if self._live is None:
            self.console.print(text, highlight=False, soft_wrap=True)
        else:
            self._live.console.print(text, highlight=False)
            self._live.update(self._render())

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def phase(self, name: str, detail: str = "") -> None:
        self._line(f"[bold]{name}[/bold]" + (f" · {redact(detail)}" if detail else ""))

    def worker(self, worker_id: str, state: str) -> None:
        self.workers[worker_id] = state
        if self._live is None or not state.startswith("ready"):
            self._line(f"  worker {worker_id}: {state}")
        self._refresh()

    def started(self, treatment: Treatment, attempt: int) -> None:
        self.running[treatment.id] = f"{treatment.dirname}" + (
            f" (attempt {attempt})" if attempt > 1 else ""
        )
        if self._live is None:
            self._line(f"  → {treatment.dirname}" + (f" attempt {attempt}" if attempt > 1 else ""))
        self._refresh()

    def progress(self, treatment: Treatment, message: str) -> None:
        if treatment.id in self.running:
            self.running[treatment.id] = f"{treatment.dirname}: {redact(message)}"
        self._refresh()

    def finished(self, treatment: Treatment, verdict: Verdict) -> None:
        self.running.pop(treatment.id, None)
        self.counts[verdict.status] += 1
        style = STYLE[verdict.status]
        reason = f" — {redact(verdict.reason.splitlines()[0])}" if verdict.reason else ""
        self._line(f"  [{style}]{verdict.status.value:<12}[/{style}] {treatment.dirname}{reason}")

    def _render(self) -> Group:
        done = sum(self.counts.values())
        counts = "  ".join(
            f"[{STYLE[s]}]{s.value} {n}[/{STYLE[s]}]" for s, n in sorted(self.counts.items()) if n
        )
        head = Text.from_markup(f"[bold]{done}/{self.total}[/bold] treatments  {counts}")
        table = Table(show_header=False, box=None, pad_edge=False)
        for worker_id, state in self.workers.items():
            if state != "stopped":
                table.add_row(f"[cyan]{worker_id}[/cyan]", state)
        for line in self.running.values():
            table.add_row("  running", line[:120])
        return Group(head, table)
