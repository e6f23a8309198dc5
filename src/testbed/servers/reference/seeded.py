"""A tiny encoder-decoder with seeded random weights: flan-t5's architecture in miniature.

The seeds' own example model is google/flan-t5 (an encoder-decoder); no hub is reachable
here, so ``bundled:tiny-t5`` is built instead: a T5 config of flan-t5's kind (gated-GELU
feed-forward, untied output layer, relative position buckets) at a size that loads in a
blink, its weights drawn from a fixed seed, and the bundled SmolLM2's tokenizer (the vocab
sizes match). Its text is nonsense, but it is the same nonsense on every machine with the
same torch: goldens recorded from it test the seq2seq path of every protocol.

``initializer_factor`` is raised above T5's 1.0 so the greedy choices are far apart (top-1
leads top-2 by well over the evaluators' near-tie tolerance); at 1.0 a random T5 repeats one
token with a flat distribution. Like flan-t5 the folder has no chat template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.servers.reference.runtime import offline_environment

#: The tiny T5's architecture. Changing any number changes every golden recorded from it.
TINY_T5: dict[str, Any] = {
    "d_model": 64,
    "d_kv": 16,
    "d_ff": 128,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "num_heads": 4,
    "feed_forward_proj": "gated-gelu",
    "tie_word_embeddings": False,
    "initializer_factor": 3.0,
    "dropout_rate": 0.0,
    "n_positions": 512,
}
SEED = 0
#: SmolLM2's ``<|endoftext|>`` starts the decoder (T5 starts with its pad token, id 0 too).
DECODER_START = 0


def build_seeded_t5(out_dir: Path, tokenizer_dir: Path, seed: int = SEED) -> dict[str, Any]:
    """Write the tiny T5 (weights from ``seed``) with the tokenizer of ``tokenizer_dir`` into
    ``out_dir``; return provenance for the model's manifest."""
    offline_environment()
    import torch
    import transformers
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tokenizer.chat_template = None  # flan-t5 has none: chat must be refused, not guessed
    settings = {
        "vocab_size": len(tokenizer),
        "pad_token_id": DECODER_START,
        "decoder_start_token_id": DECODER_START,
        "eos_token_id": tokenizer.eos_token_id,
        **TINY_T5,
    }
    config = T5Config(**settings)
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config)
    model.eval()  # type: ignore[no-untyped-call]
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(out_dir))
    return {
        "dtype": "float32",
        "params": int(sum(p.numel() for p in model.parameters())),
        "seed": seed,
        "architecture": "T5ForConditionalGeneration",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
