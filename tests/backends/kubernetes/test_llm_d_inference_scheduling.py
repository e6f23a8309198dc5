"""llm-d-benchmark's inference-scheduling experiment as written (issue 35's done-when):
``testbed run examples/llm-d-inference-scheduling.yaml --preset rehearsal`` against
``testbed cluster emulate --gateway-stand-in``. The vLLM pods are given no prefix-caching flag,
so the stand-in must cache as vLLM does by default: the prefix-aware picker (inf-sche-prefix)
beats random (inf-sche-none) on TTFT p50, every treatment reports the pool's prefix-cache hit
rate from the pods' own counters — prefix-aware's well above random's — and the flag the
stand-in cannot play (--gpu-memory-utilization) is named in every treatment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.backends.kubernetes.conftest import run_cli
from tests.fixtures.cluster import emulated_cluster

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llm-d-inference-scheduling.yaml"


def test_prefix_aware_picking_wins_with_vllms_default_caching(tmp_path: Path) -> None:
    with emulated_cluster(tmp_path / "emulator", "--gateway-stand-in") as kube:
        run_dir = tmp_path / "llm-d"
        args = ["run", str(EXAMPLE), "--preset", "rehearsal", "--set", "load.requests=240"]
        result = run_cli([*args, "--out", str(run_dir)], kube, tmp_path, timeout=420)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        (criterion,) = json.loads((run_dir / "summary.json").read_text())["criteria"]
        assert criterion["status"] == "PASS", criterion
        folders = sorted(p for p in run_dir.iterdir() if p.name[:3].isdigit())
        assert [p.name.split("__")[1][-6:] for p in folders] == [
            "e-none", "prefix", "che-kv", "-queue"
        ]  # fmt: skip
        rates = {}
        for folder in folders:
            metrics = json.loads((folder / "summary.json").read_text())["server_metrics"]
            rates[folder.name.split("__")[1]] = metrics["prefix_cache_hit_rate"]
            assert any("--gpu-memory-utilization 0.95" in p for p in metrics["problems"])
        none, prefix = (
            rates["scheduling-load-epp-config-inf-sche-none"],
            rates["scheduling-load-epp-config-inf-sche-prefix"],
        )
        assert 0 < none < prefix  # random still hits: vLLM's default caching is on
        assert prefix > 0.6, rates
