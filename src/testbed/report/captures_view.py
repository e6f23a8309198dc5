"""What was captured around each treatment, in report.html: the Prometheus series over the
treatment's window (one plot per query, a line per series; a load treatment's beside its
server metrics), links to the state dumps, and every capture problem as a warning — a
capture never changes a verdict."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from testbed.core.secrets import redact
from testbed.report.plots import to_svg
from testbed.results.run_summary import TreatmentRow
from testbed.results.steps import CAPTURES_FILE, PROMETHEUS_FILE

_MAX_SERIES = 12


def _e(value: Any) -> str:
    return escape(redact(str(value)))


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def warnings(run_path: Path, rows: Sequence[TreatmentRow]) -> list[str]:
    """Every capture warning of the run, ``<treatment dir>: <warning>``."""
    found = []
    for row in rows:
        notes = _read(run_path / row.dir / CAPTURES_FILE)
        found += [
            f"{row.dir}: {note.removeprefix('warning: ')}"
            for part in notes.values()
            for note in part
            if isinstance(note, str) and note.startswith("warning:")
        ]
    return found


def section(run_path: Path, rows: Sequence[TreatmentRow]) -> str:
    """One block per treatment that has captures; '' when none has."""
    parts = [f'<p class="flag">⚠ {_e(w)}</p>' for w in warnings(run_path, rows)]
    for number, row in enumerate(rows):
        folder = run_path / row.dir
        links = [
            f'<a href="{_e(row.dir)}/{name}/">{name}</a>'
            for name in ("state-before", "state-after")
            if (folder / name).is_dir()
        ]
        # a load treatment's series are drawn beside its server metrics (load_view)
        prometheus = _read(folder / PROMETHEUS_FILE) if row.probe != "load" else {}
        if not links and not prometheus:
            continue
        parts.append(f"<h3>{_e(row.dir)}</h3>")
        if links:
            parts.append(f"<p>state: {' · '.join(links)}</p>")
        if prometheus:
            parts.append(_prometheus(prometheus, f"prom{number}"))
    return "\n".join(parts)


def prometheus_block(folder: Path, key: str) -> str:
    """The Prometheus series captured over the treatment in ``folder``; '' when none."""
    document = _read(folder / PROMETHEUS_FILE)
    if not document:
        return ""
    return f"<h4>Cluster metrics (Prometheus)</h4>{_prometheus(document, key)}"


def _prometheus(document: Mapping[str, Any], key: str) -> str:
    queries = document.get("queries") or {}
    span = float(document.get("end", 0)) - float(document.get("start", 0))
    head = (
        f'<p class="muted">{_e(document.get("url"))} · window {span:.1f} s (clock:'
        f" {_e(document.get('clock'))}) · step {_e(document.get('step_s'))} s</p>"
    )
    plotted = {n: q for n, q in queries.items() if q.get("series")}
    empty = [
        f"<li><code>{_e(n)}</code>: {_e(q.get('error') or 'no series in the window')}</li>"
        for n, q in queries.items()
        if not q.get("series")
    ]
    figure = _figure(plotted, float(document.get("start", 0)), key) if plotted else ""
    listing = f"<ul>{''.join(empty)}</ul>" if empty else ""
    return head + figure + listing


def _figure(queries: Mapping[str, Mapping[str, Any]], start: float, key: str) -> str:
    fig = Figure(figsize=(7.5, 2.2 * len(queries)), layout="constrained")
    axes = fig.subplots(len(queries), 1, squeeze=False)[:, 0]
    for ax, (name, entry) in zip(axes, queries.items(), strict=True):
        for series in entry["series"][:_MAX_SERIES]:
            points = [(t - start, v) for t, v in series["values"] if v is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker=".", linewidth=1, label=_label(series["metric"]))
        ax.set_title(f"{name}: {entry['query']}", fontsize=8, loc="left")
        ax.set_xlabel("s into the window", fontsize=8)
        ax.tick_params(labelsize=7)
        if len(entry["series"]) > 1:
            ax.legend(fontsize=6, loc="best")
    return to_svg(fig, key, "Prometheus series over the treatment's window")


def _label(metric: Mapping[str, str]) -> str:
    shown = {k: v for k, v in metric.items() if k not in ("__name__", "job")}
    return ",".join(f"{k}={v}" for k, v in sorted(shown.items()))[:60] or "value"
