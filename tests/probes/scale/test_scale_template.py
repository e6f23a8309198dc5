"""Templates: built-in workload types, user templates (custom resources too), labels, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.config.scale import ScaleProbe
from testbed.core.errors import InputError
from testbed.probes.scale.submit import expected_pods, template_for, values
from testbed.probes.scale.submitted import Header
from testbed.probes.scale.template import RUN_LABEL, WORKLOAD_LABEL, Template

HEADER = Header(run="r1", prefix="scale-r1", namespace="ns", template="t", fingerprint="f")


def _render(config: ScaleProbe, index: int = 3) -> list[dict]:
    return template_for(config, Path()).render(values(config, HEADER, index))


@pytest.mark.parametrize("kind", ["training", "distributed", "interactive"])
def test_builtin_types_render_with_labels_gpus_and_pvc(kind: str) -> None:
    config = ScaleProbe(workload_type=kind, workers=3, gpus=2, pvc=True, run_seconds=1.5)
    objects = _render(config)
    kinds = [o["kind"] for o in objects]
    assert kinds[0] == "PersistentVolumeClaim"
    main = objects[-1]
    assert main["metadata"]["name"] == "scale-r1-00003"
    assert main["metadata"]["labels"][RUN_LABEL] == "r1"
    pod_spec = main["spec"] if kind == "interactive" else main["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert pod_spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "scale-r1-00003-data"
    if kind != "interactive":
        template = main["spec"]["template"]
        assert template["metadata"]["labels"][WORKLOAD_LABEL] == "scale-r1-00003"
        assert template["metadata"]["annotations"]["emulator.testbed.io/run-seconds"] == "1.5"
        assert main["spec"]["parallelism"] == 3
    assert expected_pods(config) == (1 if kind == "interactive" else 3)


def test_no_pvc_and_no_run_seconds_leave_them_out() -> None:
    objects = _render(ScaleProbe())
    assert [o["kind"] for o in objects] == ["Job"]
    assert "annotations" not in (objects[0]["spec"]["template"]["metadata"] or {})


def test_user_template_custom_resource_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "tw.yaml"
    path.write_text(
        """
apiVersion: run.ai/v2alpha1
kind: TrainingWorkload
metadata:
  name: "{{ name }}"
  annotations: {team: "{{ team }}"}
spec:
  gpu: {value: "{{ gpus }}"}
  somethingNew: {keep: [1, 2, 3]}
  replicaSpecs:
    worker:
      template:
        spec:
          containers: [{name: w, image: "{{ image }}"}]
"""
    )
    config = ScaleProbe(template=str(path), values={"team": "vision"}, gpus=4)
    (obj,) = _render(config)
    assert obj["spec"]["somethingNew"] == {"keep": [1, 2, 3]}
    assert obj["metadata"]["annotations"]["team"] == "vision"
    assert obj["spec"]["gpu"]["value"] == "4"
    nested = obj["spec"]["replicaSpecs"]["worker"]["template"]["metadata"]["labels"]
    assert nested == {RUN_LABEL: "r1", WORKLOAD_LABEL: "scale-r1-00003"}


def test_unknown_placeholder_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text('apiVersion: v1\nkind: Pod\nmetadata: {name: "{{ name }}-{{ colour }}"}\n')
    with pytest.raises(InputError, match=r"colour.*--set KEY=VALUE"):
        _render(ScaleProbe(template=str(path)))


def test_object_without_name_or_kind_is_refused() -> None:
    with pytest.raises(InputError, match=r"metadata\.name"):
        Template("apiVersion: v1\nkind: Pod\nspec: {}\n", "x").render({"run": "r", "name": "n"})
    with pytest.raises(InputError, match="apiVersion and kind"):
        Template("metadata: {name: a}\n", "x").render({"run": "r", "name": "n"})


def test_syntax_error_names_the_line() -> None:
    with pytest.raises(InputError, match=r"^x:2: template syntax"):
        Template("a: 1\nb: {{ name \n", "x").render({"run": "r", "name": "n"})


@pytest.mark.parametrize("kind", ["training", "distributed"])
def test_gang_adds_a_podgroup_and_the_label_priority_class_the_class(kind: str) -> None:
    config = ScaleProbe(workload_type=kind, workers=4, gang=True, priority_class="batch-high")
    objects = _render(config)
    [group] = [o for o in objects if o["kind"] == "PodGroup"]
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["name"] == "scale-r1-00003"
    assert group["spec"] == {"minMember": 4}
    job = objects[-1]
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "scale-r1-00003"
    assert pod["spec"]["priorityClassName"] == "batch-high"
    plain = _render(ScaleProbe(workload_type=kind, workers=4))
    assert "PodGroup" not in [o["kind"] for o in plain]
    assert "priorityClassName" not in plain[-1]["spec"]["template"]["spec"]


def test_gang_and_priority_class_are_refused_where_they_would_be_ignored(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--gang: the built-in interactive workload is one pod"):
        _render(ScaleProbe(workload_type="interactive", gang=True))
    plain = tmp_path / "plain.yaml"
    plain.write_text('apiVersion: v1\nkind: Pod\nmetadata: {name: "{{ name }}"}\n')
    with pytest.raises(InputError, match=r"--gang: template .* never uses \{\{ gang \}\}"):
        _render(ScaleProbe(template=str(plain), gang=True))
    with pytest.raises(InputError, match="--priority-class: template"):
        _render(ScaleProbe(template=str(plain), priority_class="x"))
    examples = Path(__file__).parents[3] / "examples" / "scale"
    gang = ScaleProbe(template=str(examples / "gang-job.yaml"), gang=True, workers=2)
    assert [o["kind"] for o in _render(gang)] == ["PodGroup", "Job"]
    custom = ScaleProbe(template=str(examples / "custom-kind.yaml"), priority_class="p")
    [workload] = _render(custom)
    assert workload["spec"]["priorityClass"] == {"value": "p"}
