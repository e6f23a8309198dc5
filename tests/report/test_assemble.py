"""``testbed report`` over many run folders: the folders an exported pipeline's tasks leave
(one ``testbed worker`` each, as the exported task runs it), given as local folders or as an
S3 prefix (moto), become one run — the whole plan, NOT RUN for the treatment no folder
holds, each treatment's provenance in summary.json and junit.xml, the same exit code rules
as a local run."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.config.loader import load_campaign
from testbed.plan.expand import expand
from tests.fixtures.s3 import moto_client

CAMPAIGN = {
    "name": "spread",
    "deployments": [{"name": "sim", "server": "sim", "params": {"ttft_ms": 1, "itl_ms": 1}}],
    "load": {
        "profile": "concurrency",
        "requests": 6,
        "dataset": {"kind": "synthetic", "input_tokens": 8, "output_tokens": 4},
        "selfcheck": {"max_lag_p99_ms": 500.0, "min_rate_ratio": 0.2, "max_cpu_fraction": 1.0},
    },
    "matrix": {"factors": {"load.concurrency": [1, 2, 3]}},
}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[Path]]:
    """The campaign file, its treatment dirnames and two task folders: each made by
    ``testbed worker FILE --treatment ID --out RESULTS/<task>`` (the exported task's
    command) for the first two treatments; the third never ran."""
    root = tmp_path_factory.mktemp("tasks")
    campaign = root / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    treatments = expand(load_campaign(campaign)).planned()
    assert len(treatments) == 3
    folders = []
    for n, treatment in enumerate(treatments[:2]):
        out = root / "results" / f"task-{n}"
        code = main(["worker", str(campaign), "--treatment", treatment.id, "--out", str(out)])
        assert code == 0, f"worker for {treatment.id} exited {code}"
        folders.append(out)
    return campaign, [t.dirname for t in treatments], folders


def _check(out: Path, dirnames: list[str], origins: list[str]) -> None:
    summary = json.loads((out / "summary.json").read_text())
    rows = {row["dir"]: row for row in summary["treatments"]}
    assert list(rows) == dirnames  # the whole plan, in plan order
    assert [rows[d]["status"] for d in dirnames] == ["PASS", "PASS", "NOT RUN"]
    assert rows[dirnames[2]]["reason"] == "not run: no run folder holds it"
    assert [rows[d]["source"] for d in dirnames] == [*origins, None]
    assert rows[dirnames[0]]["metrics"]["ttft_ms.p50"] > 0
    assert summary["status"] == "NOT RUN"
    assert {s["origin"] for s in summary["run"]["sources"]} == set(origins)
    junit = ET.parse(out / "junit.xml").getroot()
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    assert cases[dirnames[0]].find("properties/property").get("value") == origins[0]
    assert cases[dirnames[2]].find("error").get("type") == "NOT RUN"
    html = (out / "report.html").read_text()
    assert 'id="sources"' in html
    assert all(f"from <code>{origin}</code>" in html for origin in origins)
    for d in dirnames[:2]:  # the treatment folders (records, plots) came along
        assert (out / d / "records.jsonl").is_file()


def test_local_folders_assemble_into_one_run(
    tasks: tuple[Path, list[str], list[Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, dirnames, folders = tasks
    out = tmp_path / "assembled"
    code = main(["report", *map(str, folders), "--out", str(out), "--no-index"])
    assert code == 3  # a treatment never run is exit 3, as in a local run
    _check(out, dirnames, [str(f) for f in folders])
    # an assembled run is a run like any other: compare takes it — no change between it and
    # itself for the two treatments run; exit 3 since the NOT RUN one cannot be compared
    capsys.readouterr()
    assert main(["compare", str(out), str(out)]) == 3
    compared = capsys.readouterr().out
    assert "not compared (a side has no result)" in compared
    assert "no regression" in compared
    # the parent of the task folders is one source too, found by its run folders
    again = tmp_path / "again"
    assert main(["report", str(folders[0].parent), "--out", str(again), "--no-index"]) == 3
    _check(again, dirnames, [str(f) for f in folders])


def test_an_s3_prefix_assembles_like_the_pipeline_uploaded_it(
    tasks: tuple[Path, list[str], list[Path]],
    tmp_path: Path,
    moto_s3: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from testbed.results.s3 import upload_run

    _, dirnames, folders = tasks
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    moto_client(moto_s3).create_bucket(Bucket="runs")
    for folder in folders:  # what each task's `--upload s3://runs/exp/<run-name>` does
        upload_run(folder, "s3://runs/exp/pr-1", moto_s3)
    out = tmp_path / "from-s3"
    argv = ["report", "s3://runs/exp/pr-1", "--out", str(out), "--no-index"]
    assert main([*argv, "--s3-endpoint-url", moto_s3]) == 3
    _check(out, dirnames, [f"s3://runs/exp/pr-1/{f.name}" for f in folders])


def test_folders_of_two_campaigns_are_refused(
    tasks: tuple[Path, list[str], list[Path]], tmp_path: Path
) -> None:
    import shutil

    _, _, folders = tasks
    other = tmp_path / "other"
    shutil.copytree(folders[1], other)
    meta = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**meta, "campaign_hash": "elsewhere"}))
    code = main(["report", str(folders[0]), str(other), "--out", str(tmp_path / "x")])
    assert code == 2
    assert not (tmp_path / "x").exists()
