"""The factor × level matrix (Tekton): factors are dotted paths into the campaign."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from testbed.config.deployments import Strict


class Matrix(Strict):
    """``factors`` maps a dotted path (``load.concurrency``, ``deployments.params.dtype``,
    ``deployments.NAME.params.dtype``) to its levels. The full product is taken, except that
    factors named together in a ``zip`` group vary together (level i with level i).
    ``include`` adds combinations, ``exclude`` removes every combination that matches all
    the given factor values."""

    factors: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)
    include: list[dict[str, Any]] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    zip: list[list[str]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> Matrix:
        if not self.factors and not self.include:
            raise ValueError("the matrix is empty — add factors with levels, or remove `matrix:`")
        seen: set[str] = set()
        for group in self.zip:
            lengths = set()
            for path in group:
                if path not in self.factors:
                    raise ValueError(
                        f"zip names '{path}', which is not a factor — add it to factors"
                    )
                if path in seen:
                    raise ValueError(f"factor '{path}' is in two zip groups — keep it in one")
                seen.add(path)
                lengths.add(len(self.factors[path]))
            if len(lengths) > 1:
                raise ValueError(f"zip group {group} has factors with different numbers of levels")
        for entry in [*self.include, *self.exclude]:
            if not entry:
                raise ValueError("an include/exclude entry is empty — name factor values in it")
        return self
