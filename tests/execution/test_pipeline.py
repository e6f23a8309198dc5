"""The pipeline end to end on simulator workers: layout, ledger, errors, retries."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from testbed.config.loader import load_campaign_text
from testbed.execution.events import Silent
from testbed.execution.grouping import make_worker_sets
from testbed.execution.pipeline import execute, open_new
from testbed.execution.run import RunOptions
from testbed.plan.expand import expand
from testbed.results.files import read_records
from testbed.results.ledger import Ledger

CAMPAIGN = textwrap.dedent(
    """\
    name: pipe
    deployments:
      - name: fast
        server: sim
        params: {ttft_ms: 5, itl_ms: 5}  # paced: the load generator must not be the bottleneck
      - name: broken
        server: sim
        startup_timeout_s: 0.3
        params: {faults: {slow_start_s: 30}}
    matrix:
      factors:
        load.concurrency: [1, 2]
    load:
      profile: concurrency
      requests: 6
      dataset: {kind: synthetic, input_tokens: 16, output_tokens: 4}
      # generous: a busy machine must not turn PASS into INCONCLUSIVE here (not the subject)
      selfcheck: {max_lag_p99_ms: 250, max_cpu_fraction: 1.0}
    execution:
      strategy: parallel
      retries: 1
    """
)


class WorkerStarts(Silent):
    """Counts how often each worker was started."""

    def __init__(self) -> None:
        self.starts: dict[str, int] = {}

    def worker(self, worker_id: str, state: str) -> None:
        if state == "starting":
            self.starts[worker_id] = self.starts.get(worker_id, 0) + 1


async def test_run_layout_ledger_and_infrastructure_errors(tmp_path: Path) -> None:
    loaded = load_campaign_text(CAMPAIGN, "pipe.yaml")
    run_dir, plan = open_new(loaded, RunOptions(out=tmp_path / "run"))
    observer = WorkerStarts()
    outcome = await execute(loaded, run_dir, plan, RunOptions(observer=observer))
    root = run_dir.path
    for name in ("run.json", "campaign.resolved.yaml", "plan.json", "ledger.sqlite"):
        assert (root / name).is_file(), name
    statuses = {
        (t.slug.split("-load")[0], t.params["load.concurrency"]): outcome.verdicts[t.id].status
        for t in plan.treatments
    }
    reasons = [outcome.verdicts[t.id].reason for t in plan.treatments]
    assert statuses == {
        ("fast", 1): "PASS",
        ("fast", 2): "PASS",
        ("broken", 1): "ERROR",
        ("broken", 2): "ERROR",
    }, reasons
    for treatment in plan.treatments:
        folder = root / treatment.dirname
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["id"] == treatment.id
        if treatment.slug.startswith("fast"):
            assert len(read_records(folder / "records.jsonl")) == 6
            assert (folder / "server.log").is_file()
    broken = [t for t in plan.treatments if t.slug.startswith("broken")]
    reason = outcome.verdicts[broken[0].id].reason
    assert "not ready after 0.3 s" in reason
    # Two attempts at starting the broken worker (retries: 1), then ERROR for both of its
    # treatments; the fast worker started once for both of its own.
    workers = {plan.workers[w].config.name: w for w in plan.workers}
    assert observer.starts == {workers["broken"]: 2, workers["fast"]: 1}
    with Ledger(root / "ledger.sqlite") as ledger:
        states = ledger.states()
        assert {states[t.id][1] for t in broken} == {"ERROR"}
        assert ledger.to_run() == {t.id for t in broken}
    assert not list((root / "pids").glob("*.json"))


def test_ab_workers_form_one_worker_set_and_unroll_splits() -> None:
    text = CAMPAIGN.replace("execution:", "ab: {stable: fast, canary: broken}\nexecution:")
    loaded = load_campaign_text(text, "ab.yaml")
    plan = expand(loaded)
    worker_sets = make_worker_sets(plan, plan.planned())
    assert len(worker_sets) == 1
    assert set(worker_sets[0].workers) == set(plan.workers)
    unrolled = make_worker_sets(plan, plan.planned(), ["load.concurrency"])
    assert sorted(map(str, (worker_set.group for worker_set in unrolled))) == [
        "(1,)",
        "(2,)",
        "(None,)",
    ]


def test_bad_case_file_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    import pytest

    from testbed.core.errors import CampaignError

    cases = tmp_path / "cases.yaml"
    cases.write_text("- name: x\n  request: {prompt: hi, max_tokns: 3}\n")
    text = f"name: c\ndeployments: [{{name: s, server: sim}}]\ncorrectness: {{cases: [{cases}]}}\n"
    loaded = load_campaign_text(text, "c.yaml")
    with pytest.raises(CampaignError, match=r"cases.yaml:2:\d+: .*did you mean 'max_new_tokens'"):
        open_new(loaded, RunOptions(out=tmp_path / "run"))
    assert not (tmp_path / "run").exists()
