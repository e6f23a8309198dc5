"""The transformers model, run so that a request's greedy output never depends on its batch.

A reference server is only a yardstick if the tokens it returns for a request are the same
whether the request ran alone or beside 31 others. Plain batched decoding does not give that
on a CPU, for two reasons, and this module removes both while keeping transformers' own
model code (weights, rotary embeddings, norms, MLP):

- **Attention over padding.** Left-padded batches change the length (and so the rounding)
  of every softmax and weighted sum. Here each request owns its KV cache (:class:`RowCache`,
  preallocated for prompt + max_tokens), and attention is computed row by row on exactly
  that request's keys, through an attention function registered with transformers.
- **Matrix products whose kernel depends on the row count.** Every linear layer pads its
  rows to a multiple found at start-up (``invariance.py``), so a lone request runs exactly
  the arithmetic it would run in any batch.

The price: one request alone is about half as fast as an unpadded decode. Correctness first.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from testbed.core.errors import ServerStartError
from testbed.servers.reference.invariance import (
    PaddedLinear,
    Shape,
    expected_shapes,
    row_multiple_for,
)

ATTENTION = "testbed_rows"


class RowCache:
    """One request's keys and values for every layer, preallocated, filled left to right."""

    def __init__(
        self,
        layers: int,
        kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (1, kv_heads, capacity, head_dim)
        # The cache holds what the attention layers produce: the model's own dtype.
        self.keys = [torch.empty(shape, dtype=dtype) for _ in range(layers)]
        self.values = [torch.empty(shape, dtype=dtype) for _ in range(layers)]
        self.capacity = capacity
        self.length = 0  # tokens stored (the same in every layer after a forward pass)

    def write(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> int:
        """Store ``keys``/``values`` of shape (1, heads, n, dim) after the current tokens."""
        start, n = self.length, keys.shape[2]
        if start + n > self.capacity:
            raise ValueError(f"KV cache of {self.capacity} tokens is full")
        self.keys[layer][:, :, start : start + n] = keys
        self.values[layer][:, :, start : start + n] = values
        return start + n


class BatchCache:
    """What the model sees as ``past_key_values``: writes each row into its own RowCache.

    It returns the new keys unchanged; the attention function reads the full per-row
    history from the RowCaches instead (``testbed_rows`` kwarg).
    """

    def __init__(self, rows: list[RowCache]) -> None:
        self.rows = rows
        self.new_length = [r.length for r in rows]

    def update(
        self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int, *_: Any, **__: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        for i, row in enumerate(self.rows):
            self.new_length[i] = row.write(layer_idx, keys[i : i + 1], values[i : i + 1])
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return max(r.length for r in self.rows)

    def commit(self) -> None:
        """After a forward pass: every row now holds its new tokens."""
        for row, length in zip(self.rows, self.new_length, strict=True):
            row.length = length


def rows_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of each row on its own cached history, never on another row's padding."""
    cache: BatchCache = kwargs["testbed_rows"]
    layer = int(module.layer_idx)  # type: ignore[arg-type]
    groups = int(module.num_key_value_groups)  # type: ignore[arg-type]
    q_len = query.shape[2]
    outputs = []
    for i, row in enumerate(cache.rows):
        end = cache.new_length[i]
        # The same views and the same call for a row whether it runs alone or batched.
        k = row.keys[layer][:, :, :end]
        v = row.values[layer][:, :, :end]
        out = F.scaled_dot_product_attention(
            query[i : i + 1], k, v, is_causal=q_len > 1, scale=scaling, enable_gqa=groups > 1
        )
        outputs.append(out)
    return torch.cat(outputs).transpose(1, 2).contiguous(), None


@dataclass
class LoadedModel:
    """The model, its tokenizer and the numbers the engine needs."""

    model: Any
    tokenizer: Any
    name: str
    folder: Path
    eos_ids: frozenset[int]
    layers: int
    kv_heads: int
    head_dim: int
    max_len: int
    row_multiple: int
    dtype: torch.dtype
    kind: str = "causal"
    info: dict[str, Any] = field(default_factory=dict)

    def unpad(self) -> None:
        """Give up batch invariance for speed: linear layers run their natural row count."""
        for module in self.model.modules():
            if isinstance(module, PaddedLinear):
                module.multiple = 1
        self.row_multiple = 1

    def new_cache(self, capacity: int) -> RowCache:
        return RowCache(self.layers, self.kv_heads, self.head_dim, capacity, self.dtype)

    @torch.inference_mode()
    def prefill(self, ids: list[int], cache: RowCache) -> torch.Tensor:
        """Run a prompt into an empty cache; the logits (float32) of its last position."""
        batch = BatchCache([cache])
        out = self.model(
            input_ids=torch.tensor([ids]),
            position_ids=torch.arange(len(ids)).unsqueeze(0),
            past_key_values=batch,
            use_cache=True,
            logits_to_keep=1,
            testbed_rows=batch,
        )
        batch.commit()
        return out.logits[0, -1].float()  # type: ignore[no-any-return]

    @torch.inference_mode()
    def decode(self, tokens: list[int], caches: list[RowCache]) -> torch.Tensor:
        """One step for a batch: each row's next-token logits, shape (rows, vocab), float32."""
        batch = BatchCache(caches)
        out = self.model(
            input_ids=torch.tensor(tokens).unsqueeze(1),
            position_ids=torch.tensor([c.length for c in caches]).unsqueeze(1),
            past_key_values=batch,
            use_cache=True,
            testbed_rows=batch,
        )
        batch.commit()
        return out.logits[:, -1].float()  # type: ignore[no-any-return]


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def from_folder(loader: Any, folder: Path, **kwargs: Any) -> Any:
    """``loader.from_pretrained(folder)``; what transformers cannot use in the folder (a
    checkpoint it cannot read, no tokenizer it can build: its OSError and ValueError) is a
    :class:`ServerStartError` in its own words, never "a bug in testbed"."""
    try:
        return loader.from_pretrained(str(folder), **kwargs)
    except (OSError, ValueError) as exc:
        raise ServerStartError(f"transformers cannot load {folder}: {exc}") from exc


def load_model(
    folder: Path,
    *,
    name: str,
    dtype: str = "float32",
    max_batch: int = 32,
    store: Path | None = None,
) -> LoadedModel:
    """Load a transformers folder for batch-invariant serving (threads must be set before).

    ``store`` remembers the calibrated row multiple between starts (see ``invariance.py``).
    """
    from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer

    AttentionInterface.register(ATTENTION, rows_attention)
    torch_dtype = DTYPES["float32" if dtype == "auto" else dtype]
    guessed = expected_shapes(json.loads((folder / "config.json").read_text()))
    with ThreadPoolExecutor(max_workers=1) as pool:
        # Matrix products release the GIL: calibration runs on the second core while the
        # (Python-bound) imports and loading go on here.
        threads = torch.get_num_threads()
        calibrating = pool.submit(row_multiple_for, guessed, max_batch, torch_dtype, store, threads)
        tokenizer = from_folder(AutoTokenizer, folder)
        model = from_folder(
            AutoModelForCausalLM, folder, dtype=torch_dtype, attn_implementation=ATTENTION
        )
        row_multiple = calibrating.result()
    model.eval()  # type: ignore[no-untyped-call]
    config = model.config
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    shapes: set[Shape] = {(m.out_features, m.in_features) for _, m in linears}
    if not shapes <= guessed:  # not the architecture the config suggested
        row_multiple = row_multiple_for(shapes, max_batch, torch_dtype, store, threads)
    for qualified, module in linears:
        parent_name, _, child = qualified.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, PaddedLinear(module, row_multiple))
    eos = config.eos_token_id
    eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(int(tokenizer.eos_token_id))
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=name,
        folder=folder,
        eos_ids=frozenset(eos_ids),
        layers=int(config.num_hidden_layers),
        kv_heads=int(config.num_key_value_heads),
        head_dim=int(getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)),
        max_len=int(config.max_position_embeddings),
        row_multiple=row_multiple,
        dtype=torch_dtype,
    )
