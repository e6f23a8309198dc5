"""``testbed worker --endpoint NAME=URL --stream``: the probe Job's command. Nothing is
provisioned; the probe runs against the URL; stdout carries only stream lines (records in
order, the treatment's files, its summary) while everything else goes to stderr."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.config.loader import load_campaign
from testbed.plan.expand import expand
from testbed.results import stream
from testbed.results.files import read_records
from tests.verdicts import assert_passed

SRC = Path(__file__).resolve().parents[2] / "src"
CAMPAIGN = {
    "name": "stream",
    "backend": {"kind": "kubernetes", "probes": "cluster"},
    "deployments": [{"name": "sim", "server": "sim", "params": {"ttft_ms": 1, "itl_ms": 1}}],
    "load": {
        "profile": "concurrency",
        "concurrency": 2,
        "requests": 9,
        "duration_s": 60,
        "dataset": {"kind": "synthetic", "input_tokens": 8, "output_tokens": 4},
        # the self-check is not the subject: generous on a machine busy with other work
        "selfcheck": {"max_lag_p99_ms": 250.0, "min_rate_ratio": 0.5, "max_cpu_fraction": 1.0},
    },
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    server = subprocess.Popen(
        [sys.executable, "-m", "testbed", "serve", "sim", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=2).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "the simulator did not start"
                assert server.poll() is None, "the simulator exited"
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_stream_carries_every_record_and_the_summary(tmp_path: Path, sim_url: str) -> None:
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    (treatment,) = expand(load_campaign(campaign)).planned()
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "testbed", "worker", str(campaign), "--treatment", treatment.id,
         "--endpoint", f"sim={sim_url}", "--stream", "--out", str(out)],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    items = [stream.decode(line) for line in result.stdout.splitlines()]
    assert None not in items, result.stdout[:2000]  # stdout holds stream lines only
    assert "run directory" in result.stderr  # the console went to stderr
    kinds = [item.kind for item in items if item is not None]
    assert kinds[:9] == ["record"] * 9
    assert kinds[-1] == "summary"
    assert set(kinds[9:-1]) == {"file"}
    records = [item for item in items if item is not None and item.kind == "record"]
    assert [r.seq for r in records] == list(range(1, 10))
    on_disk = read_records(out / treatment.dirname / "records.jsonl")
    assert [r.data for r in records] == on_disk
    summary = items[-1].data if items[-1] is not None else None
    assert summary == json.loads((out / treatment.dirname / "summary.json").read_text())
    assert summary["records"] == 9
    assert_passed(summary)
    assert summary["setup"]["url"] == sim_url  # the given URL, nothing provisioned
    assert summary["workers"][0]["url"] == sim_url
    files = {i.data["path"] for i in items if i is not None and i.kind == "file"}
    assert "latency_cdf.png" in files


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("nope=http://127.0.0.1:1", "nope is not a deployment of the campaign; known: sim"),
        ("sim", "give DEPLOYMENT=URL"),
        ("sim=ftp://x", "give DEPLOYMENT=URL"),
    ],
)
def test_bad_endpoints_are_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], endpoint: str, message: str
) -> None:
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    (treatment,) = expand(load_campaign(campaign)).planned()
    out = tmp_path / "run"
    code = main(["worker", str(campaign), "--treatment", treatment.id, "--endpoint", endpoint,
                 "--out", str(out)])  # fmt: skip
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_deployment_without_its_endpoint_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two = json.loads(json.dumps(CAMPAIGN))
    two["deployments"].append({"name": "other", "server": "sim"})
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(two))
    other = next(t for t in expand(load_campaign(campaign)).planned() if "other" in t.dirname)
    given = ["--endpoint", "sim=http://127.0.0.1:1", "--out", str(tmp_path / "run")]
    code = main(["worker", str(campaign), "--treatment", other.id, *given])
    assert code == 2
    assert "give --endpoint other=URL" in capsys.readouterr().err


def test_decode_ignores_log_noise() -> None:
    line = stream.encode("record", {"a": 1}, 3)
    assert stream.decode(line) == stream.Item("record", {"a": 1}, 3)
    other_version = '{"testbed.stream": 2, "kind": "record"}'
    other_kind = '{"testbed.stream": 1, "kind": "other"}'
    for noise in ("", "plain text", '{"a": 1}', line[:-5], other_version, other_kind):
        assert stream.decode(noise) is None


def test_a_streamed_file_cannot_leave_the_treatment_directory(tmp_path: Path) -> None:
    assert stream.write_file(tmp_path, {"path": "../x", "b64": ""}) is None
    assert stream.write_file(tmp_path, {"path": "/etc/x", "b64": ""}) is None
    written = stream.write_file(tmp_path, {"path": "plots/a.png", "b64": "aGk="})
    assert written == tmp_path / "plots" / "a.png"
    assert written.read_bytes() == b"hi"
