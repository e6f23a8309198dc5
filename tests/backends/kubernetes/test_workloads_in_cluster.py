"""Issue 37's workload examples on the emulated cluster: each ``examples/load-*.yaml`` runs
with ``backend.kind: kubernetes``, its probe both here (through a port-forward) and in a
probe Job (``backend.probes: cluster``) — the Job gets the files the campaign names (a
dataset, a trace, sessions' conversations) and the values of its ``${env:}`` headers.

Each example's load is cut to a few requests: what is under test is that the workload
reaches the worker whole and its records come back, not its numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.backends.kubernetes.conftest import LENIENT_SELFCHECK, run_cli

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: The secret a shaped request's header references: set in testbed's environment only.
TOKEN = "TB_WORKLOAD_TOKEN"
#: Example → the --set overrides cutting it to a few requests (and the header secret).
CUTS: dict[str, list[str]] = {
    "load-sessions": ["load.requests=6", "load.concurrency=2", "load.dataset.sessions=3",
                      "load.dataset.turns=2", "load.dataset.think_time_s=0"],
    "load-trace": ["load.dataset.end_s=2", "load.dataset.speed=4"],
    "load-shaped": ["load.requests=6",
                    f'load.headers={{"x-gateway-route": "pool-a",'
                    f' "Authorization": "Bearer ${{env:{TOKEN}}}"}}'],
    "load-adapters": ["load.requests=8"],
    "load-embeddings": ["load.requests=6", "load.dataset.samples=16"],
    "load-responses": ["load.requests=6"],
}  # fmt: skip


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of examples/ (its datasets and traces beside the campaigns)."""
    copy = tmp_path_factory.mktemp("workloads") / "examples"
    shutil.copytree(EXAMPLES, copy, ignore=shutil.ignore_patterns("scale", "toolbox"))
    return copy


@pytest.mark.parametrize("probes", ["controller", "cluster"])
@pytest.mark.parametrize("example", sorted(CUTS))
def test_the_workload_example_runs_on_the_cluster(
    example: str,
    probes: str,
    examples: Path,
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sets = [*CUTS[example], "backend.kind=kubernetes", f"backend.probes={probes}",
            f"load.selfcheck={json.dumps(LENIENT_SELFCHECK)}"]  # fmt: skip
    run_dir = tmp_path / "run"
    args = ["run", str(examples / f"{example}.yaml"), "--out", str(run_dir)]
    args += [x for s in sets for x in ("--set", s)]
    monkeypatch.setenv(TOKEN, "s3cr3t-token")  # testbed's environment: never the campaign's
    result = run_cli(args, kubeconfig, tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summaries = sorted(run_dir.glob("*/summary.json"))
    assert summaries, result.stdout
    for path in summaries:
        summary = json.loads(path.read_text())
        assert summary["verdict"]["status"] == "PASS", (path, summary["verdict"])
        assert summary["records"] > 0
        assert ("probe_job" in summary) == (probes == "cluster")
    assert "s3cr3t-token" not in "".join(p.read_text() for p in run_dir.rglob("*.json"))
