"""The similarity evaluator's real model: all-MiniLM-L6-v2 from its PyPI package, offline."""

from __future__ import annotations

import pytest

from testbed.probes.correctness.embedding import Embedder

pytestmark = pytest.mark.slow  # imports torch and sentence-transformers (seconds)


async def test_paraphrases_are_close_and_unrelated_texts_are_not() -> None:
    embedder = Embedder()
    close = await embedder.similarity(
        "The capital of France is Paris.", "Paris is the capital city of France."
    )
    far = await embedder.similarity("The capital of France is Paris.", "Bananas are yellow.")
    assert close > 0.9
    assert far < 0.3
