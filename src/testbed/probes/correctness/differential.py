"""The cross-configuration differential: each configuration's answers against a reference's.

A pure function over the records of two correctness treatments (the reference worker's and
another's), computed after both ended. Unary answers of the same case and protocol are
compared; where they differ, the first divergent token, both continuations and — where the
server returned logprobs — the margin between the competing tokens classify the divergence
as a ``near_tie`` (numerical noise, margin ≤ ``near_tie_nats``), a real ``different``, or
``unclassified`` (no logprobs, or a sampled case). ``error_mismatch``: one side refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from testbed.probes.correctness.diff import first_divergence
from testbed.probes.correctness.outputs import Output
from testbed.results.files import read_records
from testbed.results.rundir import PLAN, RECORDS

Kind = Literal["near_tie", "different", "unclassified", "error_mismatch"]


@dataclass
class Divergence:
    """One case whose answer differs from the reference configuration's."""

    case: str
    protocol: str
    kind: Kind
    detail: str = ""
    index: int | None = None  # first divergent token (or character, unit "char")
    unit: str = "token"
    reference_token: str | None = None
    other_token: str | None = None
    common_prefix: str = ""
    reference_continuation: str = ""
    other_continuation: str = ""
    margin_nats: float | None = None
    near_tie: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unary_outputs(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(case, protocol) → the record of its unary answer (the last attempt wins)."""
    found = {}
    for record in records:
        if record.get("kind") != "case" or record.get("stream") or "output" not in record:
            continue
        found[(str(record["case"]), str(record["protocol"]))] = record
    return found


def _compare(
    key: tuple[str, str], ref: dict[str, Any], other: dict[str, Any], near_tie_nats: float
) -> Divergence | None:
    a, b = Output.from_json(ref["output"]), Output.from_json(other["output"])
    case, protocol = key
    if a.error is not None or b.error is not None:
        if a.error and b.error and a.error.status == b.error.status:
            return None
        show = {"reference": ref["output"].get("error"), "other": other["output"].get("error")}
        return Divergence(case, protocol, "error_mismatch", f"refusals differ: {show}")
    greedy = bool(ref.get("greedy", True)) and bool(other.get("greedy", True))
    found = first_divergence(a, b, near_tie_nats, greedy=greedy)
    if found is None:
        fields = [f for f in ("finish_reason", "completion_tokens") if a.get(f) != b.get(f)]
        if not fields:
            return None
        detail = ", ".join(f"{f} {a.get(f)!r} vs {b.get(f)!r}" for f in fields)
        return Divergence(case, protocol, "different", f"same text; {detail}")
    kind: Kind = "unclassified"
    if found.near_tie is not None:
        kind = "near_tie" if found.near_tie else "different"
    margin = f"{found.margin_nats:.4f} nats" if found.margin_nats is not None else "unknown"
    return Divergence(
        case,
        protocol,
        kind,
        f"first divergence at {found.unit} {found.index}, margin {margin}",
        found.index,
        found.unit,
        found.expected_token,
        found.actual_token,
        found.common_prefix,
        found.expected_continuation,
        found.actual_continuation,
        found.margin_nats,
        found.near_tie,
    )


def differential(
    reference_records: Iterable[dict[str, Any]],
    other_records: Iterable[dict[str, Any]],
    near_tie_nats: float,
) -> list[Divergence]:
    """The divergences of another configuration's answers from the reference's, by case."""
    ref, other = unary_outputs(reference_records), unary_outputs(other_records)
    out = []
    for key in sorted(ref.keys() & other.keys()):
        found = _compare(key, ref[key], other[key], near_tie_nats)
        if found is not None:
            out.append(found)
    return out


def differential_summary(
    reference_records: Iterable[dict[str, Any]],
    other_records: Iterable[dict[str, Any]],
    near_tie_nats: float,
) -> dict[str, Any]:
    """Counts and divergences, JSON-able, for a report: compared, identical, near_ties,
    different, unclassified, error_mismatch, and cases only one side answered."""
    ref, other = unary_outputs(list(reference_records)), unary_outputs(list(other_records))
    found = differential(ref.values(), other.values(), near_tie_nats)
    compared = len(ref.keys() & other.keys())
    kinds = [d.kind for d in found]
    return {
        "compared": compared,
        "identical": compared - len(found),
        "near_ties": kinds.count("near_tie"),
        "different": kinds.count("different"),
        "unclassified": kinds.count("unclassified"),
        "error_mismatch": kinds.count("error_mismatch"),
        "only_reference": sorted("/".join(k) for k in ref.keys() - other.keys()),
        "only_other": sorted("/".join(k) for k in other.keys() - ref.keys()),
        "near_tie_nats": near_tie_nats,
        "divergences": [d.to_json() for d in found],
    }


@dataclass
class TreatmentRecords:
    """One correctness treatment of a run: a label (its directory), its deployment, its
    records (``read_records(dir / "records.jsonl")``)."""

    label: str
    deployment: str
    records: list[dict[str, Any]]


def run_differentials(
    treatments: Iterable[TreatmentRecords], reference: str, near_tie_nats: float
) -> dict[str, dict[str, Any]]:
    """Every other treatment's :func:`differential_summary` against the reference
    deployment's treatment, by label (empty when the reference did not run)."""
    listed = list(treatments)
    ref = next((t for t in listed if t.deployment == reference), None)
    if ref is None:
        return {}
    return {
        t.label: {
            "deployment": t.deployment,
            "reference": ref.label,
            **differential_summary(ref.records, t.records, near_tie_nats),
        }
        for t in listed
        if t is not ref
    }


def run_dir_differentials(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The differentials of a finished run, from its files: for each group of correctness
    treatments sharing one probe configuration with a ``reference``, every treatment's
    :func:`differential_summary` against the reference deployment's, by treatment dir."""
    plan = json.loads((run_dir / PLAN).read_text())
    deployment_of = {w["id"]: w["deployment"] for w in plan["workers"]}
    groups: dict[str, list[dict[str, Any]]] = {}
    for treatment in plan["treatments"]:
        config = treatment.get("config") or {}
        if treatment["probe"] == "correctness" and config.get("reference"):
            groups.setdefault(json.dumps(config, sort_keys=True), []).append(treatment)
    found: dict[str, dict[str, Any]] = {}
    for members in groups.values():
        config = members[0]["config"]
        runs = [
            TreatmentRecords(
                t["dir"],
                deployment_of.get(t["workers"][0], "") if t["workers"] else "",
                read_records(run_dir / t["dir"] / RECORDS),
            )
            for t in members
            if t["status"] == "planned"
        ]
        found |= run_differentials(
            runs, config["reference"], float(config.get("near_tie_nats", 0.05))
        )
    return found
