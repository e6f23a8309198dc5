"""report.html opens with the headline load figures, one row per load treatment (issue 36):
they were in the terminal and in collapsed details only."""

from __future__ import annotations

import json
from pathlib import Path

from testbed.report.html import render
from testbed.report.run_summary import run_document
from testbed.results.rundir import RunDir
from tests.report.fake_runs import make_run


def test_the_report_opens_with_each_load_treatments_figures(tmp_path: Path) -> None:
    path = make_run(tmp_path, "run", levels=(1, 4), extras=True)
    page = render(path, run_document(RunDir.existing(path)))
    main = page[page.index("<main>") :]
    first = main[: main.index("</section>")]
    assert '<section id="headline">' in first  # before the verdicts and every other section
    assert first.count("<tr>") == 3  # the header and two load treatments (not the others)
    for name in ("TTFT p50", "TTFT p99", "ITL p50", "E2E p99", "req/s", "goodput req/s"):
        assert f"<th>{name}</th>" in first
    for level in (1, 4):
        folder = next(path.glob(f"*__sim-c{level}__*"))
        summary = json.loads((folder / "summary.json").read_text())
        row = first[first.index(folder.name) :].split("</tr>")[0]
        cells = [c.split(">", 1)[1] for c in row.split("</td>")[:-1]]
        assert f"{summary['ttft_ms']['p50']:,.2f}" in cells[6]
        assert f"{summary['ttft_ms']['p99']:,.2f}" in cells[8]
        assert f"{summary['throughput']['requests_per_s']:,.2f}" in cells[3]
        assert cells[-2] == f"0/{summary['requests']['total']}"
        assert cells[-1] == "–"  # no KV cache in these simulators: no prefix cache queries


def test_a_run_without_load_has_no_headline(tmp_path: Path) -> None:
    path = make_run(tmp_path, "run", levels=(), extras=True)
    page = render(path, run_document(RunDir.existing(path)))
    assert 'id="headline"' not in page
