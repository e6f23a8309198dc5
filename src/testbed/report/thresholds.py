"""Thresholds of ``testbed compare``: the smallest change of a metric that matters.

``METRIC=VALUE`` where VALUE is relative (``10%``) or absolute in the metric's unit (``0.5``
for a latency in ms) and METRIC may be a glob (``ttft_ms.*``, ``*``). The most specific
pattern wins; flags override the campaign's ``results.thresholds``; the default is 5 %.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from testbed.core.errors import InputError

DEFAULT_THRESHOLD = "5%"
_THRESHOLD = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


@dataclass(frozen=True)
class Threshold:
    """How large a change must be to matter: relative (0.05 = 5 %) or absolute (units of
    the metric, e.g. ms)."""

    value: float
    relative: bool
    source: str  # the pattern that chose it: "ttft_ms.p99", "*", "default"

    def exceeded(self, base: float, candidate: float) -> bool:
        if self.relative:
            if base == 0:
                return candidate != 0
            return abs(candidate / base - 1.0) > self.value
        return abs(candidate - base) > self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


def parse_threshold(text: str, source: str) -> Threshold:
    match = _THRESHOLD.match(str(text))
    if not match:
        raise InputError(
            f"threshold {source}={text!r}: write a percentage (10%) or an absolute value (5)"
        )
    number, percent = float(match.group(1)), bool(match.group(2))
    return Threshold(number / 100.0 if percent else number, percent, source)


def parse_thresholds(items: Sequence[str]) -> dict[str, Threshold]:
    """``METRIC=VALUE`` flags (METRIC may be a glob: ``ttft_ms.*``, ``*``)."""
    out = {}
    for item in items:
        pattern, sep, value = item.partition("=")
        if not sep or not pattern.strip():
            raise InputError(f"--threshold {item!r}: write METRIC=VALUE, e.g. ttft_ms.p99=10%")
        out[pattern.strip()] = parse_threshold(value, pattern.strip())
    return out


def threshold_for(metric: str, thresholds: Mapping[str, Threshold]) -> Threshold:
    """The most specific pattern matching ``metric`` (exact, then the longest glob)."""
    if metric in thresholds:
        return thresholds[metric]
    matching = [p for p in thresholds if fnmatch.fnmatchcase(metric, p)]
    if matching:
        return thresholds[max(matching, key=lambda p: (len(p.replace("*", "")), len(p)))]
    return parse_threshold(DEFAULT_THRESHOLD, "default")
