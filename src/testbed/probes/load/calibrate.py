"""The harness's own ceiling, measured against a zero-latency simulator.

Two measurements (``testbed calibrate`` prints them):

1. **CPU per request**: a closed-loop stage at ``concurrency`` (default 32) with 128-token
   prompts and 64 streamed output tokens; the generator's process CPU time divided by the
   requests completed.
2. **Highest sustained rate**: open-loop stages at rising rates (×``step`` each time, from
   a tenth of the closed-loop throughput) until the self-check fails (schedule lag p99 above its
   limit, achieved rate short of the requested one, or CPU saturation) or requests fail;
   the last rate that passed is the ceiling.

On a shared machine the simulator and the generator compete for the same cores, so the
ceiling is of the pair; the CPU per request is the generator's alone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from testbed.clients.endpoint import Endpoint
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext
from testbed.probes.load import profiles
from testbed.probes.load.probe import execute_stage, prepare
from testbed.probes.load.summary import stage_summary
from testbed.results.files import RecordWriter


async def calibrate(
    url: str,
    *,
    concurrency: int = 32,
    stage_s: float = 4.0,
    step: float = 1.3,
    max_steps: int = 14,
    processes: int = 1,
    progress: Any = None,
) -> dict[str, Any]:
    """CPU ms per request and the highest sustained open-loop rate against ``url``."""
    say = progress or (lambda _msg: None)
    base = {"duration_s": stage_s, "processes": processes, "max_in_flight": 4096}
    closed = LoadProbe.model_validate({**base, "concurrency": concurrency})
    endpoint = Endpoint(base_url=url.rstrip("/"))
    with tempfile.TemporaryDirectory(prefix="testbed-calibrate-") as tmp:
        out = Path(tmp)
        with RecordWriter(out / "records.jsonl") as records:
            ctx = ProbeContext(
                endpoints={"sim": endpoint}, config=closed, out_dir=out, records=records
            )
            setup = await prepare(endpoint, closed, 0, Path.cwd())
            try:
                say(f"calibrate: closed loop, concurrency {concurrency}")
                stage = profiles.first_stages(closed)[0]
                run, recs = await execute_stage(stage, setup, closed, ctx, 0)
                saturation = stage_summary(stage, run, recs, closed)
                rate = saturation["throughput"]["requests_per_s"] / 10
                best: dict[str, Any] | None = None
                stopped: Any = "step limit reached"
                for _ in range(max_steps):
                    config = LoadProbe.model_validate(
                        {**base, "profile": "rate", "rate": rate, "arrival": "constant"}
                    )
                    stage = profiles.first_stages(config)[0]
                    say(f"calibrate: open loop at {rate:.0f}/s")
                    run, recs = await execute_stage(stage, setup, config, ctx, 0)
                    summary = stage_summary(stage, run, recs, config)
                    if not summary["selfcheck"]["ok"] or summary["requests"]["errors"]:
                        stopped = {
                            "rate": rate,
                            "problems": summary["selfcheck"]["problems"],
                            "errors": summary["requests"]["top_errors"],
                        }
                        break
                    best = summary
                    rate *= step
            finally:
                await setup.pool.aclose()
    return {
        "cpu_ms_per_request": saturation["harness"]["cpu_ms_per_request"],
        "closed_loop": {
            "concurrency": concurrency,
            "requests_per_s": saturation["throughput"]["requests_per_s"],
            "cpu_fraction": saturation["harness"]["cpu_fraction"],
        },
        "max_sustained_rate": best["harness"]["achieved_rate"] if best else None,
        "at_max_rate": {
            "schedule_lag_ms": best["harness"]["schedule_lag_ms"],
            "cpu_ms_per_request": best["harness"]["cpu_ms_per_request"],
            "cpu_fraction": best["harness"]["cpu_fraction"],
        }
        if best
        else None,
        "stopped_because": stopped,
        "processes": processes,
    }
