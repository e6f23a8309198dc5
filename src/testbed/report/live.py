"""The live progress display of ``testbed run``, and progress lines for other long work.

On a terminal: a rich live panel with the workers' states, the running treatments (each
with its probe's progress: a load test's stage k of n, requests done of requested, time
left) and the verdict counts, with treatments done of planned, time spent and an estimate of
the time left. Elsewhere (CI logs): one plain line per event, nothing redrawn, and a
probe's progress at most every :data:`PLAIN_EVERY_S` per treatment (and whenever it moves
to another stage), so a log shows how far along a long run is without a line a second.

:class:`ProgressLines` does the same for a command without the panel (``testbed load``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Self, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from testbed.core.clock import duration_text, monotonic_ns
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


#: Seconds between two plain progress lines of one treatment (a CI log).
PLAIN_EVERY_S = 30.0


class Throttle:
    """Whether a progress message is worth a line of a log: the first of its subject (the
    text before its last ": ", e.g. the stage), the last ("done"), or ``every_s`` after the
    previous line of the same key."""

    def __init__(self, every_s: float, clock: Callable[[], int] = monotonic_ns) -> None:
        self.every_ns = int(every_s * 1e9)
        self.clock = clock
        self._last: dict[str, tuple[str, int]] = {}

    def due(self, key: str, message: str) -> bool:
        subject, now = message.rpartition(": ")[0], self.clock()
        last = self._last.get(key)
        if last is None or last[0] != subject or "done in" in message:
            self._last[key] = (subject, now)
            return True
        if now - last[1] >= self.every_ns:
            self._last[key] = (subject, now)
            return True
        return False


def eta(done: int, total: int, elapsed_s: float) -> str:
    """``3/10 · 2m10s spent · ~5m03s left`` (the time left from the mean so far)."""
    text = f"{done}/{total} · {duration_text(elapsed_s)} spent"
    if 0 < done < total:
        text += f" · ~{duration_text(elapsed_s / done * (total - done))} left"
    return text


class ProgressLines:
    """Progress messages on ``stream``: on a terminal one line rewritten in place, elsewhere
    the lines :class:`Throttle` lets through."""

    def __init__(
        self,
        stream: TextIO,
        every_s: float = PLAIN_EVERY_S,
        clock: Callable[[], int] = monotonic_ns,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.throttle = Throttle(every_s, clock)

    def __call__(self, message: str) -> None:
        if self.tty:
            end = "\n" if "done in" in message else ""
            self.stream.write(f"\r{message}\x1b[K{end}")
            self.stream.flush()
        elif self.throttle.due("", message):
            self.stream.write(message + "\n")


class LiveDisplay:
    """An :class:`~testbed.execution.events.Observer` that draws progress."""

    def __init__(
        self, console: Console, total: int, clock: Callable[[], int] = monotonic_ns
    ) -> None:
        self.console = console
        self.total = total
        self.counts: Counter[Status] = Counter()
        self.workers: dict[str, str] = {}
        self.running: dict[str, str] = {}
        self._live: Live | None = None
        self._clock = clock
        self._began = clock()
        self._throttle = Throttle(PLAIN_EVERY_S, clock)

    def _eta(self) -> str:
        done = sum(self.counts.values())
        return eta(done, self.total, (self._clock() - self._began) / 1e9)

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
        if self._live is None and self._throttle.due(treatment.id, message):
            self._line(f"    {treatment.dirname}: {redact(message)}")
        self._refresh()

    def finished(self, treatment: Treatment, verdict: Verdict) -> None:
        self.running.pop(treatment.id, None)
        self.counts[verdict.status] += 1
        style = STYLE[verdict.status]
        reason = f" — {redact(verdict.reason.splitlines()[0])}" if verdict.reason else ""
        where = f"[dim]\\[{self._eta()}][/dim] " if self._live is None else ""
        self._line(
            f"  [{style}]{verdict.status.value:<12}[/{style}] {where}{treatment.dirname}{reason}"
        )

    def _render(self) -> Group:
        done = sum(self.counts.values())
        counts = "  ".join(
            f"[{STYLE[s]}]{s.value} {n}[/{STYLE[s]}]" for s, n in sorted(self.counts.items()) if n
        )
        spent = (self._clock() - self._began) / 1e9
        left = eta(done, self.total, spent).split(" · ", 1)[1]
        head = Text.from_markup(f"[bold]{done}/{self.total}[/bold] treatments · {left}  {counts}")
        table = Table(show_header=False, box=None, pad_edge=False)
        for worker_id, state in self.workers.items():
            if state != "stopped":
                table.add_row(f"[cyan]{worker_id}[/cyan]", state)
        for line in self.running.values():
            table.add_row("  running", line[:120])
        return Group(head, table)
