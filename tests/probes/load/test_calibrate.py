"""testbed calibrate: the harness's CPU per request and highest sustained rate."""

from __future__ import annotations

import pytest

from testbed.probes.load.calibrate import calibrate
from testbed.probes.load.loops import run_fast


@pytest.mark.slow
@pytest.mark.timing
def test_calibrate_reports_cpu_and_a_rate(instant_url: str) -> None:
    result = run_fast(calibrate(instant_url, concurrency=8, stage_s=0.5, max_steps=2))
    assert 0 < result["cpu_ms_per_request"] < 20
    assert result["closed_loop"]["requests_per_s"] > 50
    if result["max_sustained_rate"] is not None:
        assert result["max_sustained_rate"] > 0
        assert set(result["at_max_rate"]["schedule_lag_ms"]) == {"p50", "p99"}
    assert result["stopped_because"]
