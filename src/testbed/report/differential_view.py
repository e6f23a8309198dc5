"""The cross-configuration differential in the report: with ``correctness.reference`` set,
each other deployment's correctness answers against the reference deployment's, computed
from both treatments' records by the correctness probe's own pure function
(:func:`testbed.probes.correctness.differential.differential_summary`).

A treatment is paired with the reference treatment that has the same probe factor values
(``correctness.*``), or with the only reference treatment there is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.results.files import read_records
from testbed.results.rundir import RECORDS


def _probe_params(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row["params"].items() if str(k).startswith("correctness.")}


def pairs(
    rows: Sequence[Mapping[str, Any]], reference: str
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(reference treatment, other treatment) for every other correctness treatment."""
    correctness = [r for r in rows if r["probe"] == "correctness" and r.get("metrics") is not None]
    references = [r for r in correctness if r.get("deployments") == [reference]]
    out = []
    for row in correctness:
        if row in references:
            continue
        same = [r for r in references if _probe_params(r) == _probe_params(row)]
        chosen = same or (references if len(references) == 1 else [])
        if chosen:
            out.append((chosen[0], row))
    return out


def differentials(
    run_path: Path, rows: Sequence[Mapping[str, Any]], campaign: Mapping[str, Any]
) -> list[tuple[Mapping[str, Any], Mapping[str, Any], dict[str, Any]]]:
    """(reference row, other row, differential summary) of the run, empty without a
    reference deployment."""
    section = campaign.get("correctness") if isinstance(campaign, Mapping) else None
    reference = section.get("reference") if isinstance(section, Mapping) else None
    if not reference:
        return []
    from testbed.probes.correctness.differential import differential_summary

    near_tie = float(section.get("near_tie_nats", 0.05)) if isinstance(section, Mapping) else 0.05
    out = []
    for ref_row, row in pairs(rows, str(reference)):
        summary = differential_summary(
            read_records(run_path / ref_row["dir"] / RECORDS),
            read_records(run_path / row["dir"] / RECORDS),
            near_tie,
        )
        out.append((ref_row, row, summary))
    return out
