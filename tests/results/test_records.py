"""The record models (results/records.py) are the one shape of a record: the writers build
them, the docs' table and the published JSON Schema are theirs, and a key that means
something else in another probe has another name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.results.records import (
    RECORD_SCHEMA_VERSION,
    AbRecord,
    LoadRecord,
    fields_of,
    record_schema,
)
from testbed.results.tables import LOAD_RECORD

DOCS = Path(__file__).parents[2] / "docs"


def table_fields(text: str, after: str) -> list[str]:
    """The first column of the first markdown table after the line containing ``after``."""
    lines = text[text.index(after) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| field |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(re.match(r"\| `([a-z_]+)` \|", line).group(1))  # type: ignore[union-attr]
    return rows


def test_the_docs_record_table_lists_exactly_the_models_fields_in_order() -> None:
    docs = (DOCS / "results.md").read_text()
    listed = table_fields(docs, "The load record (")
    assert listed == [*fields_of(LoadRecord), "sent_at", "done_at"]
    assert fields_of(LoadRecord) == LOAD_RECORD  # records.csv's column order is the model's


def test_the_schema_is_generated_from_the_models() -> None:
    schema = record_schema()
    assert schema["version"] == RECORD_SCHEMA_VERSION
    load, ab = schema["$defs"]["load"], schema["$defs"]["ab"]
    assert list(load["properties"]) == list(fields_of(LoadRecord))
    assert list(ab["properties"]) == list(fields_of(AbRecord))
    assert "text" not in load["required"]  # keep_text only
    for model, part in ((LoadRecord, load), (AbRecord, ab)):
        meanings = {k: v["description"] for k, v in part["properties"].items()}
        assert meanings == fields_of(model)


def test_a_shared_key_has_one_meaning_and_a_different_meaning_another_key() -> None:
    load, ab = fields_of(LoadRecord), fields_of(AbRecord)
    for key in set(load) & set(ab):  # the same meaning; a parenthesis says when it is there
        assert load[key].split(" (")[0] == ab[key].split(" (")[0], key
    # the load record's output_tokens is the client's count; A/B only has the server's
    assert "output_tokens" not in ab
    assert ab["usage_output_tokens"] == load["usage_output_tokens"]


def test_testbed_schema_records_prints_the_models_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema", "records"]) == 0
    assert json.loads(capsys.readouterr().out) == record_schema()
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "testbed campaign"
