"""Captures around each treatment (TOPSAIL's ``capture_state`` and ``capture_prom``).

With ``execution.capture.state`` the backend dumps the run's state into the treatment's
``state-before/`` and ``state-after/``. With ``execution.capture.prometheus`` each query is
range-queried over the treatment's window into ``prometheus.json``; the window comes from
the records' clock (their first and last ``*_ns`` timestamps, ``perf_counter_ns`` of this
machine, mapped to wall time by a pair of readings taken as the treatment starts), or from
the treatment's own start and end when the records carry another clock (probes run in the
cluster). A capture that fails is written down (``captures.json``) and shown as a warning
in the report: it never changes a verdict.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.backends.base import Backend
from testbed.clients.promql import PrometheusError, query_range
from testbed.config.steps import Capture
from testbed.core.clock import monotonic_ns, wall_label
from testbed.core.errors import TestbedError
from testbed.core.secrets import redact, resolve
from testbed.plan.model import Treatment
from testbed.results.files import read_records, write_json
from testbed.results.rundir import RECORDS
from testbed.results.steps import CAPTURES_FILE, PROMETHEUS_FILE

STATE_TIMEOUT_S = 120.0
#: Seconds added to each side of the window: a scrape just before or after still counts.
MARGIN_S = 1.0


@dataclass(frozen=True)
class Mark:
    """Wall and monotonic clocks read together as a treatment starts."""

    wall_ns: int
    mono_ns: int

    def wall_s(self, mono_ns: int) -> float:
        return (self.wall_ns + (mono_ns - self.mono_ns)) / 1e9


@dataclass
class Captures:
    backend: Backend
    settings: Capture

    @property
    def active(self) -> bool:
        return self.settings.state or self.settings.prometheus is not None

    async def before(self, treatment: Treatment, out_dir: Path) -> Mark:
        mark = Mark(time.time_ns(), monotonic_ns())
        if self.settings.state:
            notes = await self._state(treatment, out_dir / "state-before")
            _note(out_dir, "state-before", notes)
        return mark

    async def after(self, treatment: Treatment, out_dir: Path, mark: Mark) -> None:
        end = monotonic_ns()
        if self.settings.state:
            _note(out_dir, "state-after", await self._state(treatment, out_dir / "state-after"))
        if self.settings.prometheus is not None:
            document = await asyncio.to_thread(self._prometheus, out_dir, mark, end)
            write_json(out_dir / PROMETHEUS_FILE, document)
            if document.get("warning"):
                _note(out_dir, "prometheus", [f"warning: {document['warning']}"])

    async def _state(self, treatment: Treatment, folder: Path) -> list[str]:
        try:
            async with asyncio.timeout(STATE_TIMEOUT_S):
                return await self.backend.capture_state(
                    folder, treatment.workers, self.settings.namespaces
                )
        except TimeoutError:
            return [f"warning: state capture gave up after {STATE_TIMEOUT_S:.0f} s"]
        except TestbedError as exc:
            return [f"warning: state not captured: {redact(str(exc))}"]

    def _prometheus(self, out_dir: Path, mark: Mark, end_ns: int) -> dict[str, Any]:
        settings = self.settings.prometheus
        assert settings is not None
        start_s, end_s, clock = window(out_dir / RECORDS, mark, end_ns)
        document: dict[str, Any] = {
            "url": settings.url,
            "start": round(start_s - MARGIN_S, 3),  # as sent: milliseconds
            "end": round(end_s + MARGIN_S, 3),
            "clock": clock,
            "step_s": settings.step_s,
            "taken": wall_label(),
            "queries": {},
        }
        token = resolve(settings.token) if settings.token else None
        failures = []
        for name, query in settings.queries.items():
            entry: dict[str, Any] = {"query": query}
            try:
                entry["series"] = query_range(
                    settings.url,
                    query,
                    document["start"],
                    document["end"],
                    settings.step_s,
                    timeout_s=settings.timeout_s,
                    token=token,
                )
            except PrometheusError as exc:
                entry["error"] = redact(str(exc))
                failures.append(f"{name}: {entry['error']}")
            document["queries"][name] = entry
        if failures:
            document["warning"] = f"Prometheus {settings.url}: " + "; ".join(failures)
        return document


def window(records: Path, mark: Mark, end_ns: int) -> tuple[float, float, str]:
    """``(start, end, clock)`` in unix seconds: the records' first and last timestamps when
    they fall inside the treatment, else the treatment's own start and end."""
    stamps = [
        value
        for record in _records(records)
        for key, value in record.items()
        if key.endswith("_ns") and isinstance(value, int) and value > 0
    ]
    if stamps and mark.mono_ns <= min(stamps) and max(stamps) <= end_ns:
        return mark.wall_s(min(stamps)), mark.wall_s(max(stamps)), "records"
    return mark.wall_s(mark.mono_ns), mark.wall_s(end_ns), "treatment"


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        return read_records(path)
    except (OSError, ValueError):
        return []


def _note(out_dir: Path, what: str, notes: list[str]) -> None:
    """Add ``notes`` under ``what`` in the treatment's captures.json."""
    import json

    path = out_dir / CAPTURES_FILE
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    current[what] = notes
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(path, current)
