"""results.s3 against a local S3 server (moto on 127.0.0.1): a run upload lands every file
under prefix/<run-id>/, a model's weights download once, credentials come from the
environment and never show up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from testbed.core.errors import InfrastructureError, InputError
from testbed.results.s3 import run_files, split_url, upload_run
from testbed.servers import models


def make_dir(tmp_path: Path) -> Path:
    run = tmp_path / "20260101-000000-demo"
    (run / "001__sim__abc").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "report.html").write_text("<html></html>")
    (run / "001__sim__abc" / "records.jsonl").write_text('{"a": 1}\n' * 1000)
    (run / "ledger.sqlite-wal").write_text("live journal")
    (run / ".summary.json.x.tmp").write_text("half written")
    return run


def s3(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=endpoint)


@pytest.mark.usefixtures("aws_env")
def test_upload_copies_the_run(tmp_path: Path, s3_server: str) -> None:
    s3(s3_server).create_bucket(Bucket="results")
    run = make_dir(tmp_path)
    done = upload_run(run, "s3://results/ci/nightly", endpoint_url=s3_server)
    assert done.url == "s3://results/ci/nightly/20260101-000000-demo/"
    assert done.files == 3
    listed = s3(s3_server).list_objects_v2(Bucket="results", Prefix="ci/nightly/")
    keys = sorted(o["Key"] for o in listed["Contents"])
    assert keys == [
        "ci/nightly/20260101-000000-demo/001__sim__abc/records.jsonl",
        "ci/nightly/20260101-000000-demo/report.html",
        "ci/nightly/20260101-000000-demo/run.json",
    ]
    head = s3(s3_server).head_object(Bucket="results", Key=keys[1])
    assert head["ContentType"] == "text/html"
    body = s3(s3_server).get_object(Bucket="results", Key=keys[0])["Body"].read()
    assert body == (run / "001__sim__abc" / "records.jsonl").read_bytes()
    # again (after a resume): same keys, nothing duplicated
    upload_run(run, "s3://results/ci/nightly", endpoint_url=s3_server)
    again = s3(s3_server).list_objects_v2(Bucket="results", Prefix="ci/nightly/")
    assert sorted(o["Key"] for o in again["Contents"]) == keys


@pytest.mark.usefixtures("aws_env")
def test_endpoint_from_environment(
    tmp_path: Path, s3_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    s3(s3_server).create_bucket(Bucket="envbucket")
    done = upload_run(make_dir(tmp_path), "s3://envbucket")
    assert done.url == "s3://envbucket/20260101-000000-demo/"


@pytest.mark.usefixtures("aws_env")
def test_missing_bucket_is_an_infrastructure_error_without_secrets(
    tmp_path: Path, s3_server: str
) -> None:
    with pytest.raises(InfrastructureError) as info:
        upload_run(make_dir(tmp_path), "s3://no-such-bucket/x", endpoint_url=s3_server)
    message = str(info.value)
    assert "no-such-bucket" in message
    assert "testing-secret-do-not-log" not in message
    assert "testing-key-id" not in message


def test_credentials_only_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    with pytest.raises(InputError, match="AWS_ACCESS_KEY_ID"):
        upload_run(make_dir(tmp_path), "s3://b/p", endpoint_url="http://127.0.0.1:9")


def test_urls_and_file_selection(tmp_path: Path) -> None:
    assert split_url("s3://b/a/b/") == ("b", "a/b")
    assert split_url("s3://b") == ("b", "")
    with pytest.raises(InputError):
        split_url("https://b/a")
    with pytest.raises(InputError):
        split_url("s3:///a")
    names = [p.name for p in run_files(make_dir(tmp_path))]
    assert names == ["records.jsonl", "report.html", "run.json"]


@pytest.mark.usefixtures("aws_env")
def test_publish_uploads_last_and_reports_failure(tmp_path: Path, s3_server: str) -> None:
    from rich.console import Console

    from testbed.report.run_summary import PublishOptions, publish
    from tests.report.fake_runs import make_run

    s3(s3_server).create_bucket(Bucket="runs")
    run = make_run(tmp_path, "r-upload")
    console = Console(record=True, width=200)
    options = PublishOptions(use_index=False, upload="s3://runs/team", s3_endpoint_url=s3_server)
    assert publish(run, console, options) == 0
    listed = s3(s3_server).list_objects_v2(Bucket="runs", Prefix="team/r-upload/")
    keys = {o["Key"].removeprefix("team/r-upload/") for o in listed["Contents"]}
    assert {"summary.json", "junit.xml", "report.html", "plan.json", "run.json"} <= keys
    assert "uploaded" in console.export_text()
    bad = PublishOptions(use_index=False, upload="s3://missing-bucket", s3_endpoint_url=s3_server)
    assert publish(run, console, bad) == 3  # the verdicts passed; the upload did not
    assert "upload failed" in console.export_text()


@pytest.mark.usefixtures("aws_env")
def test_report_command_uploads(tmp_path: Path, s3_server: str) -> None:
    from testbed.cli import main
    from tests.report.fake_runs import make_run

    s3(s3_server).create_bucket(Bucket="cli")
    run = make_run(tmp_path, "r-cli")
    argv = [
        "report",
        str(run),
        "--no-index",
        "--upload",
        "s3://cli/x",
        "--s3-endpoint-url",
        s3_server,
    ]
    assert main(argv) == 0
    listed = s3(s3_server).list_objects_v2(Bucket="cli", Prefix="x/r-cli/")
    assert any(o["Key"].endswith("/report.html") for o in listed["Contents"])


# -- model weights: s3://bucket/prefix through servers.models.resolve_model ----------------


@pytest.fixture
def weights(s3_server: str, aws_env: None) -> Any:
    """A bucket of model files (created once per session; the server outlives a test)."""
    del aws_env
    store = s3(s3_server)
    if "weights" not in {b["Name"] for b in store.list_buckets()["Buckets"]}:
        store.create_bucket(Bucket="weights")
    store.put_object(Bucket="weights", Key="models/tiny/config.json", Body=b"{}")
    store.put_object(Bucket="weights", Key="models/tiny/sub/model.safetensors", Body=b"x" * 1000)
    store.put_object(Bucket="weights", Key="models/tinyother/config.json", Body=b"{}")
    return store


@pytest.mark.usefixtures("weights")
def test_s3_prefix_downloads_once(tmp_path: Path, s3_server: str) -> None:
    url = "s3://weights/models/tiny"
    folder = models.resolve_model(url, cache=tmp_path, endpoint_url=s3_server)
    assert folder == tmp_path / "s3" / "weights" / "models" / "tiny"
    assert (folder / "sub" / "model.safetensors").read_bytes() == b"x" * 1000
    assert not (tmp_path / "s3" / "weights" / "models" / "tinyother").exists()
    stamp = (folder / "config.json").stat().st_mtime_ns
    models.resolve_model(f"{url}/", cache=tmp_path, endpoint_url=s3_server)
    assert (folder / "config.json").stat().st_mtime_ns == stamp  # unchanged: not fetched again


@pytest.mark.usefixtures("weights")
def test_s3_download_endpoint_from_environment(
    tmp_path: Path, s3_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    folder = models.resolve_model("s3://weights/models/tiny", cache=tmp_path)
    assert (folder / "config.json").is_file()


@pytest.mark.usefixtures("weights")
def test_s3_download_errors_name_the_url_never_the_secret(tmp_path: Path, s3_server: str) -> None:
    with pytest.raises(InputError, match="no objects under s3://weights/nothing"):
        models.resolve_model("s3://weights/nothing", cache=tmp_path, endpoint_url=s3_server)
    with pytest.raises(InfrastructureError, match="s3://missing-bucket/x") as caught:
        models.resolve_model("s3://missing-bucket/x", cache=tmp_path, endpoint_url=s3_server)
    assert "testing-secret-do-not-log" not in str(caught.value)
