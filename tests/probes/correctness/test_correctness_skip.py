"""Skip rules against resolved deployments."""

from __future__ import annotations

from typing import Any

from testbed.probes.correctness.cases import Case
from testbed.probes.correctness.skip import skip_reason

FP32 = {
    "name": "a",
    "server": "hf",
    "params": {"dtype": "float32", "tensor_parallel": 1},
    "resources": {"gpu": 0},
}
SHARDED = {
    "name": "b",
    "server": "vllm",
    "params": {"dtype": "bfloat16", "tensor_parallel": 2},
    "resources": {"gpu": 2},
}


def case(skip: Any) -> Case:
    return Case.model_validate({"name": "c", "request": {"prompt": "x"}, "skip": skip})


def test_shard_rules() -> None:
    assert skip_reason(case(["single_shard_only"]), FP32) is None
    assert skip_reason(case(["single_shard_only"]), SHARDED) == "skipped by single_shard_only"
    assert skip_reason(case(["multi_shard_only"]), FP32) == "skipped by multi_shard_only"
    assert skip_reason(case(["single_shard_only"]), {"server": "sim"}) is None


def test_when_matches_params_top_level_dotted_and_lists() -> None:
    assert skip_reason(case([{"when": {"dtype": "float32"}}]), FP32)
    assert skip_reason(case([{"when": {"dtype": "float32"}}]), SHARDED) is None
    assert skip_reason(case([{"when": {"server": ["vllm", "tgi"]}}]), SHARDED)
    assert skip_reason(case([{"when": {"resources.gpu": 2}}]), SHARDED)
    assert skip_reason(case([{"when": {"resources.gpu": 2}}]), FP32) is None
    both = {"when": {"dtype": "bfloat16", "server": "hf"}}  # every key must match
    assert skip_reason(case([both]), SHARDED) is None
    assert skip_reason(case([{"when": {"no_such_key": 1}}]), FP32) is None


def test_unless_and_reason_text() -> None:
    rule = {"unless": {"dtype": "bfloat16"}, "reason": "bf16 only"}
    reason = skip_reason(case([rule]), FP32)
    assert reason == "skipped by unless: {dtype: bfloat16} (bf16 only)"
    assert skip_reason(case([rule]), SHARDED) is None


def test_numbers_and_booleans_compare_sensibly() -> None:
    deployment = {"params": {"max_batch_size": 1, "enforce_eager": True}}
    assert skip_reason(case([{"when": {"max_batch_size": 1.0}}]), deployment)
    assert skip_reason(case([{"when": {"enforce_eager": 1}}]), deployment) is None
    assert skip_reason(case([{"when": {"enforce_eager": True}}]), deployment)
