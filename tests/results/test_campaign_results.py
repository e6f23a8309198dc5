"""The campaign's ``results:`` section is what a run publishes by default (field audit):
``dir`` holds new run directories, ``index`` records the run, ``upload`` and
``s3_endpoint_url`` copy it to S3 — each test fails if its field is ignored."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
import yaml
from rich.console import Console

from testbed.config.loader import load_campaign_text
from testbed.execution.pipeline import open_new
from testbed.execution.run import RunOptions
from testbed.report.run_summary import PublishOptions, publish
from testbed.results.index import ResultsIndex
from testbed.results.rundir import RESOLVED
from tests.report.fake_runs import make_run

CAMPAIGN = "name: res\ndeployments: [{name: s, server: sim}]\nload: {requests: 1}\n"


def test_results_dir_holds_new_run_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    loaded = load_campaign_text(CAMPAIGN + "results: {dir: nightly/runs}\n", "c.yaml")
    run_dir, _ = open_new(loaded, RunOptions())
    assert run_dir.path.resolve().parent == tmp_path / "nightly" / "runs"


@pytest.mark.usefixtures("aws_env")
def test_index_upload_and_endpoint_come_from_the_campaign(tmp_path: Path, s3_server: str) -> None:
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="camp")
    run = make_run(tmp_path, "r-campaign")
    database = tmp_path / "index.db"
    results = {
        "index": f"sqlite:///{database}",
        "upload": "s3://camp/nightly",
        "s3_endpoint_url": s3_server,
    }
    (run / RESOLVED).write_text(yaml.safe_dump({"name": "res", "results": results}))
    console = Console(record=True, width=200)
    assert publish(run, console, PublishOptions()) == 0
    with ResultsIndex(f"sqlite:///{database}") as index:
        assert [row.run_id for row in index.runs()] == ["r-campaign"]
    listed = boto3.client("s3", endpoint_url=s3_server).list_objects_v2(
        Bucket="camp", Prefix="nightly/r-campaign/"
    )
    assert listed["KeyCount"] > 0
    assert "uploaded" in console.export_text()


def test_results_thresholds_set_what_compare_calls_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.cli import main

    make_run(tmp_path, "base", seed=1)
    candidate = make_run(tmp_path, "slow", seed=2, ttft_ms=26.0)  # 30 % slower TTFT
    argv = ["compare", str(tmp_path / "base"), str(candidate), "--no-index"]
    assert main(argv) == 1  # the default threshold (5 %) calls it a regression
    (candidate / RESOLVED).write_text(
        yaml.safe_dump({"name": "res", "results": {"thresholds": {"*": "60%"}}})
    )
    assert main(argv) == 0  # the campaign allows 60 %
    capsys.readouterr()
