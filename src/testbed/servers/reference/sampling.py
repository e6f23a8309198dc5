"""Choosing the next token, and the logprobs reported for it.

Greedy (``temperature == 0``) takes the arg-max of the logits; it is deterministic because
the logits are (see ``model.py``). Sampling uses a generator owned by the request, seeded
from the request's ``seed`` when given, so a seeded request draws the same tokens whether it
runs alone or in a batch. Logprobs are those of the model's raw distribution (log-softmax of
the logits before temperature, top-k or top-p), as vLLM reports them by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """What a request asks of the decoder (both protocols are mapped onto this)."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = no limit
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None  # None: none; n >= 0: the chosen token's plus n alternatives

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def new_generator(seed: int | None) -> torch.Generator:
    """A request's own random stream: seeded when asked, fresh from the OS otherwise."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def choose(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """The next token id for one row of float32 logits."""
    if params.greedy:
        return int(torch.argmax(logits))
    scores = logits / params.temperature
    if params.top_k > 0 and params.top_k < scores.shape[-1]:
        kth = torch.topk(scores, params.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True)
        cumulative = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        drop = cumulative - torch.softmax(sorted_scores, dim=-1) >= params.top_p
        scores = scores.scatter(0, order[drop], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def logprobs_of(
    logits: torch.Tensor, token: int, top: int
) -> tuple[float, list[tuple[int, float]]]:
    """The chosen token's logprob and the ``top`` most likely (id, logprob) pairs."""
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = float(log_probs[token])
    if top <= 0:
        return chosen, []
    values, ids = torch.topk(log_probs, top)
    return chosen, [(int(i), float(v)) for i, v in zip(ids, values, strict=True)]
