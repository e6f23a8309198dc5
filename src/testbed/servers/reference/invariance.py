"""Batch-invariant matrix products: pad every linear layer's rows to a calibrated multiple.

BLAS picks a kernel (a summation order) by row count — on this machine one for 1 row, one for
2–3 rows and one for more — and computes the rows of a partial tile apart from the full
tiles. So a request's logits change, in the last bits, with the size of its batch, and a
near-tie can flip a greedy token. Padding the rows of every product to a multiple q with
zero rows puts every row in a full tile of the same kernel: its result is then the same
alone and in any batch. :func:`calibrate_row_multiple` finds the smallest such q by trying
(4 on this machine); :func:`row_multiple_for` remembers it per machine, torch version,
threads, dtype and shapes, so later starts skip the measurement.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

Shape = tuple[int, int]  # (out_features, in_features) of a linear layer


class PaddedLinear(nn.Module):
    """A linear layer whose row count is always a multiple of ``multiple`` (zero rows added),
    so every row goes through the same full-size kernel tile whatever the batch."""

    def __init__(self, inner: nn.Linear, multiple: int) -> None:
        super().__init__()
        self.inner = inner
        self.multiple = multiple

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Always a 2-D product: a 3-D input takes another kernel path.
        flat = x.reshape(-1, x.shape[-1])
        n = flat.shape[0]
        padded = -(-n // self.multiple) * self.multiple
        if padded != n:
            flat = F.pad(flat, (0, 0, 0, padded - n))
        out = self.inner(flat)[:n]
        return out.reshape(*x.shape[:-1], out.shape[-1])  # type: ignore[no-any-return]


def calibrate_row_multiple(
    shapes: set[Shape], max_rows: int, dtype: torch.dtype = torch.float32, limit: int = 16
) -> int:
    """The smallest q such that, with row counts padded to multiples of q, each row's result
    is bit for bit the one it gets alone, at every batch size tried.

    Kernel choice depends on shapes and dtype, not values, so random weights of the model's
    shapes stand in for the real ones (and the check can run while the model loads).
    """
    generator = torch.Generator().manual_seed(0)
    top = max(max_rows, 2)
    pairs = [
        (torch.randn(top + 2 * limit, k, generator=generator).to(dtype),
         torch.randn(n, k, generator=generator).to(dtype))
        for n, k in sorted(shapes, key=lambda s: s[0] * s[1])  # cheap shapes fail first
    ]  # fmt: skip
    for q in range(1, limit + 1):
        last = max(top, 2 * q + 1)
        spread = {n for n in (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256) if n < last}
        counts = sorted(set(range(2, 2 * q + 2)) | spread | {last})
        if all(_invariant(w, x, q, counts) for x, w in pairs):
            return q
    raise RuntimeError(f"no batch-invariant row multiple up to {limit} on this CPU")


def _invariant(weight: torch.Tensor, x: torch.Tensor, q: int, counts: list[int]) -> bool:
    """Rows at tile edges and at the end of each batch equal the same rows computed alone."""
    layer = PaddedLinear(nn.Linear(1, 1, bias=False), q)
    layer.inner.weight = nn.Parameter(weight, requires_grad=False)
    alone: dict[int, torch.Tensor] = {}
    with torch.inference_mode():
        for n in counts:
            out = layer(x[:n])
            for i in {0, q - 1, q, n - 2, n - 1} & set(range(n)):
                if i not in alone:
                    alone[i] = layer(x[i : i + 1])[0]
                if not torch.equal(out[i], alone[i]):
                    return False
    return True


def expected_shapes(config: dict[str, Any]) -> set[Shape]:
    """The linear shapes of a Llama-like decoder, read from its config.json (may be empty)."""
    try:
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        kv = int(config.get("num_key_value_heads", heads))
        head_dim = int(config.get("head_dim") or hidden // heads)
        inter, vocab = int(config["intermediate_size"]), int(config["vocab_size"])
    except (KeyError, TypeError, ValueError):
        return set()
    return {
        (heads * head_dim, hidden),
        (kv * head_dim, hidden),
        (hidden, heads * head_dim),
        (inter, hidden),
        (hidden, inter),
        (vocab, hidden),
    }


def _machine_key(shapes: set[Shape], max_rows: int, dtype: torch.dtype, threads: int) -> str:
    cpu = ""
    try:
        info = Path("/proc/cpuinfo").read_text()
        cpu = "\n".join(ln for ln in info.splitlines() if ln.startswith(("model name", "flags")))
    except OSError:
        pass
    facts = [torch.__version__, platform.machine(), cpu, threads, str(dtype),
             sorted(shapes), max_rows]  # fmt: skip
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()[:24]


def row_multiple_for(
    shapes: set[Shape],
    max_rows: int,
    dtype: torch.dtype,
    store: Path | None = None,
    threads: int = 1,
) -> int:
    """:func:`calibrate_row_multiple` with ``threads`` torch threads (they split products
    differently), remembered in ``store`` (a JSON file) when given."""
    torch.set_num_threads(threads)
    if store is None:
        return calibrate_row_multiple(shapes, max_rows, dtype)
    key = _machine_key(shapes, max_rows, dtype, threads)
    try:
        known: dict[str, Any] = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(key), int):
        return int(known[key])
    known[key] = calibrate_row_multiple(shapes, max_rows, dtype)
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = store.with_name(f".{store.name}.tmp")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        tmp.replace(store)
    except OSError:
        pass  # remembering is an optimisation; a read-only cache only costs the next start
    return int(known[key])
