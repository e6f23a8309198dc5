"""Which kind of model a folder holds, and the one interface the engine drives both through.

A folder's ``config.json`` names its architecture. transformers' own tables say whether it
is a decoder-only causal LM (``model.py``: padded batched products, per-row attention) or an
encoder-decoder (``seq2seq.py``: flan-t5, BART …). An architecture in neither table is
refused at start naming it (exit 3): it is not a bug in testbed, the reference server simply
does not serve that kind of model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Protocol

import torch

from testbed.core.errors import InputError, ServerStartError
from testbed.servers.models import folder_problem

ModelKind = Literal["causal", "seq2seq"]


class ServedModel(Protocol):
    """What the engine and the protocol handlers use of a loaded model."""

    tokenizer: Any
    name: str
    eos_ids: frozenset[int]
    max_len: int
    row_multiple: int
    dtype: torch.dtype

    @property
    def kind(self) -> str: ...

    def unpad(self) -> None: ...

    def new_cache(self, capacity: int) -> Any: ...

    def prefill(self, ids: list[int], cache: Any) -> torch.Tensor: ...

    def decode(self, tokens: list[int], caches: list[Any]) -> torch.Tensor: ...


def special_ids(tokenizer: Any) -> frozenset[int]:
    """Ids that ``decode(skip_special_tokens=True)`` leaves out: the named special tokens and
    every added token marked special (SmolLM2's ``<jupyter_output>`` …)."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    marked = {int(i) for i, token in added.items() if getattr(token, "special", False)}
    named = getattr(tokenizer, "all_special_ids", ()) or ()
    return frozenset(marked | {int(i) for i in named})


def model_kind(folder: Path) -> ModelKind:
    """``causal`` or ``seq2seq`` by the folder's config.json; :class:`ServerStartError`
    naming the architecture when transformers has neither head for it."""
    from transformers import __version__
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ServerStartError(
            f"{folder} holds no readable config.json ({exc}); give a transformers model folder"
        ) from exc
    architectures = [str(a) for a in config.get("architectures") or []]
    model_type = str(config.get("model_type", ""))
    seq2seq, causal = (
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    )
    # The architecture decides: BART has both heads, and its folder says which it is. A
    # folder that names only others (BertModel: an encoder, no LM head) is not served, though
    # its model type has a causal head in transformers. Without one, the model type decides.
    for architecture in architectures:
        if architecture in seq2seq.values():
            return "seq2seq"
        if architecture in causal.values():
            return "causal"
    if not architectures and model_type in seq2seq:
        return "seq2seq"
    if not architectures and model_type in causal:
        return "causal"
    named = ", ".join(architectures) or "none named"
    raise ServerStartError(
        f"the hf reference server cannot serve {folder}: its architecture ({named}, model_type"
        f" {model_type or '?'}) is neither a causal LM (AutoModelForCausalLM) nor an"
        f" encoder-decoder (AutoModelForSeq2SeqLM) in transformers {__version__}; serve it"
        " with a server kind that supports it (vllm, tgi, tgis)"
    )


def load_served(
    folder: Path, *, name: str, dtype: str, max_batch: int, store: Path | None
) -> ServedModel:
    """Load ``folder`` as the kind of model it holds (threads must be set before).

    An architecture it cannot serve is a :class:`ServerStartError` (exit 3, naming it); a
    folder without its weights is the user's mistake (:class:`InputError`, exit 2); files
    transformers cannot load are named in its own words (exit 3) — never "a bug in
    testbed"."""
    from testbed.servers.reference.model import DTYPES, load_model

    kind = model_kind(folder)  # first: an architecture it cannot serve needs no weights
    problem = folder_problem(folder)
    if problem is not None:
        raise InputError(f"the hf reference server cannot load the model: {problem}")
    if kind == "seq2seq":
        from testbed.servers.reference.seq2seq import load_seq2seq

        torch_dtype = DTYPES["float32" if dtype == "auto" else dtype]
        return load_seq2seq(folder, name=name, torch_dtype=torch_dtype)
    return load_model(folder, name=name, dtype=dtype, max_batch=max_batch, store=store)
