"""``testbed export tekton|argo`` and ``testbed worker``: the exported pipeline lists the
plan's treatments, encodes the strategy as dependencies, validates against the engines'
schemas (tests/schemas) and Kubernetes' own (kubernetes-validate, strict), keeps secrets out,
and its ConfigMap reproduces the very same treatment ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from testbed.cli import main
from testbed.config.loader import load_campaign, load_campaign_text
from testbed.execution.export import export
from testbed.execution.export.objects import options_for
from testbed.execution.export.order import ordered_tasks
from testbed.plan.expand import expand

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
K8S_VERSION = "1.32.0"

SWEEP = """
name: order
deployments:
  - {name: sim, server: sim, params: {ttft_ms: 1, itl_ms: 1}}
matrix:
  factors:
    deployments.params.itl_ms: [1, 2]
    load.concurrency: [1, 2, 3]
load: {profile: concurrency, requests: 4}
execution: {strategy: STRATEGY}
"""


def _tasks(strategy: str, **execution: Any) -> list[Any]:
    text = SWEEP.replace("STRATEGY", strategy)
    extra = {f"execution.{k}": v for k, v in execution.items()}
    loaded = load_campaign_text(text, sets=[f"{k}={json.dumps(v)}" for k, v in extra.items()])
    return ordered_tasks(expand(loaded), loaded.campaign.execution)


def _after(tasks: list[Any]) -> list[list[int]]:
    index = {t.name: i for i, t in enumerate(tasks)}
    return [sorted(index[name] for name in t.after) for t in tasks]


def test_sequential_is_a_chain() -> None:
    assert _after(_tasks("sequential")) == [[], [0], [1], [2], [3], [4]]


def test_parallel_without_a_limit_has_no_edges_and_with_one_slides() -> None:
    assert _after(_tasks("parallel")) == [[]] * 6
    assert _after(_tasks("parallel", max_parallel=4)) == [[], [], [], [], [0], [1]]


def test_sliding_n_waits_for_the_task_n_before() -> None:
    assert _after(_tasks("sliding", max_parallel=2)) == [[], [], [0], [1], [2], [3]]


def test_barrier_n_waits_for_the_whole_wave_before() -> None:
    assert _after(_tasks("barrier", max_parallel=4)) == [[], [], [], [], [0, 1, 2, 3], [0, 1, 2, 3]]


def test_unroll_groups_run_one_after_the_other() -> None:
    tasks = _tasks("parallel", unroll=["deployments.params.itl_ms"])
    groups = [t.treatment.params["deployments.params.itl_ms"] for t in tasks]
    assert groups == [1, 1, 1, 2, 2, 2]
    # every task of the second group waits for every (sink) task of the first
    assert _after(tasks) == [[], [], [], [0, 1, 2], [0, 1, 2], [0, 1, 2]]


def _schema(name: str) -> dict[str, Any]:
    return yaml.safe_load((SCHEMAS / name).read_text())


def _exported(tmp_path: Path, engine: str, example: str, *extra: str) -> dict[str, list[Any]]:
    out = tmp_path / engine
    code = main(
        ["export", engine, str(EXAMPLES / example), "--upload", "s3://bench/runs", "-o", str(out),
         *extra]
    )  # fmt: skip
    assert code == 0
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted(out.glob("*.yaml"))}


@pytest.mark.parametrize("example", ["tekton-sweep.yaml", "tgis-correctness.yaml"])
def test_tekton_export_lists_the_plans_treatments_and_validates(
    tmp_path: Path, example: str
) -> None:
    files = _exported(tmp_path, "tekton", example)
    (run,) = files["pipelinerun.yaml"]
    jsonschema.validate(run, _schema("tekton-v1-pipelinerun.yaml"))
    tasks = run["spec"]["pipelineSpec"]["tasks"]
    plan = expand(load_campaign(EXAMPLES / example))
    assert [t["args"][3] for task in tasks for t in task["taskSpec"]["steps"]] == [
        t.id for t in plan.planned()
    ]
    names = {task["name"] for task in tasks}
    assert all(set(task.get("runAfter", [])) <= names for task in tasks)
    _validate_support(files)


def test_argo_export_lists_the_plans_treatments_and_validates(tmp_path: Path) -> None:
    files = _exported(tmp_path, "argo", "tekton-sweep.yaml")
    (workflow,) = files["workflow.yaml"]
    jsonschema.validate(workflow, _schema("argo-v1alpha1-workflow.yaml"))
    dag = workflow["spec"]["templates"][0]["dag"]["tasks"]
    plan = expand(load_campaign(EXAMPLES / "tekton-sweep.yaml"))
    containers = {t["name"]: t["container"] for t in workflow["spec"]["templates"][1:]}
    assert [containers[task["template"]]["args"][3] for task in dag] == [
        t.id for t in plan.planned()
    ]
    # sliding, max_parallel 2: the third task waits for the first (or its failure)
    assert dag[2]["depends"] == f"({dag[0]['name']}.Succeeded || {dag[0]['name']}.Failed)"
    _validate_support(files)


def test_a_misplaced_field_fails_the_engine_schema(tmp_path: Path) -> None:
    (run,) = _exported(tmp_path, "tekton", "tekton-sweep.yaml")["pipelinerun.yaml"]
    run["spec"]["serviceAccountName"] = "v1beta1-style"  # moved to taskRunTemplate in v1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(run, _schema("tekton-v1-pipelinerun.yaml"))


def _validate_support(files: dict[str, list[Any]]) -> None:
    for name in ("namespace.yaml", "rbac.yaml", "campaign.yaml", "secret.yaml"):
        for obj in files[name]:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_secret_template_holds_placeholders_never_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value")
    monkeypatch.setenv("BENCH_TOKEN", "token-value-42")
    campaign = tmp_path / "ext.yaml"
    campaign.write_text(
        "name: ext\nbackend: external\ndeployments:\n"
        "  - {name: api, server: external, url: 'https://example.test',\n"
        "     api_key: '${env:BENCH_TOKEN}'}\n"
        "load: {profile: concurrency, requests: 4}\n"
    )
    out = tmp_path / "out"
    assert main(["export", "tekton", str(campaign), "--upload", "s3://b/p", "-o", str(out)]) == 0
    text = "".join(p.read_text() for p in out.glob("*.yaml"))
    assert "very-secret-value" not in text
    assert "token-value-42" not in text
    (secret,) = yaml.safe_load_all((out / "secret.yaml").read_text())
    assert secret["stringData"] == {
        "BENCH_TOKEN": "${BENCH_TOKEN}",
        "AWS_ACCESS_KEY_ID": "${AWS_ACCESS_KEY_ID}",
        "AWS_SECRET_ACCESS_KEY": "${AWS_SECRET_ACCESS_KEY}",
    }


@pytest.mark.parametrize(
    ("example", "sets"),
    [
        ("tgis-correctness.yaml", ["correctness.concurrency=2"]),
        ("scale-test.yaml", []),  # its workload template travels with it
    ],
)
def test_the_configmap_reproduces_the_same_treatment_ids(
    tmp_path: Path, example: str, sets: list[str]
) -> None:
    loaded = load_campaign(EXAMPLES / example, sets=sets)
    plan = expand(loaded)
    options = options_for(
        loaded, namespace=None, image=None, upload="s3://b/p", s3_endpoint_url=None
    )
    files, _ = export("tekton", loaded, plan, options)
    (configmap,) = files["campaign.yaml"]
    (run,) = files["pipelinerun.yaml"]
    items = run["spec"]["pipelineSpec"]["tasks"][0]["taskSpec"]["volumes"][0]["configMap"]["items"]
    for item in items:  # lay the ConfigMap out as the pod would see it
        path = tmp_path / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(configmap["data"][item["key"]])
    again = expand(load_campaign(tmp_path / "campaign.yaml"))
    assert [t.id for t in again.planned()] == [t.id for t in plan.planned()]
    assert again.probe_configs == plan.probe_configs  # the worker's probe gets these models
    assert main(["validate", str(tmp_path / "campaign.yaml")]) == 0


def test_export_without_an_upload_target_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "argo", str(EXAMPLES / "tekton-sweep.yaml")]) == 2
    assert "--upload" in capsys.readouterr().err


def test_worker_runs_exactly_one_treatment(tmp_path: Path) -> None:
    overrides = ["load.requests=6", "deployments.params.ttft_ms=1"]
    plan = expand(load_campaign(EXAMPLES / "tekton-sweep.yaml", sets=overrides))
    target = plan.planned()[2]
    out = tmp_path / "run"
    sets = [arg for item in overrides for arg in ("--set", item)]
    code = main(["worker", str(EXAMPLES / "tekton-sweep.yaml"), *sets, "--treatment", target.id,
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    dirs = sorted(p.name for p in out.iterdir() if p.is_dir() and "__" in p.name)
    assert dirs == [target.dirname]
    records = (out / target.dirname / "records.jsonl").read_text().splitlines()
    assert len(records) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert [row["id"] for row in summary["treatments"]] == [target.id]


def test_a_workers_verdict_is_its_treatments_and_criteria_wait_for_the_report(
    tmp_path: Path,
) -> None:
    """A criterion compares treatments that other tasks run: one task's worker does not
    judge it (it would find one side missing and ERROR every task, exit 3); `testbed report`
    over the tasks' folders does (docs/export.md)."""
    side = {"deployments.params.itl_ms": 2, "load.concurrency": 1, "load.dataset.input_tokens": 128}
    criterion = {"name": "itl", "metric": "itl_ms.p50", "baseline": side,
                 "candidates": [{**side, "deployments.params.itl_ms": 5}]}  # fmt: skip
    overrides = [
        "load.requests=6",
        "deployments.params.ttft_ms=1",
        f"criteria={json.dumps([criterion])}",
    ]
    plan = expand(load_campaign(EXAMPLES / "tekton-sweep.yaml", sets=overrides))
    out = tmp_path / "run"
    sets = [arg for item in overrides for arg in ("--set", item)]
    code = main(["worker", str(EXAMPLES / "tekton-sweep.yaml"), *sets, "--treatment",
                 plan.planned()[0].id, "--out", str(out)])  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert (code, summary["status"], summary["criteria"]) == (0, "PASS", [])


def test_worker_refuses_an_unknown_treatment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["worker", str(EXAMPLES / "tekton-sweep.yaml"), "--treatment", "nope",
                 "--out", str(tmp_path / "r")])  # fmt: skip
    assert code == 2
    assert "not in the plan" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


STACKS = """
name: turns
backend: kubernetes
deployments:
  - {name: a, server: manifests, manifests: stack.yaml, model: m, values: {replicas: 1},
     endpoint: {service: s, port: 80}}
  - {name: b, server: manifests, manifests: stack.yaml, model: m, values: {replicas: 1},
     endpoint: {service: s, port: 80}}
matrix:
  factors:
    load.concurrency: [1, 2, 3]
load: {profile: concurrency, requests: 4}
execution: {strategy: parallel}
"""


def test_the_tasks_of_one_stack_take_turns_and_two_stacks_do_not_wait_for_each_other(
    tmp_path: Path,
) -> None:
    """A stack's objects have fixed names in the one namespace the tasks share: two tasks
    deploying the same stack would collide, so each waits for the one before it (as one
    `testbed run`'s workers hold a lock per stack); another stack runs beside it."""
    (tmp_path / "stack.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"
    )
    (tmp_path / "campaign.yaml").write_text(STACKS)
    loaded = load_campaign(tmp_path / "campaign.yaml")
    plan = expand(loaded)
    tasks = ordered_tasks(plan, loaded.campaign.execution)
    assert _after(tasks) == [[]] * 6  # parallel, before the stacks are considered
    files, tasks = export(
        "tekton",
        loaded,
        plan,
        options_for(loaded, namespace=None, image=None, upload="s3://b/r", s3_endpoint_url=None),
    )
    stack_of = [plan.workers[t.treatment.workers[0]].config.name for t in tasks]
    assert sorted(stack_of) == ["a", "a", "a", "b", "b", "b"]
    after = _after(tasks)
    for i, stack in enumerate(stack_of):
        before = [j for j in range(i) if stack_of[j] == stack]
        assert after[i] == before[-1:], (stack_of, after)  # the one before of its own stack
    (run,) = files["pipelinerun.yaml"]
    edges = {t["name"]: t.get("runAfter", []) for t in run["spec"]["pipelineSpec"]["tasks"]}
    assert edges == {t.name: t.after for t in tasks}
