"""Every object a run creates, built from real campaigns and validated offline with
kubernetes-validate (strict) against a pinned Kubernetes version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from testbed.backends.kubernetes.launch import resources
from testbed.backends.kubernetes.manifest_files import cluster_settings, plan_objects
from testbed.backends.kubernetes.names import MANAGED_BY, RUN, WORKER, dns_name, label_value
from testbed.config.deployments import Resources
from testbed.config.loader import load_campaign
from testbed.core.errors import CampaignError
from testbed.plan.expand import expand

K8S_VERSION = "1.32.0"  # the emulator's and kubectl's version on this machine
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def objects_of(path: Path | str, *sets: str, run_id: str = "r1") -> list[dict[str, Any]]:
    loaded = load_campaign(str(path), [], ["backend.kind=kubernetes", *sets])
    plan = expand(loaded)
    workers = {w.id: w.config for w in plan.workers.values()}
    return plan_objects(run_id, cluster_settings(loaded.campaign.backend), workers)


def validate(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        if obj["apiVersion"].startswith("datashim.io"):
            continue  # a CRD: kubernetes-validate has no schema for it (checked below)
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def test_quickstart_objects_are_valid_and_labelled() -> None:
    objects = objects_of(EXAMPLES / "quickstart.yaml")
    validate(objects)
    assert [o["kind"] for o in objects] == ["Namespace"] + ["Deployment", "Service"] * 2
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels[MANAGED_BY] == "testbed"
        assert labels[RUN] == "r1"
    for dep in by_kind(objects, "Deployment"):
        assert dep["spec"]["replicas"] == 1
        assert WORKER in dep["metadata"]["labels"]
        template = dep["spec"]["template"]["metadata"]["labels"]
        assert dep["spec"]["selector"]["matchLabels"].items() <= template.items()
        server = pod_spec(dep)["containers"][0]
        assert {"readinessProbe", "livenessProbe", "startupProbe"} <= server.keys()
        assert {"name": "CUDA_VISIBLE_DEVICES", "value": "-1"} in server["env"]
    service = by_kind(objects, "Service")[0]
    assert (
        service["spec"]["selector"]
        == by_kind(objects, "Deployment")[0]["spec"]["selector"]["matchLabels"]
    )


def test_tgis_correctness_configs_are_separate_deployments_with_resources() -> None:
    objects = objects_of(EXAMPLES / "tgis-correctness.yaml")
    validate(objects)
    deps = by_kind(objects, "Deployment")
    assert len(deps) == 5  # SmolLM2's three configurations, tiny-t5's two
    memory = sorted(pod_spec(d)["containers"][0]["resources"]["requests"]["memory"] for d in deps)
    assert memory == ["4Gi", "8Gi", "8Gi", "8Gi", "8Gi"]  # bf16 asks for 4 GiB, the others 8
    args = [pod_spec(d)["containers"][0]["args"] for d in deps]
    assert any("bfloat16" in a for a in args)
    assert any("max_batch_size=1" in a for a in args)


def test_tgis_tester_resource_defaults_and_overrides() -> None:
    # tgis-tester: requests cpu 4 / memory 32G, limits 8 / 128G, one GPU.
    tgis = Resources(cpu=4.0, memory_gb=32.0, gpu=1)
    assert resources(tgis) == {
        "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "8", "memory": "128Gi", "nvidia.com/gpu": "1"},
    }
    custom = resources(Resources(cpu=0.5, memory_gb=1.5, limit_cpu=3, limit_memory_gb=2))
    assert custom == {
        "requests": {"cpu": "500m", "memory": "1536Mi"},
        "limits": {"cpu": "3", "memory": "2Gi"},
    }
    mig = resources(Resources(cpu=1, memory_gb=1, gpu={"mig_1g_10gb": 2}))
    assert mig["limits"]["nvidia.com/mig-1g.10gb"] == "2"
    assert "nvidia.com/gpu" not in mig["limits"]


TGIS_CAMPAIGN = """
name: tgis
deployments:
  - name: default
    server: tgis
    model: google/flan-t5-small
    params: {deployment_framework: hf_transformers}
  - name: cpu
    server: tgis
    model: google/flan-t5-small
    params: {deployment_framework: hf_transformers}
    resources: {gpu: null, request_cpu: 32, request_memory_gb: 64}
  - name: mig
    server: tgis
    model: google/flan-t5-small
    params: {deployment_framework: hf_transformers}
    resources: {gpu: {mig_1g_10gb: 1}}
    placement:
      node_selector: {nvidia.com/gpu.product: A100}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      priority_class: high
      service_account: tester
      image_pull_secrets: [quay]
correctness: {protocol: tgis, cases: [cases.yaml]}  # TGIS serves gRPC only
"""


def test_tgis_resources_mig_and_placement(tmp_path: Path) -> None:
    campaign = tmp_path / "tgis.yaml"
    campaign.write_text(TGIS_CAMPAIGN)
    (tmp_path / "cases.yaml").write_text("cases: []\n")
    objects = objects_of(campaign, "backend.image_tag=v9", "backend.images.tgis=quay.io/me/tgis")
    validate(objects)
    deps = {
        d["metadata"]["labels"][WORKER].split("-")[0]: d for d in by_kind(objects, "Deployment")
    }
    default = pod_spec(deps["default"])["containers"][0]
    assert default["resources"]["requests"] == {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}
    assert default["image"] == "quay.io/me/tgis:v9"
    cpu = pod_spec(deps["cpu"])["containers"][0]
    assert cpu["resources"]["requests"] == {"cpu": "32", "memory": "64Gi"}
    assert {"name": "CUDA_VISIBLE_DEVICES", "value": "-1"} in cpu["env"]
    mig = pod_spec(deps["mig"])
    assert mig["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    assert mig["nodeSelector"] == {"nvidia.com/gpu.product": "A100"}
    assert mig["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert mig["priorityClassName"] == "high"
    assert mig["serviceAccountName"] == "tester"
    assert mig["imagePullSecrets"] == [{"name": "quay"}]


S3_CAMPAIGN = """
name: s3
backend: {kind: kubernetes, namespace: team-a, datashim: DATASHIM}
deployments:
  - name: stable
    server: hf
    model: s3://weights/stable
    s3_endpoint_url: http://minio:9000
load: {requests: 4}
"""


@pytest.mark.parametrize("datashim", [False, True])
def test_s3_weights_init_container_or_datashim(tmp_path: Path, datashim: bool) -> None:
    campaign = tmp_path / "s3.yaml"
    campaign.write_text(S3_CAMPAIGN.replace("DATASHIM", str(datashim).lower()))
    objects = objects_of(campaign)
    validate(objects)
    assert not by_kind(objects, "Namespace")  # an existing namespace is used, not created
    secret = by_kind(objects, "Secret")[0]
    assert set(secret["stringData"].values()) == {"***"}  # plans never hold secret values
    pod = pod_spec(by_kind(objects, "Deployment")[0])
    server = pod["containers"][0]
    if datashim:
        dataset = by_kind(objects, "Dataset")[0]
        assert dataset["apiVersion"] == "datashim.io/v1alpha1"
        assert dataset["spec"]["local"]["bucket"] == "weights"
        assert dataset["spec"]["local"]["secret-name"] == secret["metadata"]["name"]
        labels = by_kind(objects, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]
        assert labels["dataset.0.id"] == dataset["metadata"]["name"]
        assert f"/mnt/datasets/{dataset['metadata']['name']}/stable" in server["args"]
    else:
        init = pod["initContainers"][0]
        assert init["args"] == ["models", "fetch", "s3://weights/stable", "--to", "/models"]
        refs = {e["name"]: e.get("valueFrom") for e in init["env"]}
        assert refs["AWS_SECRET_ACCESS_KEY"]["secretKeyRef"]["name"] == secret["metadata"]["name"]
        assert "/models/weights/stable" in server["args"]


def test_names_are_dns_labels_and_distinct() -> None:
    long = "A_Very.Long_deployment-name" * 4
    name = dns_name(long)
    assert len(name) <= 63
    assert name[0].isalpha()
    assert name == name.lower()
    assert dns_name(long) != dns_name(long + "x")
    assert len(label_value("x" * 80)) <= 63


def test_cluster_only_fields_are_refused_on_local(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    sims = TGIS_CAMPAIGN.replace("server: tgis", "server: sim")
    campaign.write_text(sims.replace("    params: {deployment_framework: hf_transformers}\n", ""))
    with pytest.raises(CampaignError, match="backend would ignore it"):
        load_campaign(str(campaign))


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["backend.server=https://k:6443", "backend.token=abc"], "env:NAME"),
        (["backend.token=${env:T}"], "without backend.server"),
        (["backend.server_image=my/img:1"], "servers under test"),
        (["deployments.0.model=/srv/models/x"], "a pod cannot read"),
        (["backend.model_pvc=weights"], "no deployment's model is a path"),
        (["backend.insecure_skip_tls_verify=true"], "go with backend.server"),
        (["backend.server=https://k:6443", "backend.context=x"], "not both"),
    ],
)
def test_kubernetes_settings_refused_with_the_fix(sets: list[str], message: str) -> None:
    with pytest.raises(CampaignError, match=message):
        load_campaign(str(EXAMPLES / "quickstart.yaml"), [], ["backend.kind=kubernetes", *sets])


def test_shipped_rbac_is_valid_and_grants_what_the_backend_uses() -> None:
    import yaml

    path = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"
    documents = list(yaml.safe_load_all(path.read_text()))
    for document in documents:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    granted = {
        (resource, verb)
        for doc in documents
        if doc["kind"] == "ClusterRole"
        for rule in doc["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = {
        ("namespaces", "create"),
        ("namespaces", "delete"),
        ("nodes", "list"),
        ("deployments", "create"),
        ("deployments", "update"),  # apply replaces on --resume
        ("pods", "watch"),
        ("pods/log", "get"),
        ("events", "list"),
        ("pods/portforward", "create"),
        ("secrets", "create"),
        ("services", "delete"),
    }
    assert needed <= granted


def test_image_flags_need_a_cluster_and_stay_strings(tmp_path: Path) -> None:
    import subprocess
    import sys

    quickstart = str(EXAMPLES / "quickstart.yaml")
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {"PYTHONPATH": src, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    local = subprocess.run(
        [sys.executable, "-m", "testbed", "run", quickstart, "--image", "x:1"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tmp_path,
    )
    assert local.returncode == 2
    assert "backend.kind=kubernetes" in local.stderr
    campaign = tmp_path / "tgis.yaml"
    campaign.write_text(TGIS_CAMPAIGN)
    objects = objects_of(campaign, 'backend.image_tag="2"')
    images = {
        d["spec"]["template"]["spec"]["containers"][0]["image"]
        for d in by_kind(objects, "Deployment")
    }
    assert images == {"quay.io/opendatahub/text-generation-inference:2"}


def test_plan_manifests_include_the_probe_jobs_of_probes_in_cluster(tmp_path: Path) -> None:
    """``--manifests`` writes what a run creates: with ``backend.probes: cluster`` that is
    also the campaign ConfigMap and one probe Job per treatment, each valid and reaching its
    workers' Services; without it, neither."""
    from testbed.cli import main

    quickstart = str(EXAMPLES / "quickstart.yaml")
    sets = ["--set", "backend.kind=kubernetes", "--set", "backend.probes=cluster"]
    out = tmp_path / "cluster"
    assert main(["plan", quickstart, *sets, "--manifests", str(out), "--run-id", "r1"]) == 0
    import yaml

    objects = [yaml.safe_load(path.read_text()) for path in sorted(out.glob("*.yaml"))]
    validate(objects)
    loaded = load_campaign(quickstart, [], ["backend.kind=kubernetes"])
    treatments = expand(loaded).planned()
    jobs = by_kind(objects, "Job")
    assert len(jobs) == len(treatments) >= 2
    (config,) = by_kind(objects, "ConfigMap")
    assert "campaign.yaml" in config["data"]
    services = {
        s["metadata"]["name"].upper().replace("-", "_") for s in by_kind(objects, "Service")
    }
    for job in jobs:
        args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[:2] == ["worker", "/campaign/campaign.yaml"]
        endpoints = [args[i + 1] for i, a in enumerate(args) if a == "--endpoint"]
        assert endpoints
        assert all(any(f"$({s}_SERVICE_HOST)" in e for s in services) for e in endpoints)
    kinds = [o["kind"] for o in objects]
    assert kinds.index("ConfigMap") < kinds.index("Job")
    plain = tmp_path / "controller"
    main(["plan", quickstart, "--set", "backend.kind=kubernetes", "--manifests", str(plain)])
    kinds = {yaml.safe_load(p.read_text())["kind"] for p in plain.glob("*.yaml")}
    assert kinds == {"Namespace", "Deployment", "Service"}


def test_plan_manifests_of_a_local_campaign_is_refused_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--manifests`` needs the cluster's settings: a local campaign exits 2 and writes nothing."""
    from testbed.cli import main

    out = tmp_path / "none"
    quickstart = str(EXAMPLES / "quickstart.yaml")
    assert main(["plan", quickstart, "--manifests", str(out)]) == 2
    assert "backend is local — add --set backend.kind=kubernetes" in capsys.readouterr().err
    assert not out.exists()


def test_backend_settings_of_another_kind_are_a_callers_bug() -> None:
    """The Kubernetes backend narrows the validated section once; another kind never gets
    through as if its fields were defaults."""
    from testbed.backends.kubernetes.backend import KubernetesBackend
    from testbed.config.backend_settings import LocalSettings

    with pytest.raises(TypeError, match="kind local"):
        KubernetesBackend.for_run(Path("run-1"), LocalSettings(), Path())
