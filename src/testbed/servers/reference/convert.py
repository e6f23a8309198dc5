"""Turn a GGUF file into a plain transformers folder (safetensors, tokenizer, chat template).

transformers loads a GGUF (``gguf_file=``) with its tokenizer and chat template, dequantized
to float32, but ``save_pretrained`` refuses a model loaded that way. So the model is rebuilt
from its config (without the GGUF quantization entry), the state dict is copied over, and
the fresh model is saved. vLLM, TGI and the reference server then all load the same folder.

The caller (:func:`testbed.servers.models.prepare`) writes into a staging folder, adds the
checksum manifest and renames the folder into place, so a half-written conversion is never
mistaken for a prepared model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from testbed.servers.reference.runtime import offline_environment


def convert_gguf(gguf: Path, out_dir: Path) -> dict[str, Any]:
    """Write a float32 safetensors folder for ``gguf`` into ``out_dir``; return provenance."""
    offline_environment()
    os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF dequantizer's own progress bar
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the reason save_pretrained refuses the GGUF model
    config.name_or_path = ""
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # Tied output embeddings may be absent from one side; anything else is a real mismatch.
    real_missing = [k for k in missing if k != "lm_head.weight"]
    if real_missing or unexpected:
        raise RuntimeError(f"GGUF weights do not fit the config: {real_missing} {unexpected}")
    fresh.generation_config = loaded.generation_config
    out_dir.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(out_dir))
    params = sum(p.numel() for p in fresh.parameters())
    return {
        "dtype": "float32",
        "params": int(params),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
