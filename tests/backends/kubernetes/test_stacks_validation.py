"""Stacks refused before a run directory exists (exit 2), each at the line to fix: a
placeholder without a value, YAML that does not parse, an object without kind, a readiness
condition or an endpoint naming what the stack lacks, a stack on the local backend. No
cluster is needed for any of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.config.loader import load_campaign
from testbed.core.errors import CampaignError
from testbed.execution.pipeline import check_inputs
from tests.backends.kubernetes.conftest import run_cli

SERVER = (Path(__file__).parent / "stacks" / "sim" / "server.yaml").read_text()


def campaign(folder: Path, files: dict[str, str], **changes: Any) -> Path:
    stack = folder / "stack"
    stack.mkdir(exist_ok=True)
    for name, text in files.items():
        (stack / name).write_text(text)
    deployment: dict[str, Any] = {
        "name": "sim",
        "server": "manifests",
        "manifests": "stack",
        "values": {"ttft_ms": 5},
        "ready": [{"kind": "Deployment", "name": "sim-server", "condition": "Available"}],
        "endpoint": {"service": "sim-server", "port": 80},
        **changes,
    }
    data = {
        "name": "stack-check",
        "backend": {"kind": "kubernetes"},
        "deployments": [deployment],
        "load": {"profile": "concurrency", "concurrency": 1, "requests": 2,
                 "dataset": {"kind": "synthetic", "input_tokens": 4, "output_tokens": 4}},
    }  # fmt: skip
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def refusal(path: Path, *sets: str) -> str:
    with pytest.raises(CampaignError) as caught:
        check_inputs(load_campaign(path, sets=list(sets)))
    return str(caught.value)


def test_a_valid_stack_plans_one_worker_per_level_of_its_values(tmp_path: Path) -> None:
    path = campaign(tmp_path, {"server.yaml": SERVER})
    plan = check_inputs(
        load_campaign(path, sets=['matrix={"factors": {"deployments.sim.values.ttft_ms": [1, 9]}}'])
    )
    assert [w.server for w in plan.workers.values()] == ["manifests", "manifests"]
    assert sorted(w.document["values"]["ttft_ms"] for w in plan.workers.values()) == [1, 9]


def test_an_undefined_placeholder_is_refused_at_its_line(tmp_path: Path) -> None:
    text = SERVER.replace("ttft_ms={{ ttft_ms }}", "ttft_ms={{ ttft }}")
    message = refusal(campaign(tmp_path, {"server.yaml": text}))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "{{ ttft }}" in t)
    assert f"server.yaml:{line}: 'ttft' is undefined" in message
    assert "campaign.yaml:" in message
    assert "deployments[0].manifests" in message


def test_an_undefined_placeholder_of_one_matrix_level_names_the_level(tmp_path: Path) -> None:
    text = SERVER.replace("{{ ttft_ms }}", "{{ ttft_ms }}{{ extra if ttft_ms > 5 else '' }}")
    path = campaign(tmp_path, {"server.yaml": text})
    message = refusal(path, 'matrix={"factors": {"deployments.sim.values.ttft_ms": [1, 9]}}')
    assert "'extra' is undefined" in message
    assert "deployments.sim.values.ttft_ms=9" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: Service\nmetadata: {name: a}\n", "stack/bad.yaml:1: the object has no apiVersion"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: [unclosed\n",
         "stack/bad.yaml:4: not valid YAML"),
        ("apiVersion: v1\nkind: Service\nmetadata: {}\n", "Service has no metadata.name"),
        ("apiVersion: v1\n{% if %}\n", "stack/bad.yaml:2: template syntax"),
    ],
)  # fmt: skip
def test_a_broken_manifest_is_refused_at_its_line(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in refusal(campaign(tmp_path, {"server.yaml": SERVER, "bad.yaml": text}))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"ready": [{"kind": "Deployment", "name": "vllm", "condition": "Available"}]},
         "ready[0] waits for Deployment/vllm, which the stack does not have"),
        ({"endpoint": {"service": "nope", "port": 80}},
         "endpoint names Service nope, which the stack does not have"),
        ({"endpoint": {"gateway": "inference-gateway", "port": 80}},
         "endpoint names Gateway inference-gateway, which the stack does not have"),
        ({"endpoint": {"url_from": "status.url", "kind": "InferenceService", "name": "m"}},
         "reads status.url of InferenceService/m, which the stack does not have"),
        ({"metrics": {"service": "metrics", "port": 80}},
         "metrics names Service metrics"),
    ],
)  # fmt: skip
def test_names_the_stack_lacks_are_refused_at_the_campaign_line(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    message = refusal(campaign(tmp_path, {"server.yaml": SERVER}, **changes))
    assert expected in message
    assert message.startswith(str(tmp_path / "campaign.yaml") + ":")


def test_a_stack_on_the_local_backend_is_refused_before_a_run_dir(tmp_path: Path) -> None:
    path = campaign(tmp_path, {"server.yaml": SERVER})
    runs = tmp_path / "runs"
    result = run_cli(
        ["run", str(path), "--set", "backend.kind=local", "--out", str(runs / "r")],
        tmp_path / "no-kubeconfig",
        tmp_path,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "deployments[0].server: sim is a stack of Kubernetes objects" in result.stderr
    assert "set backend: kubernetes" in result.stderr
    assert not runs.exists()


def test_an_undefined_placeholder_stops_testbed_run_before_a_run_dir(tmp_path: Path) -> None:
    path = campaign(tmp_path, {"server.yaml": SERVER.replace("{{ ttft_ms }}", "{{ nope }}")})
    runs = tmp_path / "runs"
    result = run_cli(["run", str(path), "--out", str(runs / "r")], tmp_path / "none", tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "'nope' is undefined" in result.stderr
    assert not runs.exists()


def test_plan_manifests_writes_each_levels_rendered_objects(tmp_path: Path) -> None:
    path = campaign(tmp_path, {"server.yaml": SERVER})
    out = tmp_path / "objects"
    result = run_cli(
        ["plan", str(path), "--manifests", str(out), "--set",
         'matrix={"factors": {"deployments.sim.values.ttft_ms": [1, 9]}}'],
        tmp_path / "none",
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    objects = [yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yaml"))]
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    args = sorted(
        next(a for a in d["spec"]["template"]["spec"]["containers"][0]["args"] if "ttft" in a)
        for d in deployments
    )
    assert args == ["ttft_ms=1", "ttft_ms=9"]
    workers = {d["metadata"]["labels"]["testbed.io/worker"] for d in deployments}
    assert len(workers) == 2
    assert all(d["metadata"]["labels"]["testbed.io/run"] == "stack-check-plan" for d in deployments)


def test_two_stacks_that_run_together_must_not_share_object_names(tmp_path: Path) -> None:
    path = campaign(tmp_path, {"server.yaml": SERVER})
    data = yaml.safe_load(path.read_text())
    data["deployments"].append({**data["deployments"][0], "name": "sim2"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    message = refusal(path)
    assert "stacks sim and sim2 both create Deployment/sim-server, Service/sim-server" in message
    assert "{{ deployment.name }}" in message
    check_inputs(load_campaign(path, sets=["execution.strategy=sequential"]))  # one at a time


@pytest.mark.parametrize("name", ["stack-kserve.yaml", "stack-helm.yaml"])
def test_the_stack_examples_plan(name: str) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / name
    plan = check_inputs(load_campaign(example))
    assert {w.server for w in plan.workers.values()} == {"manifests"}


def test_values_without_templates_are_refused(tmp_path: Path) -> None:
    path = campaign(tmp_path, {"server.yaml": SERVER}, templated=False)
    assert "values are given but templated is false" in refusal(path)


def test_a_kustomization_is_rendered_then_built_by_kubectl(tmp_path: Path) -> None:
    path = campaign(
        tmp_path,
        {
            "server.yaml": SERVER,
            "kustomization.yaml": "resources: [server.yaml]\ncommonLabels: {tier: '{{ tier }}'}\n",
        },
        values={"ttft_ms": 7, "tier": "gold"},
    )
    plan = check_inputs(load_campaign(path))
    (worker,) = plan.workers.values()
    from testbed.backends.kubernetes.stack import render_worker

    objects = render_worker("r", worker.id, worker.config, {"kind": "kubernetes"}, tmp_path)
    deployment = next(o.obj for o in objects if o.kind == "Deployment")
    assert deployment["metadata"]["labels"]["tier"] == "gold"  # kustomize applied it
    assert deployment["metadata"]["labels"]["testbed.io/run"] == "r"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "ttft_ms=7" in args
    assert "stack (kustomized):" in objects[0].origin


def test_a_kustomization_kubectl_refuses_is_refused_in_its_words(tmp_path: Path) -> None:
    path = campaign(
        tmp_path, {"server.yaml": SERVER, "kustomization.yaml": "resources: [missing.yaml]\n"}
    )
    message = refusal(path)
    assert "`kubectl kustomize" in message
    assert "missing.yaml" in message


def test_a_value_may_hold_the_deployments_placeholders(tmp_path: Path) -> None:
    text = SERVER.replace('"model_name={{ deployment.model }}"', '"model_name={{ served }}"')
    path = campaign(
        tmp_path, {"server.yaml": text}, model="org/llm",
        values={"ttft_ms": 5, "served": "{{ deployment.model }}-in-{{ namespace }}"},
    )  # fmt: skip
    plan = check_inputs(load_campaign(path))
    (worker,) = plan.workers.values()
    from testbed.backends.kubernetes.stack import render_worker

    objects = render_worker("r", worker.id, worker.config, {"kind": "kubernetes"}, tmp_path)
    deployment = next(o.obj for o in objects if o.kind == "Deployment")
    assert (
        "model_name=org/llm-in-testbed-r"
        in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    bad = campaign(tmp_path, {"server.yaml": SERVER}, values={"ttft_ms": "{{ nope }}"})
    assert "values.ttft_ms: 'nope' is undefined" in refusal(bad)


def test_the_helm_examples_objects_are_valid_kubernetes_as_labelled(tmp_path: Path) -> None:
    import kubernetes_validate

    from testbed.backends.kubernetes.stack import render_worker
    from tests.backends.kubernetes.test_manifests import K8S_VERSION

    example = Path(__file__).resolve().parents[3] / "examples" / "stack-helm.yaml"
    loaded = load_campaign(example)
    (worker,) = check_inputs(loaded).workers.values()
    backend = loaded.campaign.backend.model_dump(mode="json")
    objects = render_worker("r1", worker.id, worker.config, backend, loaded.base_dir)
    assert [o.kind for o in objects] == ["ServiceAccount", "ConfigMap", "Service", "Deployment"]
    for item in objects:
        kubernetes_validate.validate(item.obj, K8S_VERSION, strict=True)
        assert item.obj["metadata"]["labels"]["testbed.io/run"] == "r1"
        assert item.obj["metadata"]["labels"]["helm.sh/chart"] == "sim-server-0.3.1"
        assert item.obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
