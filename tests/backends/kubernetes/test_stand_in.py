"""TGI and TGIS deployments rehearsed on the emulator (``--tgi-stand-in``): the images'
launcher command lines run testbed's reference server, so the campaign's cases pass over
TGIS's gRPC and TGI's HTTP, with the weights fetched from S3 as on a cluster — a decoder
(SmolLM2) and an encoder-decoder (tiny-t5, flan-t5's architecture) alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.backends.kubernetes.conftest import leftovers_at, run_cli
from tests.fixtures.cluster import emulated_cluster

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow, pytest.mark.reference]
CASES = Path(__file__).resolve().parents[3] / "examples" / "cases"


def campaign(
    tmp_path: Path, server: str, protocol: str | None, moto_s3: str, model: str = "smollm2-135m"
) -> Path:
    """One deployment of ``server`` serving ``model`` from S3; its correctness cases (the
    model's goldens) over ``protocol`` (None: each case's own, OpenAI by default)."""
    cases = CASES / ("tiny-t5.yaml" if model == "tiny-t5" else "smollm2.yaml")
    data = {
        "name": f"{server}-stand-in",
        "backend": {"kind": "kubernetes", "ready_timeout_s": 300},
        "deployments": [
            {
                "name": server,
                "server": server,
                "model": f"s3://models/{model}",
                "s3_endpoint_url": moto_s3,
                "params": {"max_batch_size": 4}
                | ({"deployment_framework": "tgis_native"} if server == "tgis" else {}),
                "resources": {"gpu": None, "cpu": 1, "memory_gb": 2},
            }
        ],
        "correctness": {"cases": [str(cases)], **({"protocol": protocol} if protocol else {})},
    }
    path = tmp_path / f"{server}-{model}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def statuses(run_dir: Path, protocol: str) -> list[str]:
    (records,) = run_dir.glob("*/records.jsonl")
    cases = [json.loads(line) for line in records.read_text().splitlines()]
    return [c["status"] for c in cases if c.get("protocol") == protocol]


def test_tgi_and_tgis_images_pass_their_cases_on_the_stand_in(
    tmp_path: Path, moto_s3: str, models_bucket: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "seed-004-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "seed-004-secret")
    with emulated_cluster(tmp_path / "emulator", "--tgi-stand-in") as kubeconfig:
        runs = (("tgis", "tgis", "smollm2-135m"), ("tgi", None, "smollm2-135m"),
                ("tgis", "tgis", "tiny-t5"))  # fmt: skip
        for server, protocol, model in runs:
            run_dir = tmp_path / f"k8s-{server}-{model}"
            path = campaign(tmp_path, server, protocol, moto_s3, model)
            result = run_cli(["run", str(path), "--out", str(run_dir)], kubeconfig, tmp_path, 600)
            assert result.returncode == 0, result.stdout + result.stderr
            ran = statuses(run_dir, server)
            assert ran.count("PASS") >= 5, ran
            assert "FAIL" not in ran, ran
            log = next(run_dir.glob("workers/*/server.log")).read_text()
            assert "is played by testbed's reference server" in log.splitlines()[0]
            assert leftovers_at(kubeconfig, f"k8s-{server}-{model}") == []
