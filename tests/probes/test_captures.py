"""Captures around treatments against real things: a Prometheus (Debian's, started by the
session) scraping the simulator, range-queried over each treatment's window and plotted in
report.html; an unreachable Prometheus is a warning, not a failed run; the local backend's
state (worker processes, their logs) dumped before and after each treatment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.clients.promql import PrometheusError, query_range
from testbed.execution.captures import Mark, window

pytestmark = pytest.mark.slow
SRC = Path(__file__).resolve().parents[2] / "src"


def campaign(tmp_path: Path, sim_url: str, capture: str) -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(
        f"""\
name: captures
deployments:
  - {{name: sim, server: external, url: "{sim_url}"}}
load:
  profile: concurrency
  concurrency: 4
  duration_s: 4
  dataset: {{kind: synthetic, input_tokens: 16, output_tokens: 32}}
  selfcheck: {{max_lag_p99_ms: 250, max_cpu_fraction: 1.0}}
execution:
  capture: {capture}
"""
    )
    return path


def run(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testbed", "run", str(path), "--out", "run"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_prometheus_series_over_the_treatment_window_are_kept_and_plotted(
    tmp_path: Path, prometheus_sim: tuple[str, str]
) -> None:
    prometheus, sim = prometheus_sim
    capture = json.dumps(
        {
            "prometheus": {
                "url": prometheus,
                "step_s": 1,
                "queries": {
                    "tokens": "vllm:generation_tokens_total",
                    "running": "sum(vllm:num_requests_running)",
                },
            }
        }
    )
    done = run(tmp_path, campaign(tmp_path, sim, capture))
    assert done.returncode == 0, done.stdout + done.stderr
    folder = next((tmp_path / "run").glob("001__*"))
    document = json.loads((folder / "prometheus.json").read_text())
    assert document["clock"] == "records"
    assert "warning" not in document
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    assert len(records) > 10
    # the window is the load's 4 s (records' clock) plus a second of margin on each side
    span = document["end"] - document["start"]
    assert 4.0 <= span <= 4.0 + 2.0 + 2.0, span
    tokens = document["queries"]["tokens"]["series"]
    assert len(tokens) == 1
    values = [v for t, v in tokens[0]["values"]]
    times = [t for t, v in tokens[0]["values"]]
    assert all(document["start"] <= t <= document["end"] + 1e-6 for t in times)
    assert len(values) >= 4  # a point a second
    # the counter grew by the tokens the load generator received, within one scrape's lag:
    # Prometheus saw the load happen inside this window
    assert values[-1] > values[0]
    client = sum(r.get("usage_output_tokens") or 0 for r in records)
    grown = values[-1] - values[0]
    # no other load ran meanwhile; the last scrape may miss at most the load's last second
    assert 0.5 * client <= grown <= client, (grown, client)
    running = document["queries"]["running"]["series"][0]["values"]
    assert max(v for _, v in running) >= 1
    html = (tmp_path / "run/report.html").read_text()
    load = html[html.index('<section id="load">') :]
    load = load[: load.index("</section>")]
    # beside the treatment's server metrics, in the Load section
    assert "Cluster metrics (Prometheus)" in load
    assert "Prometheus series over the treatment" in load


def test_an_unreachable_prometheus_is_a_warning_not_a_failed_run(
    tmp_path: Path, prometheus_sim: tuple[str, str]
) -> None:
    _, sim = prometheus_sim
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    capture = json.dumps({"state": True, "prometheus": {"url": dead, "queries": {"up": "up"}}})
    done = run(tmp_path, campaign(tmp_path, sim, capture))
    assert done.returncode == 0, done.stdout + done.stderr
    folder = next((tmp_path / "run").glob("001__*"))
    document = json.loads((folder / "prometheus.json").read_text())
    assert "cannot be reached" in document["warning"]
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["status"] == "PASS"
    html = (tmp_path / "run/report.html").read_text()
    assert "cannot be reached" in html
    # state before and after: an external server runs no worker process here
    for name in ("state-before", "state-after"):
        assert (folder / name / "processes.txt").read_text().startswith("WORKER")


def test_state_capture_shows_the_workers_processes_and_log(tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_text(
        """\
name: state
deployments: [{name: stable, server: sim, params: {ttft_ms: 2}}]
load: {requests: 4, dataset: {kind: synthetic, input_tokens: 8, output_tokens: 4}}
execution: {capture: {state: true}}
"""
    )
    done = run(tmp_path, path)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = next((tmp_path / "run").glob("001__*"))
    for name in ("state-before", "state-after"):
        table = (folder / name / "processes.txt").read_text().splitlines()
        assert table[0].split()[:3] == ["WORKER", "PID", "PPID"]
        assert any("serve" in line and "sim" in line for line in table[1:]), table
        logs = list((folder / name / "logs").glob("stable-*.log"))
        assert len(logs) == 1
    after = (folder / "state-after/logs").glob("*.log")
    assert any("POST /v1/" in p.read_text() or p.stat().st_size > 0 for p in after)


def test_window_follows_the_records_clock_and_falls_back_to_the_treatments(
    tmp_path: Path,
) -> None:
    mark = Mark(wall_ns=1_000_000_000_000, mono_ns=5_000_000_000)
    records = tmp_path / "records.jsonl"
    lines = [{"sent_ns": 6_000_000_000, "done_ns": 7_500_000_000, "chunks_ns": [1]}]
    records.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert window(records, mark, 9_000_000_000) == (1001.0, 1002.5, "records")
    # a record from another clock (a probe Job's pod) cannot be placed: the treatment's own
    lines.append({"sent_ns": 1})
    records.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert window(records, mark, 9_000_000_000) == (1000.0, 1004.0, "treatment")


def test_query_range_reports_prometheus_own_error(prometheus_sim: tuple[str, str]) -> None:
    prometheus, _ = prometheus_sim
    with pytest.raises(PrometheusError, match="bad_data"):
        query_range(prometheus, "rate(", 0, 10, 1)
