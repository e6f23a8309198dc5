"""Which models the reference server serves: a folder's architecture picks the causal or the
encoder-decoder path, and one it cannot serve is refused at start naming the architecture
(exit 3, an infrastructure limit, never "a bug in testbed"). The tiny T5's recipe is
deterministic: two builds give the same weights, so goldens recorded from one fit the other.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.core.errors import ServerStartError
from testbed.servers.models import prepare
from testbed.servers.reference.seeded import build_seeded_t5
from testbed.servers.reference.served import model_kind

pytestmark = [pytest.mark.reference, pytest.mark.slow]


def folder_with(tmp_path: Path, config: dict[str, object]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        ({"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"}, "seq2seq"),
        ({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, "causal"),
        ({"architectures": ["BartForConditionalGeneration"], "model_type": "bart"}, "seq2seq"),
        ({"architectures": ["BartForCausalLM"], "model_type": "bart"}, "causal"),
        ({"model_type": "t5"}, "seq2seq"),  # no architectures: the model type decides
    ],
)
def test_the_architecture_picks_the_path(
    tmp_path: Path, config: dict[str, object], kind: str
) -> None:
    assert model_kind(folder_with(tmp_path, config)) == kind


def test_an_unknown_architecture_is_refused_naming_it(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, {"architectures": ["FooForBar"], "model_type": "foo"})
    with pytest.raises(ServerStartError, match=r"FooForBar, model_type foo.*AutoModelForSeq2SeqLM"):
        model_kind(folder)
    with pytest.raises(ServerStartError, match=r"no readable config\.json"):
        model_kind(tmp_path / "missing")


def test_serve_refuses_an_unknown_architecture_with_exit_3(tmp_path: Path) -> None:
    folder = folder_with(tmp_path / "model", {"architectures": ["FooForBar"], "model_type": "foo"})
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "serve", "hf", "--model", str(folder), "--port", "0"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "FooForBar" in done.stderr
    assert "a bug in testbed" not in done.stderr


def test_the_tiny_t5_recipe_is_deterministic(tiny_t5_folder: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    meta = build_seeded_t5(again, prepare("smollm2-135m"))

    def digest(folder: Path) -> str:
        return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()

    assert digest(again) == digest(tiny_t5_folder)
    assert meta["architecture"] == "T5ForConditionalGeneration"
    config = json.loads((again / "config.json").read_text())
    assert config["vocab_size"] == 49_152
    assert config["feed_forward_proj"] == "gated-gelu"
    assert not (again / "chat_template.jinja").exists()  # flan-t5 has no chat template
