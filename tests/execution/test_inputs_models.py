"""A local model folder is checked before a run starts (issue 32): a folder with a config
but no weights (a BERT config alone) is the user's mistake, refused at validation with the
line and the fix (exit 2) — not "internal error … a bug in testbed" a minute into the run,
after a silent retry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cli import main

BERT = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32}


def campaign(tmp_path: Path, folder: Path, server: str = "hf") -> Path:
    file = tmp_path / "c.yaml"
    file.write_text(
        f"name: m\ndeployments:\n  - name: a\n    server: {server}\n    model: {folder}\n"
        "load: {requests: 1}\n"
    )
    return file


@pytest.mark.parametrize("server", ["hf", "vllm"])
def test_a_config_without_weights_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str
) -> None:
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT))
    file = campaign(tmp_path, folder, server)
    assert main(["validate", str(file)]) == 2
    assert main(["run", str(file), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert (
        f"{file}:5:12: deployments[0].model: {folder} holds the config of BertModel but no"
        " weights (no *.safetensors, *.bin or shard index) — copy the weights beside"
        " config.json"
    ) in err
    assert "a bug in testbed" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "has no config.json: not a model folder"),
        ("{not json", "config.json cannot be read as JSON"),
        ("[1, 2]", "config.json is not a JSON object"),
    ],
)
def test_a_folder_that_is_no_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str | None, message: str
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    if config is not None:
        (folder / "config.json").write_text(config)
    assert main(["validate", str(campaign(tmp_path, folder))]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model-00001-of-00002.bin",
                                     "model.safetensors.index.json"])  # fmt: skip
def test_a_folder_with_its_weights_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], weights: str
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT))
    (folder / weights).write_bytes(b"{}")
    assert main(["validate", str(campaign(tmp_path, folder))]) == 0, capsys.readouterr().err
