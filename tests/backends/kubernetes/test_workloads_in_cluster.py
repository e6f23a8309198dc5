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
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.backends.kubernetes.conftest import LENIENT_SELFCHECK, run_cli

pytestmark = [pytest.mark.kubernetes, pytest.mark.cluster]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: The secret a shaped request's header references: set in testbed's environment only.
TOKEN = "TB_WORKLOAD_TOKEN"
#: Case → the example it runs and the --set overrides cutting it to a few requests (and the
#: header secret); "stages" is the adapters' mix as a load.stages list of two rates.
CUTS: dict[str, list[str]] = {
    "load-sessions": ["load.requests=6", "load.concurrency=2", "load.dataset.sessions=3",
                      "load.dataset.turns=2", "load.dataset.think_time_s=0"],
    "load-trace": ["load.dataset.end_s=2", "load.dataset.speed=4"],
    "load-shaped": ["load.requests=6",
                    f'load.headers={{"x-gateway-route": "pool-a",'
                    f' "Authorization": "Bearer ${{env:{TOKEN}}}"}}'],
    "load-adapters": ["load.requests=8"],
    "load-embeddings": ["load.requests=6", "load.dataset.samples=16"],
    "load-responses": ["load.requests=6", 'matrix={"factors": {"load.api": ["responses"]}}'],
    "load-stages": ["load.profile=rate", "load.requests=null",
                    'load.stages=[{"rate": 20, "requests": 4}, {"rate": 40, "requests": 4}]'],
}  # fmt: skip
#: A case not named after its example runs this one.
EXAMPLE_OF = {"load-stages": "load-adapters"}


#: How many runs go at once: their waits (pods starting, the emulator's watches) overlap.
PARALLEL = 4


def args_of(examples: Path, example: str, probes: str, out: Path) -> list[str]:
    sets = [*CUTS[example], "backend.kind=kubernetes", f"backend.probes={probes}",
            f"load.selfcheck={json.dumps(LENIENT_SELFCHECK)}"]  # fmt: skip
    file = examples / f"{EXAMPLE_OF.get(example, example)}.yaml"
    args = ["run", str(file), "--out", str(out)]
    return args + [x for s in sets for x in ("--set", s)]


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, kubeconfig: Path
) -> Iterator[dict[tuple[str, str], tuple[Path, subprocess.CompletedProcess[str]]]]:
    """Every example run both ways on the session's cluster, :data:`PARALLEL` at a time:
    (example, probes) → (its run directory, the finished ``testbed run``)."""
    work = tmp_path_factory.mktemp("workloads")
    examples = work / "examples"
    shutil.copytree(EXAMPLES, examples, ignore=shutil.ignore_patterns("scale", "toolbox"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv(TOKEN, "s3cr3t-token")  # testbed's environment: never the campaign's

        def run(key: tuple[str, str]) -> tuple[Path, subprocess.CompletedProcess[str]]:
            out = work / "-".join(key)  # the run id: each run has a namespace of its own
            return out, run_cli(args_of(examples, *key, out), kubeconfig, work)

        keys = [(e, p) for e in sorted(CUTS) for p in ("controller", "cluster")]
        with ThreadPoolExecutor(PARALLEL) as pool:
            yield dict(zip(keys, pool.map(run, keys), strict=True))


@pytest.mark.parametrize("probes", ["controller", "cluster"])
@pytest.mark.parametrize("example", sorted(CUTS))
def test_the_workload_example_runs_on_the_cluster(
    example: str,
    probes: str,
    runs: dict[tuple[str, str], tuple[Path, subprocess.CompletedProcess[str]]],
) -> None:
    run_dir, result = runs[example, probes]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summaries = sorted(run_dir.glob("*/summary.json"))
    assert summaries, result.stdout
    for path in summaries:
        summary = json.loads(path.read_text())
        assert summary["verdict"]["status"] == "PASS", (path, summary["verdict"])
        assert summary["records"] > 0
        assert ("probe_job" in summary) == (probes == "cluster")
        if example == "load-stages":
            assert [s["stage"] for s in summary["stages"]] == ["rate-20", "rate-40"]
            assert summary["records"] == 8  # each stage's count, all of it
    assert "s3cr3t-token" not in "".join(p.read_text() for p in run_dir.rglob("*.json"))
