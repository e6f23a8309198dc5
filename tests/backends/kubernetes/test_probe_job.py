"""``backend.probes``: what validation refuses (exit 2, at the field, with the fix), and the
probe Job and campaign ConfigMap as the cluster gets them (valid Kubernetes objects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from testbed.backends.kubernetes.probe_job import configmap, env_secret, probe_job, service_url
from testbed.cli import main
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import deployment_model
from testbed.config.loader import load_campaign
from testbed.execution.remote_probes import shipped_campaign
from testbed.plan.expand import expand

K8S_VERSION = "1.32.0"
BASE: dict[str, Any] = {
    "name": "pc",
    "backend": {"kind": "kubernetes", "probes": "cluster"},
    "deployments": [{"name": "sim", "server": "sim"}],
    "load": {"profile": "concurrency", "requests": 4},
}


def write(tmp_path: Path, **changes: Any) -> Path:
    data = json.loads(json.dumps(BASE))
    data.update(changes)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"backend": {"kind": "local", "probes": "cluster"}},
            "backend.probes chooses where probes run in a cluster; the local backend runs them"
            " here",
        ),
        (
            {"backend": {"kind": "kubernetes", "probes": "pods"}},
            "backend.probes: 'pods' is not allowed; expected one of controller, cluster",
        ),
        (
            {"deployments": [{"name": "ext", "server": "external", "url": "http://x:1"}]},
            "ext is external: with backend.probes: cluster",
        ),
        (
            {
                "load": {
                    "profile": "concurrency",
                    "requests": 4,
                    "dataset": {"kind": "file", "path": "{tmp}/prompts.jsonl"},
                }
            },
            "load.dataset.path: {tmp}/prompts.jsonl: a probe in a pod gets the campaign's files"
            " in a ConfigMap, so they must sit inside the campaign's folder",
        ),
        (
            {
                "load": None,
                "deployments": [],
                "scale": {"workloads": 1},
            },
            "backend.probes: cluster has nothing to run for it",
        ),
    ],
    ids=["local", "unknown", "external", "dataset-outside", "scale"],
)
def test_what_a_probe_job_cannot_run_is_refused_at_validation(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    changes: dict[str, Any],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    (tmp_path / "t.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    path = write(tmp_path, **changes)
    path.write_text(path.read_text().replace("{tmp}", str(tmp_path)))  # an absolute path
    if changes.get("load", 1) is None:
        text = path.read_text().replace("load: null\n", "")
        path.write_text(text)
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message.replace("{tmp}", str(tmp_path)) in " ".join(err.split()), err
    assert "campaign.yaml" in err


def test_the_job_reaches_each_worker_through_its_service_variables() -> None:
    deployment = deployment_model({"name": "sim", "server": "sim"})
    backend = KubernetesSettings(kind="kubernetes")
    assert service_url("sim-13123b26", deployment, backend) == (
        "http://$(TB_SIM_13123B26_SERVICE_HOST):$(TB_SIM_13123B26_SERVICE_PORT_HTTP)"
    )


def test_job_and_configmap_are_valid_objects_labelled_with_the_run(tmp_path: Path) -> None:
    plan = expand(load_campaign(write(tmp_path)))
    (treatment,) = plan.planned()
    workers = {w: plan.workers[w].config for w in treatment.workers}
    backend = KubernetesSettings(kind="kubernetes", probes="cluster", image="registry/testbed:1")
    items = [{"key": "campaign.yaml", "path": "campaign.yaml"}]
    job = probe_job(
        "run-1",
        "ns",
        {"id": treatment.id, "dirname": treatment.dirname},
        2,
        workers,
        backend,
        items,
    )
    cm = configmap("run-1", "ns", {"campaign.yaml": "name: pc\n"})
    for obj in (job, cm):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        assert obj["metadata"]["labels"]["testbed.io/run"] == "run-1"
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "testbed"
    spec = job["spec"]
    assert spec["backoffLimit"] == 0  # a killed probe pod is an ERROR, not silently re-run
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["enableServiceLinks"] is True
    assert spec["template"]["metadata"]["labels"] == job["metadata"]["labels"]
    (container,) = pod["containers"]
    assert container["image"] == "registry/testbed:1"
    (worker_id,) = treatment.workers
    service = "TB_" + worker_id.upper().replace("-", "_")
    assert container["args"] == [
        "worker", "/campaign/campaign.yaml", "--treatment", treatment.id,
        "--out", "/results/run", "--stream",
        "--endpoint", f"sim=http://$({service}_SERVICE_HOST):$({service}_SERVICE_PORT_HTTP)",
    ]  # fmt: skip
    assert pod["volumes"][0]["configMap"] == {"name": cm["metadata"]["name"], "items": items}
    assert len(job["metadata"]["name"]) <= 63
    assert job["metadata"]["name"].startswith("tb-probe-run-1-")


def test_a_probe_job_gets_the_files_and_env_values_its_treatment_reads(tmp_path: Path) -> None:
    # A dataset file beside the campaign travels in the ConfigMap at its relative path; a
    # ${env:} header travels as a name, its value in a Secret the container reads by key.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.jsonl").write_text('{"prompt": "hi"}\n')
    load = {"profile": "concurrency", "requests": 4,
            "headers": {"Authorization": "Bearer ${env:TB_TOKEN}"},
            "dataset": {"kind": "file", "path": "data/rows.jsonl"}}  # fmt: skip
    loaded = load_campaign(write(tmp_path, load=load))
    plan = expand(loaded)
    shipped = shipped_campaign(loaded, plan)
    assert shipped is not None
    (key,) = [i["key"] for i in shipped.items if i["path"] == "data/rows.jsonl"]
    assert shipped.data[key] == '{"prompt": "hi"}\n'
    assert shipped.env == ("TB_TOKEN",)
    assert "${env:TB_TOKEN}" in shipped.data["campaign.yaml"]  # the name, never the value
    (treatment,) = plan.planned()
    workers = {w: plan.workers[w].config for w in treatment.workers}
    backend = KubernetesSettings(kind="kubernetes", probes="cluster")
    where = {"id": treatment.id, "dirname": treatment.dirname}
    items = [dict(i) for i in shipped.items]
    job = probe_job("run-1", "ns", where, 1, workers, backend, items, None, shipped.env)
    secret = env_secret("run-1", "ns", {"TB_TOKEN": "v"})
    for obj in (job, secret):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    ref = {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "TB_TOKEN"}}
    assert container["env"] == [{"name": "TB_TOKEN", "valueFrom": ref}]
