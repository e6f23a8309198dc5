"""vLLM images played by the simulator (``standins/vllm_sim.py``): the vLLM command line is read
as vLLM reads it, vLLM's defaults included (prefix caching on); the flags with a simulator
equivalent become its parameters, the others are named on the log's first line and on the
simulator's /metrics."""

from __future__ import annotations

import argparse
import json

import pytest

from kubemu import ImageRules, vllm_sim_stand_in
from kubemu.kubelet.images import host_argv
from testbed.cli.serve import register
from testbed.config.sim import SimParams


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
    assert note.endswith("not played: --gpu-memory-utilization 0.9")
    assert json.loads(given["not_played"]) == ["--gpu-memory-utilization 0.9"]
    assert "--default" not in argv  # the override sized the cache


def played(args: list[str], image: str = "vllm/vllm-openai:v0.32.0") -> tuple[list[str], str]:
    container = {"image": image, "command": ["vllm", "serve"], "args": args}
    return host_argv(container, ImageRules(sim_stand_in=vllm_sim_stand_in))


def test_vllms_defaults_are_played_prefix_caching_on_without_the_flag() -> None:
    argv, note = played(["Qwen/Qwen3-0.6B", "--port", "41000"])
    given = sets(argv)
    assert given["prefix_caching"] == "true"  # vLLM V1 caches prefixes unless told not to
    assert given["block_size"] == "16"
    assert given["max_concurrency"] == "256"
    assert argv[argv.index("--default") + 1] == "kv_cache_tokens=131072"
    assert "--gpu-memory-utilization 0.92" in note
    assert "not played" not in note
    assert "not_played" not in given
    SimParams.model_validate(
        {"kv_cache_tokens": 131072, **{k: json.loads(v) for k, v in given.items()}}
    )


def test_the_off_switch_aliases_and_a_cpu_build() -> None:
    argv, _ = played(["M", "--no-enable-prefix-caching", "-tp", "2", "--max_num_seqs=4"])
    given = sets(argv)
    assert given["prefix_caching"] == "false"
    assert given["tensor_parallel"] == "2"
    assert given["max_concurrency"] == "4"
    cpu = sets(played(["M", "-tp", "2"], image="vllm/vllm-openai-cpu:v0.32.0")[0])
    assert cpu["block_size"] == "128"
    assert cpu["max_concurrency"] == "256"  # 128 per rank on a CPU


def test_served_name_wins_and_flags_it_cannot_play_are_said() -> None:
    argv, note = played(["M", "--served-model-name", "a", "b", "--kv-cache-dtype=fp8",
                         "--no-enable-chunked-prefill", "--swap-space", "4"])  # fmt: skip
    assert argv[argv.index("--model") + 1] == "a"
    missing = ["--kv-cache-dtype fp8", "--no-enable-chunked-prefill",
               "--served-model-name beyond a", "--swap-space 4"]  # fmt: skip
    assert json.loads(sets(argv)["not_played"]) == missing
    assert note.endswith("not played: " + ", ".join(missing))


def test_a_line_vllm_refuses_makes_the_container_exit_2_with_vllms_reason() -> None:
    import subprocess
    import sys

    argv, note = played(["M", "--max-num-seqs", "lots"])
    assert "argument --max-num-seqs: invalid value: 'lots'" in note
    done = subprocess.run(
        [sys.executable, *argv[1:]], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 2
    assert "invalid value: 'lots'" in done.stderr


def test_the_not_played_flags_are_on_the_simulators_metrics() -> None:
    from testbed.servers.sim.metrics import SimMetrics

    text = SimMetrics("m", ("--kv-cache-dtype fp8", '--x "y"')).render()
    assert (
        'testbed_sim:not_played_info{model_name="m",flags="--kv-cache-dtype fp8; --x \\"y\\""} 1'
        in text
    )
    assert "not_played_info" not in SimMetrics("m").render()


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
    default = ["--default", "kv_cache_tokens=131072", "--default", "ttft_ms=1"]
    params = sim_params(
        parser.parse_args(["serve", "sim", "--params-env", "TESTBED_SIM_PARAMS", *default])
    )
    assert (params.kv_cache_tokens, params.ttft_ms) == (131072, 7)  # the environment wins
    monkeypatch.setenv("TESTBED_SIM_PARAMS", '{"kv_cache_tokens": 4480}')
    again = ["serve", "sim", "--params-env", "TESTBED_SIM_PARAMS", *default]
    assert sim_params(parser.parse_args(again)).kv_cache_tokens == 4480
    assert params.jitter.itl_scale_ms == 2
    monkeypatch.setenv("TESTBED_SIM_PARAMS", "{")
    with pytest.raises(InputError, match="TESTBED_SIM_PARAMS is not JSON"):
        sim_params(parser.parse_args(["serve", "sim", "--params-env", "TESTBED_SIM_PARAMS"]))
