"""Expand a campaign of 100,000 treatments (5 factors × 10 levels) and print wall time and
peak memory. Target on a 2-core machine: under 2 s and under 300 MB.

    .venv/bin/python bench/plan_expand.py
"""

from __future__ import annotations

import resource
import time

from testbed.config.loader import load_campaign_text
from testbed.plan.expand import expand

CAMPAIGN = """\
name: big-sweep
deployments:
  - name: sim
    server: sim
matrix:
  factors:
    deployments.params.ttft_ms: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    deployments.params.itl_ms: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    load.concurrency: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    load.timeout_s: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    load.warmup_s: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
load:
  profile: concurrency
"""


def main() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    plan = expand(load_campaign_text(CAMPAIGN, "big-sweep.yaml"))
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"treatments      {len(plan.treatments):>10,}")
    print(f"workers         {len(plan.workers):>10,}")
    print(f"expand wall     {elapsed:>10.2f} s   (target < 2 s)")
    print(f"peak RSS        {peak_mb:>10.0f} MB  (target < 300 MB; {before / 1024:.0f} MB before)")
    assert len(plan.treatments) == 100_000


if __name__ == "__main__":
    main()
