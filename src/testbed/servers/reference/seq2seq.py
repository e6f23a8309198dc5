"""Encoder-decoder models (transformers' AutoModelForSeq2SeqLM: T5, flan-t5, BART …).

The engine drives every model through the same three calls (see ``served.py``); here they
mean: ``prefill`` runs the encoder over the prompt once and the decoder over its start
token, ``decode`` gives each running request one more decoder step. Each request keeps its
own encoder output and transformers' own ``EncoderDecoderCache`` (self-attention keys grow,
cross-attention keys are computed once).

Batch invariance by construction: each request's decoder step runs as a batch of one, so its
arithmetic never depends on who else is running — requests still join and leave the running
batch between steps, as with causal models, but the matrix products are not shared. That is
slower per step than the padded batched products of ``model.py`` for decoders (a batched T5
step would need its relative position bias per row); correctness first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


class Seq2SeqRow:
    """One request's encoder output and decoder cache. It grows by itself: ``capacity`` is
    unbounded so the engine never copies it."""

    def __init__(self) -> None:
        self.encoded: torch.Tensor | None = None
        self.cache: Any = None
        self.length = 0  # decoder tokens seen
        self.capacity = sys.maxsize


@dataclass
class Seq2SeqModel:
    """An encoder-decoder, its tokenizer and the numbers the engine needs."""

    model: Any
    tokenizer: Any
    name: str
    folder: Path
    eos_ids: frozenset[int]
    decoder_start: int
    max_len: int
    dtype: torch.dtype
    row_multiple: int = 1  # nothing is padded: every product runs one request's rows
    kind: str = "seq2seq"
    info: dict[str, Any] = field(default_factory=dict)

    def unpad(self) -> None:
        """Nothing to give up: a lone row's arithmetic is already a batch of one."""

    def new_cache(self, capacity: int) -> Seq2SeqRow:
        return Seq2SeqRow()

    @torch.inference_mode()
    def prefill(self, ids: list[int], row: Seq2SeqRow) -> torch.Tensor:
        """Encode the prompt, then the decoder's first step; its logits (float32)."""
        from transformers import DynamicCache, EncoderDecoderCache

        config = self.model.config
        row.encoded = self.model.get_encoder()(input_ids=torch.tensor([ids])).last_hidden_state
        row.cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
        return self._step(self.decoder_start, row)

    @torch.inference_mode()
    def decode(self, tokens: list[int], rows: list[Seq2SeqRow]) -> torch.Tensor:
        """One decoder step per request; logits of shape (rows, vocab), float32."""
        return torch.stack([self._step(t, r) for t, r in zip(tokens, rows, strict=True)])

    def _step(self, token: int, row: Seq2SeqRow) -> torch.Tensor:
        out = self.model(
            encoder_outputs=(row.encoded,),
            decoder_input_ids=torch.tensor([[token]]),
            cache=row.cache,
            use_cache=True,
        )
        row.length += 1
        return out.logits[0, -1].float()  # type: ignore[no-any-return]


def load_seq2seq(folder: Path, *, name: str, torch_dtype: torch.dtype) -> Seq2SeqModel:
    """Load an encoder-decoder folder (threads must be set before)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from testbed.servers.reference.model import from_folder

    tokenizer = from_folder(AutoTokenizer, folder)
    model = from_folder(AutoModelForSeq2SeqLM, folder, dtype=torch_dtype)
    model.eval()
    config = model.config
    eos = config.eos_token_id
    eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(int(tokenizer.eos_token_id))
    start = config.decoder_start_token_id
    if start is None:
        start = model.generation_config.decoder_start_token_id
    if start is None:
        start = config.pad_token_id if config.pad_token_id is not None else 0
    # T5 has relative positions and no hard limit; n_positions is what it was trained for.
    limit = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", 0)
    return Seq2SeqModel(
        model=model,
        tokenizer=tokenizer,
        name=name,
        folder=folder,
        eos_ids=frozenset(eos_ids),
        decoder_start=int(start),
        max_len=int(limit or 512),
        dtype=torch_dtype,
    )
