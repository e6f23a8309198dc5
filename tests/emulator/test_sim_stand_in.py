"""vLLM images played by the simulator (``kubelet/sim_stand_in.py``): the vLLM flags with a
simulator equivalent become its parameters, the others are named on the log's first line."""

from __future__ import annotations

import argparse
import json

import pytest

from testbed.cli.serve import register
from testbed.config.sim import SimParams
from testbed.emulator import ImageRules, vllm_sim_stand_in
from testbed.emulator.kubelet.images import host_argv


def sets(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--set")


def test_llm_d_vllm_flags_become_simulator_parameters() -> None:
    container = {
        "image": "ghcr.io/llm-d/llm-d-cuda:v0.3.0",
        "command": ["vllm", "serve"],
        "args": ["Qwen/Qwen3-0.6B", "--port=41000", "--enable-prefix-caching",
                 "--block-size=32", "--num-gpu-blocks-override", "100", "--max-num-seqs", "8",
                 "--gpu-memory-utilization=0.9"],
    }  # fmt: skip
    argv, note = host_argv(container, ImageRules(sim_stand_in=vllm_sim_stand_in))
    assert argv[2:5] == ["testbed", "serve", "sim"]
    assert argv[argv.index("--port") + 1] == "41000"
    assert argv[argv.index("--model") + 1] == "Qwen/Qwen3-0.6B"
    given = sets(argv)
    assert given["kv_cache_tokens"] == "3200"  # 100 blocks of 32
    assert given["prefix_caching"] == "true"
    assert given["max_concurrency"] == "8"
    assert argv[argv.index("--params-env") + 1] == "TESTBED_SIM_PARAMS"
    SimParams.model_validate({k: json.loads(v) for k, v in given.items()})
    assert "ignored: --gpu-memory-utilization 0.9" in note


def test_without_the_flag_vllm_images_stay_vllm_and_the_scheduler_image_is_unknown() -> None:
    assert ImageRules().family("vllm/vllm-openai:v0.10.0") == "vllm"
    on = ImageRules(sim_stand_in=vllm_sim_stand_in)
    assert on.family("vllm/vllm-openai:v0.10.0") == "sim"
    assert on.family("ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.0") == "unknown"


def test_serve_sim_reads_params_from_the_environment_under_the_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from testbed.cli.serve import sim_params
    from testbed.core.errors import InputError

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register(sub)
    monkeypatch.setenv("TESTBED_SIM_PARAMS", '{"ttft_ms": 7, "jitter": {"itl_scale_ms": 2}}')
    args = parser.parse_args(
        ["serve", "sim", "--params-env", "TESTBED_SIM_PARAMS", "--set", "ttft_ms=9"]
    )
    params = sim_params(args)
    assert params.ttft_ms == 9  # --set wins over the environment
    assert params.jitter.itl_scale_ms == 2
    monkeypatch.setenv("TESTBED_SIM_PARAMS", "{")
    with pytest.raises(InputError, match="TESTBED_SIM_PARAMS is not JSON"):
        sim_params(parser.parse_args(["serve", "sim", "--params-env", "TESTBED_SIM_PARAMS"]))
