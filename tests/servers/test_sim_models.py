"""The simulator serving several model names (issue 37): a LoRA adapter each, with its own
latency; listed at /v1/models as vLLM lists adapters; any other name answered 404 in vLLM
0.32's words (serve/engine/serving.py, _check_model)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from pydantic import ValidationError

from testbed.cli import build_parser
from testbed.cli.serve import sim_params
from testbed.config.sim import SimParams
from testbed.core.errors import InputError
from testbed.servers.sim import serve_in_thread

PARAMS = SimParams(model_name="base", ttft_ms=0.0, models={"slow": {"ttft_ms": 120.0}, "same": {}})


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
    request = urllib.request.Request(
        f"{url}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read()), time.monotonic() - start
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), time.monotonic() - start


def test_models_are_listed_with_the_base_as_parent() -> None:
    with serve_in_thread(PARAMS) as url, urllib.request.urlopen(f"{url}/v1/models") as answer:
        cards = json.loads(answer.read())["data"]
    assert [(c["id"], c["parent"]) for c in cards] == [
        ("base", None),
        ("slow", "base"),
        ("same", "base"),
    ]


def test_each_model_answers_with_its_own_latency_and_others_are_404() -> None:
    with serve_in_thread(PARAMS) as url:
        asked = {"prompt": "a b c", "max_tokens": 2}
        slow = _post(url, {**asked, "model": "slow"})
        base = _post(url, {**asked, "model": "base"})
        unnamed = _post(url, asked)
        missing = _post(url, {**asked, "model": "nope"})
    assert slow[0] == base[0] == unnamed[0] == 200
    assert slow[1]["model"] == "base"  # vLLM reports the base model's name
    assert slow[2] >= 0.12
    assert base[2] < 0.12
    assert missing[0] == 404
    assert missing[1]["error"] == {
        "message": "The model `nope` does not exist. Valid aliases: base.",
        "type": "NotFoundError",
        "param": "model",
        "code": 404,
    }


def test_params_for_a_model_take_the_top_levels_unless_set() -> None:
    assert PARAMS.for_model("slow").ttft_ms == 120.0
    assert PARAMS.for_model("same") == PARAMS.model_copy()
    assert PARAMS.for_model(None) is PARAMS
    assert not PARAMS.instant  # one adapter waits
    assert SimParams(models={"a": {}}).instant
    with pytest.raises(ValidationError, match="is model_name itself"):
        SimParams(model_name="a", models={"a": {}})


def test_adapter_flags_become_params_models() -> None:
    args = build_parser().parse_args(
        ["serve", "sim", "--model", "base", "--adapter", "a:ttft_ms=20,itl_ms=5", "--adapter", "b"]
    )
    params = sim_params(args)
    assert params.for_model("a").ttft_ms == 20.0
    assert params.for_model("a").itl_ms == 5.0
    assert set(params.models) == {"a", "b"}
    for bad in (":ttft_ms=1", "a:ttft_ms"):
        with pytest.raises(InputError, match="--adapter"):
            sim_params(build_parser().parse_args(["serve", "sim", "--adapter", bad]))
