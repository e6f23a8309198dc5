"""Matrix points: the product of factor levels, with zip groups, include and exclude.

A point is a tuple of ``(factor, value)`` pairs in factor order. Levels are compared by
their canonical JSON, so YAML mappings and lists work as levels too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from testbed.config.matrix import Matrix
from testbed.core.ids import canonical_json

Point = tuple[tuple[str, Any], ...]


def matrix_points(matrix: Matrix | None) -> Iterator[Point]:
    """Every point of ``matrix`` in a stable order; one empty point when there is no matrix."""
    if matrix is None:
        yield ()
        return
    groups = _groups(matrix)
    excludes = [
        {k: canonical_json(v) for k, v in entry.items()} for entry in matrix.exclude
    ]
    keys = {f: [canonical_json(v) for v in levels] for f, levels in matrix.factors.items()}
    order = list(matrix.factors)
    for combo in itertools.product(*[range(n) for _, n in groups]):
        chosen: dict[str, int] = {}
        for (names, _), level in zip(groups, combo, strict=True):
            for name in names:
                chosen[name] = level
        if excludes and any(
            all(f in chosen and keys[f][chosen[f]] == want for f, want in entry.items())
            for entry in excludes
        ):
            continue
        yield tuple((f, matrix.factors[f][chosen[f]]) for f in order)
    for entry in matrix.include:
        yield tuple(entry.items())


def _groups(matrix: Matrix) -> list[tuple[list[str], int]]:
    """Factors that vary together (a zip group, or a single factor) and their level count."""
    zipped = {name: tuple(group) for group in matrix.zip for name in group}
    groups: list[tuple[list[str], int]] = []
    seen: set[tuple[str, ...]] = set()
    for name, levels in matrix.factors.items():
        group = zipped.get(name, (name,))
        if group in seen:
            continue
        seen.add(group)
        groups.append((list(group), len(levels)))
    return groups
