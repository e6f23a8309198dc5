"""Server adapters: how generic deployment parameters become each server's flags and env."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.config.deployments import (
    HfParams,
    ServerDeployment,
    TgiParams,
    VllmParams,
    deployment_model,
)
from testbed.config.sim import SimParams
from testbed.core.errors import InfrastructureError, InputError
from testbed.servers.adapters import adapter_for
from testbed.servers.adapters.vllm import vllm_python

MODEL = Path("/cache/models/smollm2-135m")


def deployment(server: str, **fields: Any) -> ServerDeployment:
    """A resolved deployment of ``server``, validated as the planner validates it."""
    model = deployment_model({"name": "d", "server": server, "model": "m", **fields})
    assert isinstance(model, ServerDeployment)
    return model


def value_after(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_adapter_for_knows_every_real_kind() -> None:
    for kind in ("sim", "hf", "vllm", "tgi", "tgis"):
        assert adapter_for(kind).kind == kind
    with pytest.raises(InputError, match="known: hf, sim, tgi, tgis, vllm"):
        adapter_for("triton")


# -- vLLM -------------------------------------------------------------------------------------


def vllm_params(**changes: Any) -> VllmParams:
    params = {
        "dtype": "float32",
        "max_model_len": 2048,
        "max_batch_size": 32,
        "tensor_parallel": 1,
        "extra_args": ["--seed", "7"],
        "env": {},
        "enforce_eager": True,
        "gpu_memory_utilization": 0.8,
        "kv_cache_gb": 1.5,
        "python": sys.executable,
    }
    return VllmParams.model_validate(params | changes)


def test_vllm_maps_generic_parameters_to_its_flags() -> None:
    argv = adapter_for("vllm").command(vllm_params(), MODEL, "127.0.0.1", 8123)
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert value_after(argv, "--model") == str(MODEL)
    assert value_after(argv, "--served-model-name") == "smollm2-135m"
    assert value_after(argv, "--dtype") == "float32"
    assert value_after(argv, "--max-model-len") == "2048"
    assert value_after(argv, "--max-num-seqs") == "32"
    assert value_after(argv, "--tensor-parallel-size") == "1"
    assert value_after(argv, "--gpu-memory-utilization") == "0.8"
    assert value_after(argv, "--host") == "127.0.0.1"
    assert value_after(argv, "--port") == "8123"
    assert "--enforce-eager" in argv
    assert argv[argv.index("--seed") : argv.index("--seed") + 2] == ["--seed", "7"]


def test_vllm_leaves_unset_parameters_to_vllm() -> None:
    params = vllm_params(
        max_model_len=None, max_batch_size=None, gpu_memory_utilization=None, enforce_eager=False
    )
    argv = adapter_for("vllm").command(params, MODEL, "127.0.0.1", 1)
    for absent in ("--max-model-len", "--max-num-seqs", "--gpu-memory-utilization"):
        assert absent not in argv
    assert "--enforce-eager" not in argv


def test_vllm_env_rounds_kv_cache_up_to_whole_gib() -> None:
    adapter = adapter_for("vllm")
    env = adapter.env(vllm_params(kv_cache_gb=1.5))
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" not in adapter.env(vllm_params(kv_cache_gb=None))


def test_vllm_container_uses_the_image_entry_point() -> None:
    vllm = deployment("vllm", model="bundled:smollm2-135m", params=vllm_params())
    spec = adapter_for("vllm").container(vllm, "/models/smollm2-135m")
    assert spec["image"].startswith("vllm/vllm-openai:")
    assert "command" not in spec
    assert spec["args"][:4] == [
        "--model",
        "/models/smollm2-135m",
        "--served-model-name",
        "smollm2-135m",
    ]
    assert value_after(spec["args"], "--port") == "8000"
    assert {"name": "VLLM_CPU_KVCACHE_SPACE", "value": "2"} in spec["env"]
    assert not any(e["name"] == "HF_HUB_OFFLINE" for e in spec["env"])  # pods may use the hub
    assert spec["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    custom = adapter_for("vllm").container(vllm.model_copy(update={"image": "my/vllm:1"}), "m")
    assert custom["image"] == "my/vllm:1"


def test_vllm_python_order(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("")
    assert vllm_python(str(fake), {}) == fake
    assert vllm_python(None, {"TESTBED_VLLM_PYTHON": str(fake)}) == fake
    with pytest.raises(InputError, match=r"params\.python"):
        vllm_python(str(tmp_path / "absent"), {})


def test_vllm_python_missing_says_make_vllm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import testbed.servers.adapters.vllm as vllm_module

    monkeypatch.setattr(vllm_module, "_REPO", tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InfrastructureError, match="make vllm"):
        vllm_python(None, {})


def test_local_servers_refuse_hub_ids() -> None:
    with pytest.raises(InputError, match="hub"):
        adapter_for("vllm").command(vllm_params(), None, "127.0.0.1", 1)
    with pytest.raises(InputError, match="hub"):
        adapter_for("hf").command(HfParams(), None, "127.0.0.1", 1)


# -- hf, sim ------------------------------------------------------------------------------


def test_hf_runs_testbed_serve_hf() -> None:
    params = {"threads": 2, "dtype": "float32", "max_batch_size": 16, "extra_args": []}
    argv = adapter_for("hf").command(HfParams.model_validate(params), MODEL, "127.0.0.1", 9000)
    assert argv[:5] == [sys.executable, "-m", "testbed", "serve", "hf"]
    assert value_after(argv, "--model") == str(MODEL)
    assert value_after(argv, "--threads") == "2"
    assert "max_batch_size=16" in argv
    assert "served_model_name=smollm2-135m" in argv
    assert not any(a.startswith("max_model_len") for a in argv)
    hf = deployment("hf", model="bundled:smollm2-135m", params=params)
    assert adapter_for("hf").served_model_name(hf) == "smollm2-135m"
    spec = adapter_for("hf").container(hf, "/models/smollm2-135m")
    assert spec["command"] == ["testbed"]
    assert value_after(spec["args"], "--host") == "0.0.0.0"


def test_sim_passes_only_changed_parameters_and_they_round_trip() -> None:
    params = {"itl_ms": 5, "jitter": {"distribution": "normal", "itl_scale_ms": 1.5}}
    argv = adapter_for("sim").command(SimParams.model_validate(params), None, "127.0.0.1", 9001)
    assert argv[:5] == [sys.executable, "-m", "testbed", "serve", "sim"]
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    assert len(sets) == 3  # itl_ms, jitter.distribution, jitter.itl_scale_ms
    parsed: dict[str, Any] = {}
    for item in sets:
        key, _, raw = item.partition("=")
        node = parsed
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    assert SimParams.model_validate(parsed) == SimParams.model_validate(params)
    sim = adapter_for("sim")
    assert sim.served_model_name(deployment("sim", params={"model_name": "x"})) == "x"
    assert sim.served_model_name(deployment("sim")) == "sim-model"


# -- TGI, TGIS --------------------------------------------------------------------------


def test_tgi_launcher_flags() -> None:
    params = {
        "dtype": "bfloat16",
        "tensor_parallel": 2,
        "max_batch_size": 16,
        "max_input_length": 1024,
        "max_model_len": 2048,
        "flash_attention": True,
        "extra_args": ["--quantize", "bitsandbytes"],
    }
    tgi = deployment("tgi", model="org/model", params=params, resources={"gpu": 2})
    spec = adapter_for("tgi").container(tgi, "org/model")
    args = spec["args"]
    assert spec["image"].startswith("ghcr.io/huggingface/text-generation-inference:")
    assert value_after(args, "--model-id") == "org/model"
    assert value_after(args, "--num-shard") == "2"
    assert value_after(args, "--dtype") == "bfloat16"
    assert value_after(args, "--max-batch-size") == "16"
    assert value_after(args, "--max-input-tokens") == "1024"
    assert value_after(args, "--max-total-tokens") == "2048"
    assert value_after(args, "--port") == "8080"
    assert args[-2:] == ["--quantize", "bitsandbytes"]
    assert spec["env"] == []
    assert adapter_for("tgi").protocols == ("tgi", "openai")


def test_tgi_omits_dtypes_it_does_not_take_and_disables_flash_attention() -> None:
    params = {"dtype": "float32", "tensor_parallel": 1}
    spec = adapter_for("tgi").container(deployment("tgi", params=params), "m")
    assert "--dtype" not in spec["args"]
    assert "--num-shard" not in spec["args"]
    assert {"name": "USE_FLASH_ATTENTION", "value": "false"} in spec["env"]
    with pytest.raises(NotImplementedError, match="only in a cluster"):
        adapter_for("tgi").command(TgiParams.model_validate(params), MODEL, "127.0.0.1", 1)


def env_of(spec: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in spec["env"]}


def test_tgis_sharded_gpu_deployment() -> None:
    params = {
        "dtype": "float16",
        "deployment_framework": "hf_custom_tp",
        "tensor_parallel": 2,
        "max_batch_size": 12,
        "flash_attention": True,
        "env": {"EXTRA": "1"},
    }
    tgis = deployment("tgis", model="google/flan-t5-small", params=params, resources={"gpu": 2})
    spec = adapter_for("tgis").container(tgis, "google/flan-t5-small")
    assert spec["image"].startswith("quay.io/opendatahub/text-generation-inference:")
    assert spec["command"] == ["text-generation-launcher"]
    assert value_after(spec["args"], "--deployment-framework") == "hf_custom_tp"
    assert value_after(spec["args"], "--dtype-str") == "float16"
    assert value_after(spec["args"], "--max-batch-size") == "12"
    env = env_of(spec)
    assert env == {"NUM_GPUS": "2", "FLASH_ATTENTION": "true", "PT2_COMPILE": "false", "EXTRA": "1"}
    assert [p["containerPort"] for p in spec["ports"]] == [3000, 8033]
    assert spec["readinessProbe"]["httpGet"]["port"] == 3000


def test_tgis_cpu_only_hides_cuda() -> None:
    params = {"dtype": "float32", "deployment_framework": "hf_transformers"}
    cpu = deployment("tgis", params=params, resources={"gpu": 0})  # tgis defaults to 1 GPU
    spec = adapter_for("tgis").container(cpu, "m")
    env = env_of(spec)
    assert env["CUDA_VISIBLE_DEVICES"] == "-1"
    assert "NUM_GPUS" not in env
    assert adapter_for("tgis").protocols == ("tgis",)  # gRPC only


def test_tgis_pt2_compile_is_passed_on() -> None:
    params = {"dtype": "float32", "pt2_compile": True, "deployment_framework": "hf_transformers"}
    spec = adapter_for("tgis").container(deployment("tgis", params=params), "m")
    assert env_of(spec)["PT2_COMPILE"] == "true"
