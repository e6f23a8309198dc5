"""The run summary's models (results/run_summary.py) are the one shape of a run's
summary.json: publish writes through them, every reader reads their attributes, the
published JSON Schema and the docs' tables are theirs, and a file of another version is
refused with the version it found."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
from rich.console import Console

from testbed.cli import main
from testbed.core.errors import InputError
from testbed.report.run_summary import PublishOptions, publish, run_document
from testbed.results.run_summary import (
    RunSummary,
    StatusValue,
    TreatmentRow,
    fields_of,
    read_run_summary,
    summary_schema,
)
from testbed.results.rundir import RUN_SUMMARY_VERSION, RunDir
from testbed.results.verdict import Status
from tests.report.fake_runs import make_run

DOCS = Path(__file__).parents[2] / "docs"


def _published(tmp_path: Path, name: str = "r", **kwargs: Any) -> Path:
    run = make_run(tmp_path, name, extras=True, **kwargs)
    quiet = Console(file=io.StringIO())
    publish(run, quiet, PublishOptions(use_index=False))
    return run


def _table(text: str, after: str) -> list[str]:
    """The first column of the first markdown table after the line containing ``after``."""
    lines = text[text.index(after) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| field |"))
    names = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        names.append(re.match(r"\| `([a-z_]+)` \|", line).group(1))  # type: ignore[union-attr]
    return names


def test_the_written_summary_is_the_models_json_and_reads_back_equal(tmp_path: Path) -> None:
    run = _published(tmp_path)
    written = json.loads((run / "summary.json").read_text())
    again = read_run_summary(run / "summary.json")
    assert again.to_json() == written  # nothing dropped, added or changed on the way back
    assert isinstance(again.treatments[0], TreatmentRow)
    assert [r.probe for r in again.treatments] == ["load", "load", "correctness", "ab"]
    # keys given only in some runs stay absent, not null, in the others
    assert "history" not in written
    assert all("source" not in row for row in written["treatments"])
    # an int stays an int and a float a float: the file is what it was before the model
    assert written["treatments"][0]["duration_s"] == 1.5
    assert written["servers"] == [
        {"worker": "w1", "deployment": "sim", "server": "sim", "version": "1.0",
         "argv": ["sim", "--port", "1"]}
    ]  # fmt: skip


def test_an_assembled_runs_rows_keep_a_null_source(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r")
    meta = json.loads((run / "run.json").read_text())
    meta["treatment_sources"] = {"001__sim-c1__t0001aaaa": "s3://bucket/task-1"}
    (run / "run.json").write_text(json.dumps(meta))
    rows = run_document(RunDir.existing(run)).to_json()["treatments"]
    assert [row["source"] for row in rows] == ["s3://bucket/task-1", None]


def test_the_written_summary_validates_against_the_published_schema(tmp_path: Path) -> None:
    written = json.loads((_published(tmp_path) / "summary.json").read_text())
    jsonschema.validate(written, summary_schema())
    broken = {**written, "treatments": [{**written["treatments"][0], "status": "GREEN"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, summary_schema())


def test_a_writer_cannot_add_a_key_the_model_does_not_name() -> None:
    row = {"id": "a", "dir": "d", "probe": "load", "params": {}, "params_key": "k"}
    with pytest.raises(ValueError, match="verdict"):
        TreatmentRow.model_validate({**row, "status": "PASS", "verdict": "PASS"})


def test_the_status_values_are_the_verdicts() -> None:
    assert set(get_args(StatusValue)) == {s.value for s in Status}


@pytest.mark.parametrize("found", [0, 2, None, "1"])
def test_a_summary_of_another_version_is_refused_with_the_version_found(
    tmp_path: Path, found: object
) -> None:
    run = _published(tmp_path)
    path = run / "summary.json"
    written = json.loads(path.read_text())
    if found is None:
        del written["schema_version"]
    else:
        written["schema_version"] = found
    path.write_text(json.dumps(written))
    with pytest.raises(InputError) as caught:
        read_run_summary(path)
    message = str(caught.value)
    assert f"schema_version {found!r}" in message
    assert f"reads version {RUN_SUMMARY_VERSION}" in message
    assert f"testbed report {run}" in message  # the fix: write it again from the run's files


def test_a_damaged_summary_names_the_field(tmp_path: Path) -> None:
    path = _published(tmp_path) / "summary.json"
    written = json.loads(path.read_text())
    del written["treatments"][1]["params_key"]
    path.write_text(json.dumps(written))
    with pytest.raises(InputError, match=r"treatments\.1\.params_key: Field required"):
        read_run_summary(path)
    path.write_text("[]")
    with pytest.raises(InputError, match=r"not a run's summary\.json"):
        read_run_summary(path)


def test_a_rerendered_report_keeps_the_machine_of_the_earlier_summary(tmp_path: Path) -> None:
    run = _published(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    summary["machine"] = {"hostname": "where-it-ran", "cpu_count": 64}
    (run / "summary.json").write_text(json.dumps(summary))
    meta = json.loads((run / "run.json").read_text())
    del meta["machine"]  # an older run.json: the machine only in the summary
    (run / "run.json").write_text(json.dumps(meta))
    assert run_document(RunDir.existing(run)).machine["hostname"] == "where-it-ran"


def test_the_docs_tables_list_exactly_the_models_fields_in_order() -> None:
    docs = (DOCS / "results.md").read_text()
    section = docs[docs.index("### The run summary (summary.json)") :]
    assert _table(section, "The run summary:") == list(fields_of(RunSummary))
    assert _table(section, "Each treatment row") == list(fields_of(TreatmentRow))


def test_testbed_schema_summary_prints_the_models_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema", "summary"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == summary_schema()
    assert printed["version"] == RUN_SUMMARY_VERSION
    assert list(printed["properties"]) == list(fields_of(RunSummary))
    row = printed["$defs"]["TreatmentRow"]
    assert {k: v["description"] for k, v in row["properties"].items()} == fields_of(TreatmentRow)
