"""A KServe-shaped stack on the emulator with the InferenceService stand-in: the shipped
example and InferenceServices copied byte for byte from KServe's docs (tests/fixtures/kserve)
pass load at their real route (``/openai/v1/…``) under their real model name (the last
``--model_name``), through the URL read from the custom resource's status; a campaign
written for ``/v1/…`` gets KServe's 404; an InferenceService whose predictor cannot start is
an ERROR carrying its Ready condition's own reason and message. Nothing is left either way.
(A private emulator: the stand-in serves kinds the session's cluster does not have.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemu.standins.kserve import crd
from testbed.clients.kube import Kube
from tests.backends.kubernetes.conftest import REAL_KUBECONFIG, SRC, kube_of, leftovers, run_cli
from tests.fixtures.cluster import emulated_cluster
from tests.verdicts import assert_passed

pytestmark = [
    pytest.mark.kubernetes,
    pytest.mark.cluster,
    pytest.mark.skipif(bool(REAL_KUBECONFIG), reason="needs the emulator's KServe stand-in"),
]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
DOCS = Path(__file__).resolve().parents[2] / "fixtures" / "kserve"
ISVCS = "/apis/serving.kserve.io/v1beta1/inferenceservices"


@pytest.fixture(scope="module")
def kserve_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with emulated_cluster(tmp_path_factory.mktemp("kserve"), "--kserve-stand-in") as path:
        yield path


@pytest.fixture
def kube(kserve_cluster: Path) -> Iterator[Kube]:
    with kube_of(kserve_cluster) as client:
        yield client


def isvcs_left(kube: Kube, run_id: str) -> list[str]:
    answer = kube.call("GET", ISVCS, "list", query={"labelSelector": f"testbed.io/run={run_id}"})
    return [*leftovers(kube, run_id), *(i["metadata"]["name"] for i in answer["items"])]


def test_the_stand_in_serves_the_shipped_crd(kube: Kube) -> None:
    served = kube.call("GET", "/apis/serving.kserve.io/v1beta1", "discover")
    (resource,) = [r for r in served["resources"] if r["name"] == "inferenceservices"]
    assert resource["kind"] == "InferenceService"
    assert resource["namespaced"] is True
    assert crd()["spec"]["names"]["shortNames"] == ["isvc"]


def test_the_kserve_example_passes_through_the_status_url(
    tmp_path: Path, kserve_cluster: Path, kube: Kube
) -> None:
    run_dir = tmp_path / "kserve-ok"
    result = run_cli(
        [
            "run",
            str(EXAMPLES / "stack-kserve.yaml"),
            "--preset",
            "smoke",
            "--out",
            str(run_dir),
            "--set",
            "deployments.isvc.startup_timeout_s=90",
        ],
        kserve_cluster,
        tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = run_dir.glob("*/summary.json")
    summary = json.loads(path.read_text())
    assert_passed(summary)
    assert summary["records"] == 8
    (worker,) = summary["workers"]
    # The URL came from status.url (the predictor Service's DNS name), reached from here.
    assert (
        worker["cluster_url"] == "http://$(SMOLLM2_PREDICTOR_SERVICE_HOST)"
        ":$(SMOLLM2_PREDICTOR_SERVICE_PORT_SMOLLM2_PREDICTOR)"
    )  # KServe names the Service's port after the Service when the container declares none
    assert worker["url"].startswith("http://127.0.0.1:")
    assert isvcs_left(kube, "kserve-ok") == []


def test_a_predictor_that_cannot_start_is_an_error_with_its_reason(
    tmp_path: Path, kserve_cluster: Path, kube: Kube
) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "isvc.yaml").write_text(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
        "metadata:\n  name: broken\n  annotations: {emulator.testbed.io/fault: image-pull}\n"
        "spec:\n  predictor:\n    model: {modelFormat: {name: huggingface}}\n"
    )
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(
        json.dumps({
            "name": "kserve-broken",
            "backend": "kubernetes",
            "deployments": [{
                "name": "isvc", "server": "manifests", "manifests": "stack", "model": "broken",
                "ready": [{"kind": "InferenceService", "name": "broken", "condition": "Ready",
                           "timeout_s": 60}],
                "endpoint": {"url_from": "status.url", "kind": "InferenceService",
                             "name": "broken"},
            }],
            "load": {"profile": "concurrency", "concurrency": 1, "requests": 2,
                     "dataset": {"kind": "synthetic", "input_tokens": 4, "output_tokens": 4}},
            "execution": {"retries": 0},
        })
    )  # fmt: skip
    run_dir = tmp_path / "kserve-broken"
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kserve_cluster, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (path,) = run_dir.glob("*/summary.json")
    reason = json.loads(path.read_text())["verdict"]["reason"]
    # Two watchers see the failure and either may speak first: the wait for the
    # InferenceService's Ready condition ("InferenceService/broken to be Ready: Ready=False
    # (ErrImagePull) … pod broken-predictor-…") or the stack's pod watch ("pod
    # broken-predictor-…: ErrImagePull … not retried"). Both name the pod and the cause.
    assert "ErrImagePull" in reason or "ImagePullBackOff" in reason, reason
    assert "pod broken-predictor-" in reason, reason  # the stand-in's message names the pod
    assert isvcs_left(kube, "kserve-broken") == []


def test_an_endpoint_service_that_never_appears_is_an_error(
    tmp_path: Path, kserve_cluster: Path, kube: Kube
) -> None:
    # Validation lets it pass (an operator of the stack might make it); once the stack is
    # ready the Service is looked up, and its absence is an ERROR naming it.
    run_dir = tmp_path / "kserve-nosvc"
    result = run_cli(
        ["run", str(EXAMPLES / "stack-kserve.yaml"), "--preset", "smoke", "--out", str(run_dir),
         "--set", "deployments.isvc.startup_timeout_s=90",
         "--set", 'deployments.isvc.endpoint={"service": "smollm2-nope", "port": 80}'],
        kserve_cluster,
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    (path,) = run_dir.glob("*/summary.json")
    reason = json.loads(path.read_text())["verdict"]["reason"]
    assert (
        "names Service smollm2-nope, which does not exist in namespace testbed-kserve-nosvc"
        in reason
    )
    assert isvcs_left(kube, "kserve-nosvc") == []


def test_kubectl_applies_waits_for_and_lists_an_inference_service(
    tmp_path: Path, kserve_cluster: Path
) -> None:
    env = {**os.environ, "KUBECONFIG": str(kserve_cluster)}

    def kubectl(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", *args], input=stdin, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    isvc = (
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
        "metadata: {name: tiny, namespace: kserve-kubectl}\n"
        "spec: {predictor: {model: {modelFormat: {name: huggingface},"
        " storageUri: 'hf://HuggingFaceTB/SmolLM2-135M-Instruct'}}}\n"
    )
    kubectl("create", "namespace", "kserve-kubectl")
    try:
        kubectl("apply", "-f", "-", stdin=isvc)
        kubectl("wait", "--for=condition=Ready", "isvc/tiny", "-n", "kserve-kubectl",
                "--timeout=90s")  # fmt: skip
        listing = kubectl("get", "isvc", "-n", "kserve-kubectl")
        assert "http://tiny-predictor.kserve-kubectl.svc.cluster.local" in listing
        assert "tiny-predictor" in kubectl("get", "deployment,service", "-n", "kserve-kubectl")
        kubectl("delete", "isvc/tiny", "-n", "kserve-kubectl", "--wait=true")
        # Its predictor goes with it (owned by the InferenceService).
        deadline = time.monotonic() + 60
        while "tiny-predictor" in kubectl("get", "deployment", "-n", "kserve-kubectl"):
            assert time.monotonic() < deadline, "the predictor outlived its InferenceService"
            time.sleep(0.2)
    finally:
        kubectl("delete", "namespace", "kserve-kubectl", "--wait=false")


def test_a_stack_that_fails_while_serving_ends_the_treatment_as_an_error(
    tmp_path: Path, kserve_cluster: Path, kube: Kube
) -> None:
    # While the load runs, the InferenceService's Ready goes False (as KServe says when a
    # revision fails): the treatment is an ERROR in its words, not a FAIL of the server.
    run_dir = tmp_path / "kserve-lost"
    child = subprocess.Popen(
        [sys.executable, "-m", "testbed", "run", str(EXAMPLES / "stack-kserve.yaml"),
         "--preset", "smoke", "--out", str(run_dir), "--set", "load.requests=100000",
         "--set", "load.duration_s=90",
         "--set", "load.concurrency=1", "--set", "deployments.isvc.startup_timeout_s=90",
         "--set", "execution.retries=0"],
        env={**os.environ, "KUBECONFIG": str(kserve_cluster), "PYTHONPATH": str(SRC)},
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(p.stat().st_size for p in run_dir.glob("0*/records.jsonl")):
            assert time.monotonic() < deadline, "the load never started"
            assert child.poll() is None, child.communicate()[0]
            time.sleep(0.1)
        status = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "RevisionFailed",
                    "message": "revision smollm2-00002 failed to pull",
                }
            ]
        }
        kube.call(
            "PATCH", "/apis/serving.kserve.io/v1beta1/namespaces/testbed-kserve-lost"
            "/inferenceservices/smollm2/status", "fail it", body={"status": status},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        output, _ = child.communicate(timeout=150)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 3, output
    (path,) = run_dir.glob("*/summary.json")
    reason = json.loads(path.read_text())["verdict"]["reason"]
    assert (
        "InferenceService/smollm2 failed: Ready=False (RevisionFailed): revision smollm2-00002"
        in reason
    )
    assert isvcs_left(kube, "kserve-lost") == []


def docs_campaign(tmp_path: Path, isvc: str, model: str, path: str | None) -> Path:
    """A campaign applying a docs InferenceService as written (not templated), reaching it
    through its status URL under ``path``."""
    endpoint: dict[str, Any] = {"url_from": "status.url", "kind": "InferenceService",
                                "name": isvc}  # fmt: skip
    if path is not None:
        endpoint["path"] = path
    campaign = tmp_path / f"{isvc}.yaml"
    campaign.write_text(
        json.dumps({
            "name": isvc,
            "backend": "kubernetes",
            "deployments": [{
                "name": "isvc", "server": "manifests", "manifests": str(DOCS / f"{isvc}.yaml"),
                "templated": False, "model": model,
                "ready": [{"kind": "InferenceService", "name": isvc, "condition": "Ready",
                           "timeout_s": 90}],
                "endpoint": endpoint,
            }],
            "load": {"profile": "concurrency", "concurrency": 2, "requests": 6, "api": "chat",
                     "dataset": {"kind": "synthetic", "input_tokens": 16, "output_tokens": 8}},
            "execution": {"retries": 0},
        })
    )  # fmt: skip
    return campaign


@pytest.mark.parametrize(
    ("isvc", "model", "namespace"),
    [("qwen-llm", "qwen", "kserve-test"), ("huggingface-llama3", "llama3", None)],
)
def test_a_docs_inference_service_passes_at_its_openai_route_under_its_model_name(
    tmp_path: Path, kserve_cluster: Path, kube: Kube, isvc: str, model: str, namespace: str | None
) -> None:
    # qwen-llm names its namespace, which the tutorial's first step creates.
    if namespace is not None:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    run_dir = tmp_path / f"docs-{model}"
    campaign = docs_campaign(tmp_path, isvc, model, "/openai")
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kserve_cluster, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (summary_path,) = run_dir.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert_passed(summary)
    assert summary["records"] == 6
    lines = next(run_dir.glob("0*/records.jsonl")).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert all(r.get("error") in (None, "") for r in records), records[:2]
    assert isvcs_left(kube, f"docs-{model}") == []


def test_a_campaign_written_for_v1_routes_gets_kserves_404(
    tmp_path: Path, kserve_cluster: Path, kube: Kube
) -> None:
    # The docs' CPU example (vLLM flags, env, hf:// storage), reached without /openai: every
    # request is refused 404 by the model server, as on KServe — not a pass.
    run_dir = tmp_path / "docs-nopath"
    campaign = docs_campaign(tmp_path, "qwen-cpu", "qwen2", None)
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kserve_cluster, tmp_path)
    assert result.returncode != 0, result.stdout + result.stderr
    (summary_path,) = run_dir.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert summary["verdict"]["status"] != "PASS"
    assert "404" in json.dumps(summary)
    assert isvcs_left(kube, "docs-nopath") == []


def test_a_name_kserves_webhook_refuses_is_refused_here_too(
    tmp_path: Path, kserve_cluster: Path, kube: Kube
) -> None:
    # The model server's README names its example huggingface-llama3.1: KServe's validating
    # webhook denies the dot (its Service name would be no DNS-1035 label), and so does this.
    run_dir = tmp_path / "docs-dot"
    campaign = docs_campaign(tmp_path, "huggingface-llama3.1", "llama3.1", "/openai")
    result = run_cli(["run", str(campaign), "--out", str(run_dir)], kserve_cluster, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    (summary_path,) = run_dir.glob("*/summary.json")
    reason = json.loads(summary_path.read_text())["verdict"]["reason"]
    assert "inferenceservice.kserve-webhook-server.validator.webhook" in reason
    assert 'the InferenceService "huggingface-llama3.1" is invalid' in reason
    assert isvcs_left(kube, "docs-dot") == []
