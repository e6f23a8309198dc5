"""The hf reference server on a folder that is no model it can serve (issue 32): the cause
with the right exit code, never "internal error … a bug in testbed"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.core.errors import ServerStartError
from testbed.servers.reference.served import model_kind

pytestmark = [pytest.mark.reference, pytest.mark.slow]

BERT = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32}


def serve_hf(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testbed", "serve", "hf", "--model", str(folder), "--port", "0"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_config_without_weights_is_the_users_mistake(tmp_path: Path) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    done = serve_hf(tmp_path)
    assert done.returncode == 2, done.stderr
    assert "holds the config of LlamaForCausalLM but no weights" in done.stderr
    assert "a bug in testbed" not in done.stderr


def test_an_encoder_without_an_lm_head_is_not_served(tmp_path: Path) -> None:
    # bert has a causal head in transformers (BertLMHeadModel), but this folder is a
    # BertModel: the architecture it names decides
    (tmp_path / "config.json").write_text(json.dumps(BERT))
    with pytest.raises(ServerStartError, match=r"cannot serve .*BertModel, model_type bert"):
        model_kind(tmp_path)
    done = serve_hf(tmp_path)  # the BERT config alone of issue 32
    assert done.returncode == 3, done.stderr
    assert "(BertModel, model_type bert) is neither a causal LM" in done.stderr
    assert "a bug in testbed" not in done.stderr


def test_weights_transformers_cannot_read_are_named_in_its_words(tmp_path: Path) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "pytorch_model-00001-of-00002.bin").write_bytes(b"not torch")
    done = serve_hf(tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"transformers cannot load {tmp_path}" in done.stderr
    assert "a bug in testbed" not in done.stderr
