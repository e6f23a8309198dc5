"""Image → host command, and a container's env/args moved onto the host (pure functions)."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from kubemu.kubelet.environment import ConfigError, expand, relocate, resolve_env
from kubemu.kubelet.images import ImageRules, NotRunnable, host_argv
from kubemu.machinery.faults import FaultRule, fault_of
from testbed.cli.cluster import vllm_lookup
from testbed.core.errors import InputError


def test_testbed_images_run_with_this_interpreter() -> None:
    rules = ImageRules()
    sim = {"image": "ghcr.io/acme/testbed:0.1.0", "command": ["testbed"], "args": ["serve", "sim"]}
    assert host_argv(sim, rules)[0] == [sys.executable, "-m", "testbed", "serve", "sim"]
    entry = {"image": "testbed@sha256:abc", "args": ["models", "fetch", "s3://b/m"]}
    assert host_argv(entry, rules)[0] == [
        sys.executable,
        "-m",
        "testbed",
        "models",
        "fetch",
        "s3://b/m",
    ]
    script = {"image": "testbed:1", "command": ["python3", "-c", "print(1)"]}
    assert host_argv(script, rules)[0] == [sys.executable, "-c", "print(1)"]
    assert host_argv({"image": "not-testbed-really:1"}, rules)[0] is None
    assert host_argv({"image": "busybox:1.36", "command": ["sh"]}, rules)[0] is None


def test_vllm_images_run_with_the_vllm_venv(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.touch()
    rules = ImageRules(vllm_python=vllm_lookup(python))
    default = {
        "image": "vllm/vllm-openai:v0.32.0",
        "args": ["--model", "/models/m", "--port", "8000"],
    }
    assert host_argv(default, rules)[0] == [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", "/models/m", "--port", "8000", "--host", "127.0.0.1",
    ]  # fmt: skip
    serve = {
        "image": "my-vllm:1",
        "command": ["vllm", "serve", "/models/m"],
        "args": ["--host=0.0.0.0"],
    }
    assert host_argv(serve, rules)[0] == [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", "/models/m", "--host=0.0.0.0",
    ]  # fmt: skip
    missing = ImageRules(vllm_python=vllm_lookup(tmp_path / "nope"))
    with pytest.raises(NotRunnable, match="no vLLM interpreter"):
        host_argv(default, missing)[0]


def test_env_resolution_and_relocation() -> None:
    secret = {"data": {"key": base64.b64encode(b"AKIA").decode()}}
    objects = {
        ("Secret", "ns", "s3"): secret,
        ("ConfigMap", "ns", "cfg"): {"data": {"A": "1", "B": "2"}},
    }

    def lookup(kind: str, namespace: str, name: str) -> dict | None:
        return objects.get((kind, namespace, name))

    pod = {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
        "spec": {"nodeName": "n0"},
    }
    container = {
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
        "env": [
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "key"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "BOTH", "value": "$(CFG_A)-$(APP)-$$(APP)-$(UNSET)"},
            {
                "name": "OPT",
                "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": True}},
            },
        ],
    }
    env = resolve_env(container, pod, lookup)
    assert env == {
        "CFG_A": "1",
        "CFG_B": "2",
        "KEY": "AKIA",
        "APP": "x",
        "NODE": "n0",
        "BOTH": "1-x-$(APP)-$(UNSET)",
    }
    assert expand("$(KEY)", env) == "AKIA"
    with pytest.raises(ConfigError, match="couldn't find key nope in Secret ns/s3"):
        resolve_env(
            {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "nope"}}}]},
            pod,
            lookup,
        )
    ports, mounts = {8000: 41234}, [("/models", "/state/pvc/ns/m")]
    assert relocate("8000", ports, mounts) == "41234"
    assert relocate("--port=8000", ports, mounts) == "--port=41234"
    assert relocate("http://0.0.0.0:8000/health", ports, mounts) == "http://127.0.0.1:41234/health"
    assert relocate("/models/llama", ports, mounts) == "/state/pvc/ns/m/llama"
    assert relocate("--model=/models/llama", ports, mounts) == "--model=/state/pvc/ns/m/llama"
    assert relocate("/modelsx", ports, mounts) == "/modelsx"
    assert relocate("18000", ports, mounts) == "18000"


def test_fault_rules_and_annotations() -> None:
    rule = FaultRule.parse("pod=canary-*:crash:3")
    pod = {"metadata": {"name": "canary-7"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    fault = fault_of(pod, (rule,))
    assert fault is not None
    assert (fault.kind, fault.seconds) == ("crash", 3.0)
    assert fault.hits("c", init=False)
    assert not fault.hits("c", init=True)
    assert fault_of({"metadata": {"name": "stable-1"}, "spec": {}}, (rule,)) is None
    annotated = {
        "metadata": {"name": "canary-7", "annotations": {"emulator.testbed.io/fault": "oom"}}
    }
    assert fault_of(annotated, (rule,)).kind == "oom"  # type: ignore[union-attr]
    with pytest.raises(InputError, match="'-1' is not a number of seconds"):
        fault_of(
            {
                "metadata": {
                    "annotations": {
                        "emulator.testbed.io/fault": "oom",
                        "emulator.testbed.io/fault-after": "-1",
                    }
                }
            }
        )
    with pytest.raises(InputError, match="SELECTOR=GLOB:KIND"):
        FaultRule.parse("label=x:crash")


def test_tgi_and_tgis_images_are_played_by_the_reference_server_when_asked() -> None:
    """The launcher command lines testbed's own TGI and TGIS adapters write become
    ``testbed serve hf`` with the protocols, ports and limits they name; without
    ``--tgi-stand-in`` the images stay unknown."""
    from testbed.cli.cluster import tgi_stand_in
    from testbed.config.deployments import ServerDeployment, deployment_model
    from testbed.servers.adapters import adapter_for

    rules = ImageRules(tgi_stand_in=tgi_stand_in())
    deployment = deployment_model(
        {
            "name": "d",
            "server": "tgi",
            "model": "x",
            "params": {"max_batch_size": 4, "max_model_len": 512},
        }
    )
    assert isinstance(deployment, ServerDeployment)
    tgi = adapter_for("tgi").container(deployment, "/models/m")
    argv, note = host_argv(tgi, rules)
    assert argv == [
        sys.executable, "-m", "testbed", "serve", "hf", "--protocols", "tgi,openai",
        "--model", "/models/m", "--port", "8080",
        "--set", "served_model_name=tgi", "--set", "max_batch_size=4", "--set", "max_model_len=512",
    ]  # fmt: skip
    assert "ghcr.io/huggingface/text-generation-inference" in note
    assert "ignored" not in note
    tgis_deployment = deployment_model(
        {
            "name": "d",
            "server": "tgis",
            "model": "x",
            "params": {"dtype": "bfloat16", "deployment_framework": "hf_transformers"},
        }
    )
    assert isinstance(tgis_deployment, ServerDeployment)
    tgis = adapter_for("tgis").container(tgis_deployment, "/models/m")
    argv, note = host_argv(tgis, rules)
    assert argv == [
        sys.executable, "-m", "testbed", "serve", "hf", "--protocols", "tgis",
        "--model", "/models/m", "--port", "3000", "--grpc-port", "8033", "--dtype", "bfloat16",
    ]  # fmt: skip
    assert note.endswith("(TGIS gRPC); ignored: --deployment-framework hf_transformers")
    assert host_argv(tgis, ImageRules())[0] is None
