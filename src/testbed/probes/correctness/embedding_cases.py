"""Embeddings cases: inputs sent to ``/v1/embeddings``, their vectors judged against goldens.

A case with ``api: embeddings`` sends its ``request.input`` (one text, or a batch) to OpenAI's
``/v1/embeddings`` and judges the vectors that come back::

    - name: capital-embedding
      api: embeddings
      request: {input: "The capital of France is", dimensions: 256}
      expected: {embedding: capital.goldens/capital-embedding.json}
      evaluate: [{cosine: 0.99}]

``expected.embedding`` is the golden: a vector (one input), a list of vectors (one per input,
in order), or a file relative to the case file — ``.npy`` (1-D for one input, 2-D for a
batch) or ``.json`` (a list, or a list of lists). Evaluators:

- ``cosine`` (the default, ``{cosine: 0.999}`` sets the threshold, default 0.99): each vector
  has its golden's dimensions and a cosine similarity to it at least the threshold;
- ``ranking`` (``{ranking: {anchor: 0, closer: 1, than: 2}}``, input indices): the
  ``closer`` input's vector is nearer the ``anchor``'s than the ``than`` input's is — an
  ordering that holds for any faithful model, with no golden to record.

The golden is read when the case file is: a missing file, a count other than the inputs',
a length other than the request's ``dimensions``, a zero vector or a number that is not
finite is a mistake in the case (exit 2, at the case's line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from testbed.config.deployments import Strict
from testbed.probes.correctness.case_rules import (
    ExpectedError,
    SkipRule,
    evaluators_shorthand,
    skip_shorthand,
)

#: What a case's name may be (it names its results: ``name/openai``).
CASE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"

#: The suffixes of golden files, and what each holds.
GOLDEN_FORMATS = (".json", ".npy")


class EmbeddingRequest(Strict):
    """The inputs of one ``/v1/embeddings`` request, and how the vectors are asked for."""

    input: list[str] = Field(min_length=1, description="one text, or a batch of texts")
    dimensions: int | None = Field(None, ge=1, description="vector length asked for")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: JSON numbers; base64: little-endian float32 bytes"
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="sent verbatim in the body")

    @field_validator("input", mode="before")
    @classmethod
    def _one_input(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class ExpectedEmbedding(Strict):
    """The golden vectors: inline, or a file relative to the case file."""

    embedding: str | list[float] | list[list[float]] = Field(
        description="a vector (one input), one vector per input, or a .npy/.json file"
    )


class CosineEval(Strict):
    kind: Literal["cosine"]
    threshold: float = Field(0.99, ge=-1, le=1, description="least cosine similarity")


class RankingEval(Strict):
    kind: Literal["ranking"]
    anchor: int = Field(ge=0, description="index of the input the others are compared with")
    closer: int = Field(ge=0, description="index of the input whose vector must be nearer")
    than: int = Field(ge=0, description="index of the input whose vector must be farther")


EmbeddingEvaluator = Annotated[CosineEval | RankingEval, Field(discriminator="kind")]
_SHORT_FIELD = {"cosine": "threshold"}


class EmbeddingCase(Strict):
    """One golden case of ``/v1/embeddings``."""

    name: str = Field(pattern=CASE_NAME)
    description: str = ""
    api: Literal["embeddings"]
    protocol: Literal["openai"] | None = Field(
        None, description="embeddings are OpenAI's API: openai (the default) only"
    )
    request: EmbeddingRequest
    expected: ExpectedEmbedding | None = None
    error: ExpectedError | None = None
    evaluate: list[EmbeddingEvaluator] | None = Field(None, description="default: [cosine]")
    skip: list[SkipRule] = Field(default_factory=list)
    skip_check: bool = Field(False, description="run it, compare nothing")

    @field_validator("evaluate", mode="before")
    @classmethod
    def _evaluators(cls, value: Any) -> Any:
        return evaluators_shorthand(value, _SHORT_FIELD)

    @field_validator("skip", mode="before")
    @classmethod
    def _rules(cls, value: Any) -> Any:
        return skip_shorthand(value)

    @model_validator(mode="after")
    def _consistent(self) -> EmbeddingCase:
        if self.expected is not None and self.error is not None:
            raise ValueError("give expected: or error:, not both")
        inputs = len(self.request.input)
        for rule in self.evaluators:
            if isinstance(rule, RankingEval):
                picked = (rule.anchor, rule.closer, rule.than)
                if max(picked) >= inputs or len(set(picked)) < 3:
                    raise ValueError(
                        f"ranking {{anchor: {rule.anchor}, closer: {rule.closer}, than:"
                        f" {rule.than}}} needs three different indices of request.input"
                        f" (0..{inputs - 1})"
                    )
        return self

    @property
    def evaluators(self) -> list[EmbeddingEvaluator]:
        return self.evaluate if self.evaluate is not None else [CosineEval(kind="cosine")]

    def needs_expected(self) -> bool:
        """True when an evaluator compares with a golden vector."""
        if self.skip_check or self.error is not None:
            return False
        return any(isinstance(e, CosineEval) for e in self.evaluators)


def golden_path(case: EmbeddingCase, base: Path) -> Path | None:
    """The file ``case``'s golden is kept in (relative paths from ``base``), or None when it
    is inline or there is none."""
    given = case.expected.embedding if case.expected is not None else None
    if not isinstance(given, str):
        return None
    path = Path(given)
    return path if path.is_absolute() else base / path


def load_golden(case: EmbeddingCase, base: Path) -> list[list[float]] | None:
    """``case``'s golden vectors, one per input (None without ``expected:``); ValueError
    saying what is wrong with them and the fix."""
    if case.expected is None:
        return None
    given = case.expected.embedding
    path = golden_path(case, base)
    if path is not None:
        given = _read(path, str(given))
    import numpy as np  # here: only a case file with embeddings cases needs it

    try:
        array = np.asarray(given, dtype=np.float64)
    except (ValueError, TypeError):
        raise ValueError(
            "expected.embedding is not a vector of numbers or a list of equally long vectors"
        ) from None
    if array.ndim == 1:
        array = array[np.newaxis, :]
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(
            f"expected.embedding has shape {list(array.shape)}: give one vector per input"
        )
    return _checked(array, case)


def _read(path: Path, given: str) -> Any:
    """The numbers of a golden file (a list or an array)."""
    if path.suffix not in GOLDEN_FORMATS:
        raise ValueError(f"expected.embedding: {given} is neither .npy nor .json — rename it")
    if not path.is_file():
        raise ValueError(
            f"expected.embedding: no golden file {given} (relative to the case file) — record"
            " it with `testbed record`, or fix the path"
        )
    try:
        if path.suffix == ".json":
            return json.loads(path.read_text(encoding="utf-8"))
        import numpy as np

        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:  # JSONDecodeError and a bad .npy are ValueErrors
        raise ValueError(f"expected.embedding: cannot read {given}: {exc}") from None


def _checked(array: Any, case: EmbeddingCase) -> list[list[float]]:
    """The rows of ``array`` when they can be the answer to ``case``'s request."""
    import numpy as np

    inputs, asked = len(case.request.input), case.request.dimensions
    rows, dims = array.shape
    if rows != inputs:
        raise ValueError(
            f"expected.embedding holds {rows} vector(s) for {inputs} input(s) — give one per"
            " input, in order (record them with `testbed record`)"
        )
    if asked is not None and dims != asked:
        raise ValueError(
            f"expected.embedding vectors have {dims} dimensions, but request.dimensions asks"
            f" for {asked} — record the golden again, or change dimensions"
        )
    if not np.isfinite(array).all():
        raise ValueError("expected.embedding holds a number that is not finite")
    zero = [i for i, row in enumerate(array) if not np.any(row)]
    if zero:
        raise ValueError(f"expected.embedding[{zero[0]}] is all zeros: it has no direction")
    return [[float(x) for x in row] for row in array]
