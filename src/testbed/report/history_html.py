"""The page of ``testbed history``: one plot per metric of each configuration, the runs in
order along x, change points marked with the runs around them.

Self-contained (inline SVG, no script, no request): it opens from a CI artefact as it is.
A change point is a dashed line before its first run, red when it is a regression beyond
the threshold that the newest run still carries, amber for another worse change, green for a
better one; the table under the plot names the runs on either side (id, ``--label``, the
commit they tested, start, testbed and server versions), the segments' means and the p-value.
"""

from __future__ import annotations

from collections.abc import Sequence

from testbed.core.clock import wall_label
from testbed.report.html_blocks import e
from testbed.results.history import ChangePoint, RunPoint, Series

WIDTH, HEIGHT, PAD = 720, 220, 44

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
h2{margin-top:2rem;font-size:1.1rem} table{border-collapse:collapse;margin:.4rem 0 1rem}
td,th{border:1px solid #ccc;padding:.2rem .5rem;font-size:.85rem;text-align:left}
.regression{color:#b00020;font-weight:bold} .ok{color:#1b5e20} svg{background:#fafafa}
"""


def render(series: Sequence[Series], threshold: float, source: str) -> str:
    """The whole page."""
    failing = [s for s in series if s.regression(threshold) is not None]
    status = (
        f'<p class="regression">{len(failing)} series regressed at their newest run</p>'
        if failing
        else '<p class="ok">no regression carried by the newest run</p>'
    )
    sections = [_section(s, threshold) for s in series]
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>testbed history</title>'
        f"<style>{_CSS}</style></head><body><h1>testbed history</h1>"
        f"<p>index {e(source)} · {len(series)} series · threshold {threshold:.1%} ·"
        f" generated {e(wall_label())}</p>{status}{''.join(sections)}</body></html>\n"
    )


def run_section(series: Sequence[Series], threshold: float) -> str:
    """report.html's History: this run's configurations that have change points, each
    with its plot and the runs around each change (:mod:`testbed.report.run_history`)."""
    if not series:
        return ""
    intro = (
        f"<p>change points (Apache Otava, e-divisive) in the results index's runs of this"
        f" run's configurations, this run the last point; a regression beyond"
        f" {threshold:.0%} that this run carries is red. <code>testbed history</code> draws"
        " every series.</p>"
    )
    return intro + "".join(_section(s, threshold) for s in series)


def _section(series: Series, threshold: float) -> str:
    title = f"{series.campaign} · {series.label} · {series.metric}"
    regression = series.regression(threshold)
    flag = ' <span class="regression">regression</span>' if regression else ""
    better = "lower" if series.direction < 0 else "higher"
    return (
        f'<h2 id="{e(series.config)}-{e(series.metric)}">{e(title)}{flag}</h2>'
        f"<p>{len(series.points)} runs · {better} is better</p>"
        f"{_plot(series, regression)}{_changes(series, regression)}"
    )


def _plot(series: Series, regression: ChangePoint | None) -> str:
    values = [p.value for p in series.points]
    low, high = min(values), max(values)
    span = (high - low) or abs(high) or 1.0
    low, high = low - span * 0.1, high + span * 0.1
    count = len(values)

    def x(i: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / (count - 1) if count > 1 else 0.5)

    def y(v: float) -> float:
        return HEIGHT - PAD + (v - low) / (high - low) * (2 * PAD - HEIGHT)

    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    dots = "".join(
        f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="3" fill="#1565c0">'
        f"<title>{e(p.run_id)}: {p.value:.4g}</title></circle>"
        for i, p in enumerate(series.points)
    )
    marks = "".join(
        _mark(x(cp.index - 0.5), _colour(series, cp, regression), cp) for cp in series.change_points
    )
    axis = (
        f'<text x="4" y="{y(high) + 4:.0f}" font-size="10">{high:.4g}</text>'
        f'<text x="4" y="{y(low):.0f}" font-size="10">{low:.4g}</text>'
        f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="10">run 1</text>'
        f'<text x="{WIDTH - PAD - 30}" y="{HEIGHT - 8}" font-size="10">run {count}</text>'
    )
    return (
        f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{e(series.metric)}">'
        f'{axis}{marks}<polyline points="{line}" fill="none" stroke="#90caf9"/>{dots}</svg>'
    )


def _colour(series: Series, cp: ChangePoint, regression: ChangePoint | None) -> str:
    if cp is regression:
        return "#b00020"
    return "#f9a825" if series.worse(cp) else "#2e7d32"


def _mark(at: float, colour: str, cp: ChangePoint) -> str:
    return (
        f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{PAD / 2}" y2="{HEIGHT - PAD}" stroke="{colour}"'
        f' stroke-dasharray="4 3" stroke-width="2"><title>change at {e(cp.run_id)}:'
        f" {cp.change:+.1%}</title></line>"
    )


def _changes(series: Series, regression: ChangePoint | None) -> str:
    if not series.change_points:
        return "<p>no change point</p>"
    rows = []
    for cp in series.change_points:
        before, after = series.points[cp.index - 1], series.points[cp.index]
        kind = "regression" if cp is regression else "worse" if series.worse(cp) else "better"
        rows.append(
            f'<tr><td class="{"regression" if cp is regression else ""}">{kind}</td>'
            f"<td>run {cp.index + 1}</td><td>{_run(before)}</td><td>{_run(after)}</td>"
            f"<td>{cp.mean_before:.4g} → {cp.mean_after:.4g} ({cp.change:+.1%})</td>"
            f"<td>{cp.pvalue:.2g}</td></tr>"
        )
    return (
        "<table><tr><th>change</th><th>at</th><th>last run before</th><th>first run after</th>"
        f"<th>segment means</th><th>p</th></tr>{''.join(rows)}</table>"
    )


def _run(point: RunPoint) -> str:
    versions = " · ".join(v for v in (point.testbed_version, point.servers) if v)
    said = f"<br>{e(point.label)}" if point.label else ""
    commit = f"<br>commit <code>{e(point.commit)}</code>" if point.commit else ""
    return f"<code>{e(point.run_id)}</code>{said}{commit}<br>{e(point.started)}<br>{e(versions)}"
