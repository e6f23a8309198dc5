"""The two sides of ``testbed compare`` before anything is judged: what a path is, whether
two runs' setups allow a comparison, and which treatments pair with which.

A side is a run directory, or one treatment: a run's treatment directory, a ``testbed load
--out`` folder (:mod:`testbed.report.load_run`) or another harness's results file
(:mod:`testbed.report.foreign_run`). Each becomes a :class:`RunSummary` and, for one
treatment, its :class:`TreatmentRow` — the judging (:mod:`testbed.report.compare`) reads
nothing else of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from testbed.core.errors import InputError
from testbed.report import foreign_run
from testbed.report.load_run import is_load_folder, load_document
from testbed.report.run_summary import run_document
from testbed.results import foreign
from testbed.results.machine import IDENTITY
from testbed.results.run_summary import RunSummary, TreatmentRow
from testbed.results.rundir import PLAN, SUMMARY, RunDir


def setup_differences(base: RunSummary, candidate: RunSummary) -> list[str]:
    """Why two runs are not comparable (empty when they are)."""
    out = []
    if base.campaign_hash != candidate.campaign_hash:
        out.append(
            f"campaign hash {base.campaign_hash} ≠ {candidate.campaign_hash} (the campaigns differ)"
        )
    bm, cm = base.machine, candidate.machine
    for key in IDENTITY if bm and cm else ():  # a side that does not know it: not compared
        if bm.get(key) != cm.get(key):
            out.append(f"machine {key}: {bm.get(key)} ≠ {cm.get(key)}")
    bs = {s.deployment: s for s in base.servers}
    for server in candidate.servers:
        other = bs.get(server.deployment)
        if other is None:
            continue
        for key, before, after in (
            ("server", other.server, server.server),
            ("version", other.version, server.version),
        ):
            if before != after:
                out.append(f"deployment {server.deployment} {key}: {before} ≠ {after}")
    return out


def pair(
    base_rows: Sequence[TreatmentRow], cand_rows: Sequence[TreatmentRow]
) -> tuple[list[tuple[TreatmentRow, TreatmentRow]], list[str]]:
    """Treatment pairs (base, candidate) and warnings about what could not be paired."""
    by_id = {r.id: r for r in base_rows}
    by_params: dict[str, list[TreatmentRow]] = {}
    for row in base_rows:
        by_params.setdefault(row.params_key, []).append(row)
    pairs, warnings, used = [], [], set()
    for row in cand_rows:
        match = by_id.get(row.id)
        if match is None:
            options = [r for r in by_params.get(row.params_key, []) if r.id not in used]
            if len(options) == 1:
                match = options[0]
                warnings.append(
                    f"{row.dir} paired with {match.dir} by probe, deployments and params"
                    " (their resolved configurations differ elsewhere)"
                )
        if match is None:
            warnings.append(f"{row.dir}: only in the candidate run, not compared")
            continue
        used.add(match.id)
        pairs.append((match, row))
    for row in base_rows:
        if row.id not in used:
            warnings.append(f"{row.dir}: only in the base run, not compared")
    return pairs, warnings


def is_treatment(path: Path) -> bool:
    """A treatment directory of a run (its summary beside the run's plan)."""
    return (path / SUMMARY).is_file() and (path.parent / PLAN).is_file()


def is_side(path: Path) -> bool:
    """One treatment: a run's treatment directory, a ``testbed load --out`` folder, or
    another harness's results file (:mod:`testbed.results.foreign`)."""
    return is_treatment(path) or is_load_folder(path) or foreign.read(path) is not None


def side(path: Path) -> tuple[Path, RunSummary, TreatmentRow]:
    """The folder a treatment's ``dir`` is relative to, its run document, and its row."""
    results = foreign.read(path)
    if results is not None:  # metrics only: no records, no verdict, no machine
        document = foreign_run.side_document(path, results)
        return results.path.parent, document, document.treatments[0]
    if is_load_folder(path):  # its one treatment is the folder itself, named as it is
        document = load_document(path)
        return path.parent, document, document.treatments[0].model_copy(update={"dir": path.name})
    document = run_document(RunDir.existing(path.parent))
    row = document.row(path.name)
    if row is None:
        raise InputError(f"{path}: not a treatment with a result in its run's plan")
    return path.parent, document, row
