"""The typed shape of a run's ``summary.json``: :class:`RunSummary` and its rows, one
:class:`TreatmentRow` per treatment of the plan.

``report/run_summary.py`` builds a :class:`RunSummary` from the run directory's files (plan,
run.json, each treatment's own summary.json) and writes it with :meth:`RunSummary.to_json`;
a ``testbed load`` folder and another harness's results become one too
(``report/load_run.py``, ``report/foreign_run.py``). Every reader — the terminal, JUnit,
report.html, summary.csv, ``testbed compare``, the results index — reads attributes of these
models, so mypy sees a renamed field. The JSON Schema (``testbed schema summary``) is
generated from them, each field's meaning from its ``Annotated`` description (the tables of
docs/results.md follow them, and a test holds them to it).

Not to be confused with a *treatment's* summary.json (the probe's figures and its verdict,
read by :mod:`testbed.results.summaries`): a row carries that summary's verdict, a few of
its facts and its numeric leaves as ``metrics``.

:data:`RUN_SUMMARY_VERSION` counts incompatible changes; a key is added only with a bump and
the docs. A key is written when it was given: ``source`` only in an assembled run,
``history`` only when change points were found, and the documents of a load folder or of
another harness's results leave out what they cannot know (never written to disk as a run's
summary.json, they keep the defaults).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testbed.core.errors import InputError
from testbed.results.rundir import RUN_SUMMARY_VERSION

#: A verdict as written (:class:`testbed.results.verdict.Status`'s values).
StatusValue = Literal["PASS", "FAIL", "ERROR", "INCONCLUSIVE", "SKIPPED", "NOT RUN"]
#: ``duration_s`` and the like: an int stays an int in the JSON, as it was given.
Number = int | float


def _doc(text: str) -> Any:
    return Field(description=text)


class _Model(BaseModel):
    # a key no field names is a writer's typo or a newer file: refused, never dropped
    model_config = ConfigDict(extra="forbid")


class TreatmentRow(_Model):
    """One treatment of the plan: what it was, its verdict and its metrics."""

    id: Annotated[str, _doc("the hash of the treatment's fully resolved configuration")]
    dir: Annotated[str, _doc("its folder in the run directory (. for a testbed load folder)")]
    slug: Annotated[str, _doc("the readable part of its folder name")] = ""
    probe: Annotated[str, _doc("load, correctness, ab, scale …")]
    workers: Annotated[list[str], _doc("the plan's workers it ran against")] = []
    deployments: Annotated[list[str], _doc("those workers' deployments, in the same order")] = []
    params: Annotated[dict[str, Any], _doc("the factor values of its treatment")]
    params_key: Annotated[
        str, _doc("hash of probe, deployments and params: pairs runs whose ids changed")
    ]
    status: Annotated[StatusValue, _doc("its verdict (NOT RUN: planned, no verdict)")]
    reason: Annotated[str, _doc("why, in words")] = ""
    evidence: Annotated[dict[str, Any], _doc("the numbers behind the verdict")] = {}
    attempt: Annotated[int | None, _doc("which attempt gave the verdict (1 unless retried)")] = None
    started: Annotated[str | None, _doc("when it started (wall time, UTC); null: never")] = None
    duration_s: Annotated[Number | None, _doc("how long it ran, in seconds")] = None
    records: Annotated[int | None, _doc("lines written to its records.jsonl")] = None
    worker_info: Annotated[
        list[dict[str, Any]],
        _doc("each worker as the treatment saw it: server, version, argv, pid, port …"),
    ] = []
    metrics: Annotated[
        dict[str, float],
        _doc(
            "every finite numeric leaf of the treatment's summary.json by dotted name"
            " (ttft_ms.p99, throughput.requests_per_s, stages.<stage>.itl_ms.p50)"
        ),
    ] = {}
    source: Annotated[
        str | None,
        _doc("an assembled run only: the folder or s3:// URL it came from (null: none held it)"),
    ] = None


class Server(_Model):
    """A worker's server as the treatments saw it (a key only when one of them said it)."""

    worker: Annotated[str, _doc("the plan's worker id")]
    deployment: Annotated[str | None, _doc("its deployment")] = None
    server: Annotated[str | None, _doc("its server kind (vllm, tgi, sim, external …)")] = None
    version: Annotated[str | None, _doc("the server's version")] = None
    argv: Annotated[list[str] | None, _doc("its command line")] = None

    def to_json(self) -> dict[str, Any]:
        """The keys a treatment said, as summary.json and the index keep them."""
        return self.model_dump(mode="json", exclude_unset=True)


class Skipped(_Model):
    """What the run skipped: whole treatments, and cases inside the others."""

    treatments: Annotated[int, _doc("treatments SKIPPED")] = 0
    cases: Annotated[int, _doc("cases skipped inside treatments that ran")] = 0


class RunSummary(_Model):
    """A run's summary.json: its metadata, status and one row per treatment."""

    schema_version: Annotated[int, _doc("the version of this shape")] = RUN_SUMMARY_VERSION
    kind: Annotated[Literal["testbed.run"], _doc("always testbed.run")] = "testbed.run"
    generated: Annotated[str | None, _doc("when this file was written (wall time)")] = None
    run: Annotated[
        dict[str, Any],
        _doc("run.json as written: run_id, campaign, started; label and commit when known …"),
    ]
    testbed_version: Annotated[str | None, _doc("the testbed that ran it")] = None
    campaign: Annotated[str | None, _doc("the campaign's name")] = None
    campaign_hash: Annotated[
        str | None, _doc("hash of the resolved campaign (null: no campaign)")
    ] = None
    machine: Annotated[
        dict[str, Any],
        _doc("hostname, cpu_count, cpu_model, memory_gb, machine, platform, python; {} unknown"),
    ] = {}
    servers: Annotated[list[Server], _doc("each worker's server, version and command line")] = []
    status: Annotated[StatusValue, _doc("the most severe of treatments, criteria and steps")]
    counts: Annotated[dict[str, int], _doc("treatments by status")] = {}
    skipped: Annotated[Skipped, _doc("what was skipped")] = Skipped()
    tested: Annotated[bool, _doc("false when nothing was tested (exit 5)")] = True
    treatments: Annotated[list[TreatmentRow], _doc("one row per treatment, in plan order")]
    criteria: Annotated[
        list[dict[str, Any]], _doc("the campaign's criteria, each with its comparisons")
    ] = []
    steps: Annotated[list[dict[str, Any]], _doc("the user's steps, each with its status")] = []
    history: Annotated[
        dict[str, Any] | None,
        _doc(
            "only when change points were found: the series of its configurations, as"
            " testbed history --json writes them"
        ),
    ] = None

    def to_json(self) -> dict[str, Any]:
        """The JSON value of summary.json: the keys that were given, in the models' order
        (the version and kind always: they say what the file is)."""
        given = self.model_dump(mode="json", exclude_unset=True)
        return {"schema_version": self.schema_version, "kind": self.kind, **given}

    def row(self, dirname: str) -> TreatmentRow | None:
        """The row of the treatment in folder ``dirname``, None when the plan has none."""
        return next((r for r in self.treatments if r.dir == dirname), None)


def read_run_summary(path: Path) -> RunSummary:
    """A run's summary.json, read through the model. A file of another ``schema_version``
    is refused with the version found (this testbed writes and reads
    :data:`RUN_SUMMARY_VERSION`); ``testbed report DIR`` writes it again from the run
    directory's own files."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise InputError(f"{path} cannot be read ({exc}): not a run's summary.json") from None
    if not isinstance(raw, dict) or raw.get("kind") != "testbed.run":
        raise InputError(f'{path} is not a run\'s summary.json (no "kind": "testbed.run")')
    found = raw.get("schema_version")
    if found != RUN_SUMMARY_VERSION:
        raise InputError(
            f"{path} has schema_version {found!r}; this testbed reads version"
            f" {RUN_SUMMARY_VERSION} — write it again with `testbed report {path.parent}`"
            " (from the run directory's own files)"
        )
    try:
        return RunSummary.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"{path}: {where}: {first['msg']} ({exc.error_count()} problem(s)) — a damaged"
            f" summary; write it again with `testbed report {path.parent}`"
        ) from None


def summary_schema() -> dict[str, Any]:
    """The JSON Schema of a run's summary.json, generated from the models."""
    schema = RunSummary.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "testbed run summary (summary.json of a run directory)",
        "version": RUN_SUMMARY_VERSION,
    }


def fields_of(model: type[BaseModel]) -> dict[str, str]:
    """Each field of a model and its meaning, in declaration order (the docs' tables)."""
    return {name: str(info.description) for name, info in model.model_fields.items()}
