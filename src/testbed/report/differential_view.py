"""The cross-configuration differential in the report: with ``correctness.reference`` set,
each other deployment's correctness answers against the reference deployment's, computed
from the run directory by the correctness probe's own pure functions
(:func:`testbed.probes.correctness.differential.run_dir_differentials`: treatments that
share one probe configuration are compared with that configuration's reference).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testbed.results.run_summary import TreatmentRow


def differentials(
    run_path: Path, rows: Sequence[TreatmentRow]
) -> list[tuple[TreatmentRow, TreatmentRow, dict[str, Any]]]:
    """(reference row, other row, differential summary) for every compared treatment."""
    from testbed.probes.correctness.differential import run_dir_differentials

    by_dir = {row.dir: row for row in rows}
    out = []
    for name, summary in run_dir_differentials(run_path).items():
        row, reference = by_dir.get(name), by_dir.get(summary.get("reference", ""))
        if row is not None and reference is not None:
            out.append((reference, row, summary))
    return out
