"""tgis-tester's model configs as its users wrote them: TGIS's own deployment_framework
values pass through to the launcher, the field has no silent default (the seed requires it),
and sharding follows TGIS's documentation (tensor parallel in tgis_native or hf_custom_tp;
hf_accelerate spreads one process over several GPUs; flash attention in the TP engines)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.config.deployments import TgisDeployment
from testbed.config.loader import load_campaign
from testbed.core.errors import CampaignError
from testbed.servers.adapters import adapter_for


def campaign(tmp_path: Path, **config: Any) -> Path:
    deployment = {"name": "t5", "server": "tgis", "model": "google/flan-t5-small", **config}
    data = {
        "name": "tgis",
        "backend": {"kind": "kubernetes", "context": "x"},
        "deployments": [deployment],
        "correctness": {"cases": ["cases.yaml"], "protocol": "tgis"},
    }
    (tmp_path / "cases.yaml").write_text("[]\n")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def container_env_and_args(tmp_path: Path, **config: Any) -> tuple[dict[str, str], list[str]]:
    loaded = load_campaign(str(campaign(tmp_path, **config)))
    deployment = loaded.campaign.deployments[0]
    assert isinstance(deployment, TgisDeployment)
    spec = adapter_for("tgis").container(deployment, "/models/m")
    env = {e["name"]: e["value"] for e in spec.get("env", []) if "value" in e}
    return env, list(spec.get("args") or [])


def test_deployment_framework_is_required(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match=r"params\.deployment_framework is required for tgis"):
        load_campaign(str(campaign(tmp_path, params={"dtype_str": "float32"})))
    with pytest.raises(CampaignError, match="tgis_native"):  # the choices are listed
        load_campaign(str(campaign(tmp_path)))


@pytest.mark.parametrize("framework", ["tgis_native", "hf_accelerate", "hf_optimum_bt"])
def test_tgis_own_frameworks_pass_through(tmp_path: Path, framework: str) -> None:
    _, args = container_env_and_args(
        tmp_path, params={"deployment_framework": framework, "dtype_str": "float16"}
    )
    at = args.index("--deployment-framework")
    assert args[at + 1] == framework


@pytest.mark.parametrize("framework", ["tgis_native", "hf_custom_tp"])
def test_sharding_in_the_tensor_parallel_engines(tmp_path: Path, framework: str) -> None:
    env, _ = container_env_and_args(
        tmp_path,
        params={"deployment_framework": framework, "num_shard": 2, "dtype_str": "float16"},
        resources={"gpu": 2},
    )
    assert env["NUM_GPUS"] == "2"


@pytest.mark.parametrize("framework", ["hf_transformers", "hf_optimum_ort"])
def test_sharding_elsewhere_is_refused_naming_tgis_native(tmp_path: Path, framework: str) -> None:
    path = campaign(
        tmp_path,
        params={"deployment_framework": framework, "num_shard": 2, "dtype_str": "float16"},
        resources={"gpu": 2},
    )
    with pytest.raises(
        CampaignError,
        match=rf"tensor_parallel 2\) needs a tensor-parallel engine, and {framework}.*tgis_native",
    ):
        load_campaign(str(path))


def test_hf_accelerate_spreads_one_process_over_its_gpus(tmp_path: Path) -> None:
    env, _ = container_env_and_args(
        tmp_path,
        params={"deployment_framework": "hf_accelerate", "dtype_str": "float16"},
        resources={"gpu": 2},
    )
    assert env["NUM_GPUS"] == "1"  # one shard; the device plugin gives it both GPUs
    sharded = campaign(
        tmp_path,
        params={"deployment_framework": "hf_accelerate", "num_shard": 2, "dtype_str": "float16"},
        resources={"gpu": 2},
    )
    with pytest.raises(CampaignError, match="tensor_parallel: 1 with hf_accelerate"):
        load_campaign(str(sharded))


def test_flash_attention_only_in_the_tensor_parallel_engines(tmp_path: Path) -> None:
    path = campaign(
        tmp_path,
        params={"deployment_framework": "hf_transformers", "flash_attention": True,
                "dtype_str": "float16"},
    )  # fmt: skip
    with pytest.raises(CampaignError, match="flash_attention runs in tgis_native or hf_custom_tp"):
        load_campaign(str(path))


CASES = """\
- name: fine
  request: {prompt: Hi, max_new_tokens: 4, extra: {temperature: -1, truncate_input_tokens: 8}}
  error: {status: 400}
- name: openai-only
  request:
    prompt: Hi
    max_new_tokens: 4
    extra: {model: other, logit_bias: {"1": 5}}
  error: {status: 404}
- name: chat-is-skipped-not-refused
  request:
    messages: [{role: user, content: Hi}]
    extra: {model: other}
  error: {status: 404}
"""


@pytest.mark.parametrize("protocol", ["tgis", "openai"])
def test_openai_only_fields_over_tgis_are_refused_at_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    from testbed.cli import main

    (tmp_path / "cases.yaml").write_text(CASES)
    data = {
        "name": "fields",
        "deployments": [{"name": "sim", "server": "sim",
                         "params": {"protocols": ["openai", "tgi", "tgis"]}}],
        "correctness": {"cases": ["cases.yaml"], "protocol": protocol},
    }  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    if protocol == "openai":
        assert code == 0, err
        return
    assert code == 2
    cases = tmp_path / "cases.yaml"
    assert f"{cases}:8:13: case 'openai-only' runs over protocol tgis" in err
    assert "request.extra.model is not a field of TGIS's request" in err
    assert "request.extra.logit_bias" in err
    assert "'fine'" not in err
    assert "chat-is-skipped" not in err
