"""A traffic mix over models (or LoRA adapters) of one endpoint: which prompt goes where.

Each prompt is given one model before the load starts, so a request costs nothing more
than a plain one (its bytes are encoded with its model once). The order is a smooth
weighted round-robin: every model's share is exact over each full cycle of the weights, and
models interleave rather than come in runs — weights 3:1 give ``a a b a`` … not
``a a a b``. Requests cycle through the prompts, so the requests' mix is the prompts'.
A dataset row that names its own model keeps it and is not counted in the mix.
"""

from __future__ import annotations

import dataclasses

from testbed.config.shaping import ModelShare
from testbed.probes.load.dataset import Item


def schedule(models: list[ModelShare], count: int) -> list[str]:
    """``count`` model names in smooth weighted round-robin order (nginx's: each step every
    model gains its weight, the one furthest ahead is chosen and loses the total)."""
    total = sum(m.weight for m in models)
    current = [0.0] * len(models)
    out = []
    for _ in range(count):
        for i, share in enumerate(models):
            current[i] += share.weight
        best = max(range(len(models)), key=lambda i: (current[i], -i))
        current[best] -= total
        out.append(models[best].name)
    return out


def assign(items: list[Item], models: list[ModelShare] | None, default: str) -> list[Item]:
    """``items`` each with its model: its row's, else the mix's next, else ``default``."""
    free = [i for i, item in enumerate(items) if item.model is None]
    names = schedule(models, len(free)) if models else [default] * len(free)
    out = list(items)
    for index, name in zip(free, names, strict=True):
        out[index] = dataclasses.replace(items[index], model=name or None)
    return out
