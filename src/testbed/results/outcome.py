"""A probe's outcome, as every layer that handles one sees it: the probes return it, the
execution pipeline writes it, and a backend that runs probes elsewhere (a Job in the
cluster) rebuilds it from what the probe streamed back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testbed.results.verdict import Verdict


@dataclass
class ProbeOutcome:
    """A probe's result: its summary (goes into summary.json) and its verdict."""

    summary: dict[str, Any]
    verdict: Verdict
