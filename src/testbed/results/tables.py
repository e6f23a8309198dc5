"""Records and summaries as CSV, beside their JSON: what pandas, a spreadsheet or a SQL
``COPY`` opens as it is (``pandas.read_csv("runs/R/summary.csv")``).

- ``records.csv`` beside a treatment's ``records.jsonl``: one row per record, the load
  record's columns first in the order of :data:`LOAD_RECORD` (the published schema of a load
  record, docs/results.md), any other key after them; a list (``chunks_ns``) is one JSON
  cell. With the run's clock anchor, ``sent_at`` and ``done_at`` give the wall time (ISO
  8601, UTC, microseconds) of ``sent_ns`` and ``done_ns``/``failed_ns``: what joins a
  server's log by time when its lines carry no request id.
- ``summary.csv`` beside a run's ``summary.json``: one row per treatment — directory, id,
  probe, status, reason, each param as ``param.<name>``, each metric by its dotted name.

Written after the run (``testbed run`` ends by publishing, ``testbed report`` and
``testbed load`` write them too), never on the load generator's hot path.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.results.files import write_atomic
from testbed.results.records import LoadRecord, fields_of
from testbed.results.run_summary import TreatmentRow

#: The load probe's record, one request: each field and its meaning (the published schema,
#: generated from :class:`~testbed.results.records.LoadRecord`, in its order).
LOAD_RECORD: dict[str, str] = fields_of(LoadRecord)

#: Derived columns of records.csv (wall time from the run's clock anchor).
DERIVED = {
    "sent_at": "wall time of sent_ns (ISO 8601, UTC)",
    "done_at": "wall time of done_ns, else of failed_ns",
}


def _keys(records_path: Path) -> list[str]:
    seen: dict[str, None] = {}
    for record in _read(records_path):
        seen.update(dict.fromkeys(record))
    known = [k for k in LOAD_RECORD if k in seen]
    return known + [k for k in seen if k not in LOAD_RECORD]


def _read(path: Path) -> Iterator[dict[str, Any]]:
    """Whole records one by one (a torn last line is skipped, as read_records does)."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record


def wall_time(t_ns: Any, clock: Mapping[str, Any] | None) -> str:
    """``t_ns`` (monotonic) as wall time by the run's anchor; "" when either is missing."""
    if not isinstance(t_ns, int) or not clock:
        return ""
    wall_ns = int(clock["wall_ns"]) + t_ns - int(clock["monotonic_ns"])
    moment = _dt.datetime.fromtimestamp(wall_ns / 1e9, tz=_dt.UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _cell(value: Any) -> Any:
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return "" if value is None else value


def write_records_csv(folder: Path, clock: Mapping[str, Any] | None = None) -> Path | None:
    """``records.csv`` from ``records.jsonl`` in ``folder`` (None when it has none)."""
    source = folder / "records.jsonl"
    if not source.is_file():
        return None
    keys = _keys(source)
    derived = list(DERIVED) if clock and "sent_ns" in keys else []
    target = folder / "records.csv"
    tmp = folder / ".records.csv.tmp"
    with tmp.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(keys + derived)
        for record in _read(source):
            row = [_cell(record.get(k)) for k in keys]
            if derived:
                end = record.get("done_ns") or record.get("failed_ns")
                row += [wall_time(record.get("sent_ns"), clock), wall_time(end, clock)]
            writer.writerow(row)
    tmp.replace(target)
    return target


def summary_rows(treatments: Sequence[TreatmentRow]) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of summary.csv: one row per treatment of a run document."""
    fixed = ["dir", "id", "probe", "status", "reason"]
    params: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for row in treatments:
        params.update(dict.fromkeys(row.params))
        metrics.update(dict.fromkeys(row.metrics))
    header = fixed + [f"param.{p}" for p in params] + list(metrics)
    rows = [
        [_cell(v) for v in (row.dir, row.id, row.probe, row.status, row.reason)]
        + [_cell(row.params.get(p)) for p in params]
        + [_cell(row.metrics.get(m)) for m in metrics]
        for row in treatments
    ]
    return header, rows


def write_summary_csv(folder: Path, treatments: Sequence[TreatmentRow]) -> Path:
    """``summary.csv`` in ``folder`` from a run document's treatment rows."""
    import io

    header, rows = summary_rows(treatments)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    write_atomic(folder / "summary.csv", text.getvalue())
    return folder / "summary.csv"


def write_tables(run_path: Path, treatments: Sequence[TreatmentRow]) -> None:
    """Every CSV of a run (or of a ``testbed load`` folder, whose one treatment is ``.``):
    each treatment's records.csv, with its load summary's clock anchor, and summary.csv."""
    from testbed.results.files import read_object

    for row in treatments:
        folder = run_path / row.dir
        setup = read_object(folder / "summary.json").get("setup")
        clock = setup.get("clock") if isinstance(setup, dict) else None
        write_records_csv(folder, clock if isinstance(clock, dict) else None)
    write_summary_csv(run_path, treatments)
