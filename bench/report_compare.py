"""Time publishing a run (summary.json, junit.xml, report.html) and comparing two runs,
on run directories built from a seeded latency model (tests/report/fake_runs.py); and the
false-positive rate of ``testbed compare`` on pairs of runs drawn from one distribution.

    .venv/bin/python bench/report_compare.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.report.fake_runs import make_run

from testbed.report.compare import CompareOptions, compare_runs
from testbed.report.run_summary import PublishOptions, publish


def timings(root: Path) -> None:
    for n, levels in ((300, (1, 2, 4)), (2000, (1, 2, 4, 8, 16, 32))):
        base = make_run(root, f"a{n}", n=n, levels=levels, seed=1)
        slower = make_run(root, f"b{n}", n=n, levels=levels, seed=2, ttft_ms=22.0)
        start = time.perf_counter()
        publish(base, Console(quiet=True), PublishOptions(use_index=False))
        published = time.perf_counter() - start
        size = (base / "report.html").stat().st_size / 1e3
        start = time.perf_counter()
        result = compare_runs(base, slower, CompareOptions(use_index=False))
        compared = time.perf_counter() - start
        print(
            f"{len(levels)} treatments × {n} requests: publish {published:.2f} s"
            f" (report.html {size:.0f} kB), compare {compared:.2f} s"
            f" ({len(result.results)} metrics, {len(result.regressions)} regressions, TTFT +10 %)"
        )


def false_positives(root: Path, pairs: int = 10) -> None:
    flagged = 0
    for i in range(pairs):
        a = make_run(root, f"fa{i}", seed=100 + 7 * i)
        b = make_run(root, f"fb{i}", seed=5000 + 13 * i)
        flagged += compare_runs(a, b, CompareOptions(use_index=False)).failed
    print(f"same distribution: {flagged} of {pairs} pairs flagged as a regression")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        timings(Path(tmp))
        false_positives(Path(tmp))
