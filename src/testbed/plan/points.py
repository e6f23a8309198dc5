"""Matrix points: the product of factor levels, with zip groups, include and exclude.

A point is a tuple of :class:`Level` in factor order. Levels are compared by their
canonical JSON, so YAML mappings and lists work as levels too; that text and the level's
slug are computed once per level, not once per point (plans reach 100,000 points).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

from testbed.config.matrix import Matrix
from testbed.core.ids import canonical_json, slugify


class Level(NamedTuple):
    """One factor at one level."""

    factor: str
    value: Any
    key: str  # canonical JSON of the value
    slug: str  # ``leaf-value``, slugified


def make_level(factor: str, value: Any) -> Level:
    return Level(
        factor, value, canonical_json(value), slugify(f"{factor.rsplit('.', 1)[-1]}-{value}")
    )


Point = tuple[Level, ...]


def matrix_points(matrix: Matrix | None) -> Iterator[Point]:
    """Every point of ``matrix`` in a stable order; one empty point when there is no matrix."""
    if matrix is None:
        yield ()
        return
    groups = _groups(matrix)
    excludes = [{k: canonical_json(v) for k, v in entry.items()} for entry in matrix.exclude]
    levels = {f: [make_level(f, v) for v in values] for f, values in matrix.factors.items()}
    order = list(matrix.factors)
    for combo in itertools.product(*[range(n) for _, n in groups]):
        chosen: dict[str, int] = {}
        for (names, _), level in zip(groups, combo, strict=True):
            for name in names:
                chosen[name] = level
        if excludes and any(
            all(f in chosen and levels[f][chosen[f]].key == want for f, want in entry.items())
            for entry in excludes
        ):
            continue
        yield tuple(levels[f][chosen[f]] for f in order)
    for entry in matrix.include:
        yield tuple(make_level(f, v) for f, v in entry.items())


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
