"""Golden vectors for ``testbed record``: an embeddings case's answer becomes its golden.

The case's request is sent once to the reference; its vectors are kept where the case keeps
its golden — inline stays inline, a file keeps its path and its format (``.npy``: float32,
1-D for one input, 2-D for a batch; ``.json``: a list, or a list of lists) — and a case
without one gets ``<case file's stem>.goldens/<case name>.json`` beside its case file (text
a reviewer can read and diff). A refusal is recorded as the case's ``error:``, as for
generation cases; an answer the embeddings client finds wrong (a count, a length, an index)
is the reference's error and records nothing.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.clients.embeddings import embed
from testbed.clients.endpoint import Endpoint
from testbed.clients.http import pool_for
from testbed.core.errors import CampaignError, InfrastructureError
from testbed.probes.correctness.embedding_cases import GOLDEN_FORMATS, EmbeddingCase
from testbed.probes.correctness.embedding_runner import body_of
from testbed.probes.correctness.outputs import ErrorOutput, Output

#: Decimals of the numbers of a JSON golden: float32's own precision for components of a
#: unit vector (about 1e-8), so a recorded golden's cosine to its source is 1 to 1e-12.
DECIMALS = 8


class Vector(list[float]):
    """A vector written inline in a case file (the case file's dumper puts it on few lines)."""


@dataclass
class Golden:
    """Vectors to write to a golden file (``path`` as the case file names it)."""

    path: str
    vectors: list[list[float]]
    single: bool  # one input: a 1-D file


def default_path(case_file: Path, case: EmbeddingCase) -> str:
    """Where a case without a golden file gets one, relative to its case file."""
    return f"{case_file.stem}.goldens/{case.name}.json"


async def answer(
    case: EmbeddingCase, endpoint: Endpoint, timeout_s: float
) -> list[list[float]] | Output:
    """The reference's vectors for ``case``, or its refusal as an :class:`Output` error."""
    pool = pool_for(endpoint, max_connections=1)
    try:
        response, found = await embed(pool, body_of(case, endpoint.model), timeout_s=timeout_s)
    finally:
        await pool.aclose()
    if response.error is not None and not 200 <= response.status < 300:
        return Output(error=ErrorOutput(response.status, response.error))
    if response.error is not None:
        raise InfrastructureError(
            f"{case.name}: the reference's answer cannot be a golden: {response.error}"
        )
    return found.vectors


def apply(
    raw: dict[str, Any], case: EmbeddingCase, vectors: list[list[float]], case_file: Path
) -> tuple[str, Golden | None]:
    """Put ``vectors`` in the case's raw mapping (inline) or name its golden file; the note
    of what was recorded, and the file to write (None when inline)."""
    previous = raw.pop("expected", None)
    raw.pop("error", None)
    given = previous.get("embedding") if isinstance(previous, dict) else None
    single = len(case.request.input) == 1
    shape = f"{len(vectors)} × {len(vectors[0])}" if vectors else "no vectors"
    if isinstance(given, list):  # inline: kept inline
        rounded = [Vector(round(x, DECIMALS) for x in v) for v in vectors]
        raw["expected"] = {"embedding": rounded[0] if single else rounded}
        return f"{case.name}: embedding {shape}, inline", None
    path = given if isinstance(given, str) else default_path(case_file, case)
    if Path(path).suffix not in GOLDEN_FORMATS:
        raise CampaignError(
            f"{case_file}: case '{case.name}': expected.embedding: {path} is neither .npy nor"
            " .json — rename it"
        )
    raw["expected"] = {"embedding": path}
    return f"{case.name}: embedding {shape} → {path}", Golden(path, vectors, single)


def write_golden(golden: Golden, case_file: Path) -> Path:
    """Write ``golden`` beside ``case_file`` (its path is relative to it), atomically."""
    target = Path(golden.path)
    if not target.is_absolute():
        target = case_file.parent / target
    if target.suffix == ".npy":
        import numpy as np

        array = np.asarray(golden.vectors, dtype=np.float32)
        buffer = io.BytesIO()
        np.save(buffer, array[0] if golden.single else array, allow_pickle=False)
        data = buffer.getvalue()
    else:
        rows = [[round(x, DECIMALS) for x in v] for v in golden.vectors]
        data = json.dumps(rows[0] if golden.single else rows).encode() + b"\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)  # never half a golden
    return target
