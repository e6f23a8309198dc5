"""The apply step ``testbed export`` prints (and docs/export.md shows), run as written with the
real kubectl and envsubst against the emulator, which enforces kube-apiserver's size limits
(security suite): llm-d's inference-scheduling campaign ships its stack's CRDs, a ~740 KB
ConfigMap that a client-side ``kubectl apply`` cannot store (its last-applied-configuration
annotation would pass 256 KiB) and the printed server-side apply can. A campaign whose
ConfigMap would pass 1 MiB is refused by the export itself (exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.execution.export import MAIN_FILE, apply_commands

pytestmark = [pytest.mark.kubernetes, pytest.mark.security]

ROOT = Path(__file__).resolve().parents[2]
CRDS = Path(__file__).resolve().parent / "crds"
KUBECTL = shutil.which("kubectl") or "kubectl"


def _shell(line: str, kubeconfig: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": os.environ["PATH"],
           "AWS_ACCESS_KEY_ID": "key-id", "AWS_SECRET_ACCESS_KEY": "not-a-real-secret"}  # fmt: skip
    return subprocess.run(
        ["/bin/sh", "-c", line], cwd=folder, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_the_printed_apply_step_stores_a_large_campaign(
    tmp_path: Path, cluster_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = "export-kubectl"
    code = main([
        "export", "tekton", str(ROOT / "examples" / "inference-scheduling.yaml"),
        "--namespace", namespace, "--upload", "s3://results/llm-d", "--out", str(tmp_path / "out"),
    ])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    commands = apply_commands(str(tmp_path / "out"), MAIN_FILE["tekton"])
    flat = "".join(printed.split())  # the console folds long lines
    assert all("".join(line.split()) in flat for line in commands)  # what the user reads
    campaign = tmp_path / "out" / "campaign.yaml"
    assert campaign.stat().st_size > 700_000  # the CRDs travel with the stack's manifests
    crd = _shell(f"{KUBECTL} apply --server-side -f {CRDS / 'tekton-pipelinerun.yaml'}",
                 cluster_kubeconfig, tmp_path)  # fmt: skip
    assert crd.returncode == 0, crd.stderr
    try:
        for line in commands:
            done = _shell(line, cluster_kubeconfig, tmp_path)
            assert done.returncode == 0, f"{line}: {done.stderr}"
        # what the old instructions did: refused, in kube-apiserver's words
        old = _shell(f"{KUBECTL} apply -f {campaign}", cluster_kubeconfig, tmp_path)
        assert old.returncode != 0
        assert "metadata.annotations: Too long: must have at most 262144 bytes" in old.stderr
        name = yaml.safe_load(campaign.read_text())["metadata"]["name"]
        stored = json.loads(_shell(f"{KUBECTL} get configmap {name} -n {namespace} -o json",
                                   cluster_kubeconfig, tmp_path).stdout)  # fmt: skip
        assert stored["data"] == yaml.safe_load(campaign.read_text())["data"]
        runs = _shell(f"{KUBECTL} get pipelineruns -n {namespace} -o name", cluster_kubeconfig,
                      tmp_path)  # fmt: skip
        assert runs.stdout.count("pipelinerun") == 1
    finally:
        for line in (f"delete namespace {namespace} --wait=false",
                     f"delete -f {tmp_path / 'out' / 'rbac.yaml'} --ignore-not-found"):  # fmt: skip
            _shell(f"{KUBECTL} {line}", cluster_kubeconfig, tmp_path)


def test_a_campaign_over_1_mib_is_refused_by_the_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "big.yaml").write_text("# " + "x" * (1024 * 1024) + "\n")
    (stack / "app.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"
    )
    (tmp_path / "campaign.yaml").write_text(
        "name: big\nbackend: {kind: kubernetes}\n"
        "deployments:\n  - {name: s, server: manifests, manifests: stack/, model: m,\n"
        "     endpoint: {service: a, port: 80, protocols: [openai]}}\n"
        "load: {requests: 4, dataset: {kind: synthetic, input_tokens: 8, output_tokens: 4}}\n"
    )
    code = main(["export", "argo", str(tmp_path / "campaign.yaml"), "--upload", "s3://b/p",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "over the 1,048,576 a Kubernetes API server accepts" in err
    assert "stack/big.yaml (1,048,579 bytes)" in err
    assert not (tmp_path / "out").exists()
