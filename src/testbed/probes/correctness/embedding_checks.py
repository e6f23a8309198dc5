"""The evaluators of embeddings cases: vectors against goldens, and against each other.

``cosine`` compares each vector the server sent with its golden: the same dimensions, and a
cosine similarity at least the threshold (a vector of other dimensions is compared no
further: its cosine means nothing). ``ranking`` compares the server's vectors among
themselves: the ``closer`` input nearer the ``anchor`` than the ``than`` input. Both say what
failed in words a person reads — which input, its cosine, the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from testbed.probes.correctness.embedding_cases import (
    CosineEval,
    EmbeddingCase,
    EmbeddingEvaluator,
    RankingEval,
)
from testbed.probes.correctness.evaluators import Check

Vectors = Sequence[Sequence[float]]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors of one length (0 when one has no direction)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / norms if norms else 0.0


def _input(case: EmbeddingCase, index: int) -> str:
    """How a message names input ``index`` (its text's start: a batch's inputs differ)."""
    text = case.request.input[index]
    shown = text if len(text) <= 30 else text[:29] + "…"
    return f"input {index} ({shown!r})"


def check_cosine(
    rule: CosineEval, case: EmbeddingCase, golden: Vectors | None, vectors: Vectors
) -> Check:
    """Each of ``vectors`` against its golden (one per input, in order)."""
    if golden is None:
        return Check("cosine", False, "no expected embedding — record one with `testbed record`")
    batch = len(vectors) > 1
    problems: list[str] = []
    scores: list[float | None] = []
    for index, (want, got) in enumerate(zip(golden, vectors, strict=True)):
        which = f"{_input(case, index)}: " if batch else ""
        if len(got) != len(want):
            problems.append(f"{which}{len(got)} dimensions, the golden has {len(want)}")
            scores.append(None)
            continue
        score = cosine(want, got)
        scores.append(round(score, 6))
        if score < rule.threshold:
            problems.append(f"{which}{score:.4f} < {rule.threshold}")  # "cosine: 0.12 < 0.99"
    if not problems:
        least = min(s for s in scores if s is not None)
        return Check("cosine", True, f"{least:.4f} ≥ {rule.threshold}")
    expected = {"threshold": rule.threshold, "dimensions": [len(g) for g in golden]}
    actual = {"cosine": scores, "dimensions": [len(v) for v in vectors]}
    return Check("cosine", False, "; ".join(problems), expected, actual)


def check_ranking(rule: RankingEval, case: EmbeddingCase, vectors: Vectors) -> Check:
    """The ``closer`` input's vector nearer the ``anchor``'s than the ``than`` input's."""
    near = cosine(vectors[rule.anchor], vectors[rule.closer])
    far = cosine(vectors[rule.anchor], vectors[rule.than])
    if near > far:
        return Check("ranking", True, f"cosine {near:.4f} > {far:.4f}")
    detail = (
        f"{_input(case, rule.closer)} is not closer to {_input(case, rule.anchor)} than"
        f" {_input(case, rule.than)}: cosine {near:.4f} ≤ {far:.4f}"
    )
    expected = {"closer": rule.closer, "than": rule.than, "to": rule.anchor}
    return Check("ranking", False, detail, expected, {"closer": near, "than": far})


def evaluate(
    rule: EmbeddingEvaluator, case: EmbeddingCase, golden: Vectors | None, vectors: Vectors
) -> Check:
    """One evaluator on one answer's vectors."""
    if isinstance(rule, CosineEval):
        return check_cosine(rule, case, golden, vectors)
    return check_ranking(rule, case, vectors)
