"""``submitted.json``: what the submitter did, one JSON line per workload, appended as it goes.

The first line is a header (the run id, name prefix, namespace, template and values); each
further line is one workload's submission: its deterministic name, when the create call
was sent and answered (wall-clock epoch milliseconds, the same clock as the cluster's
timestamps), and how it ended (``created``, ``existed`` — a resumed submitter found it —
or ``error`` with the API's message). A crash loses at most the line being written; a
torn last line is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from testbed.core.errors import InputError
from testbed.results.files import read_records

SUBMITTED = "submitted.json"


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Header(_Record):
    """The first line: what every workload of this output directory is made of."""

    type: Literal["header"] = "header"
    run: str = Field(description="run id; the value of the testbed.io/scale-run label")
    prefix: str = Field(description="workload names are PREFIX-NNNNN")
    namespace: str
    template: str = Field(description="the template's origin (file or built-in type)")
    workload_type: str = Field("", description="training, distributed or interactive")
    fingerprint: str = Field(description="hash of template text and values: resume guard")
    values: dict[str, Any] = Field(default_factory=dict)
    kinds: list[tuple[str, str]] = Field(
        default_factory=list, description="(apiVersion, kind) of each object of a workload"
    )
    started_ms: float = 0.0


class ObjectRef(_Record):
    api_version: str
    kind: str
    name: str


class Submission(_Record):
    """One workload's create calls and their outcome."""

    type: Literal["workload"] = "workload"
    index: int
    name: str
    namespace: str
    kind: str = Field(description="kind of the workload object (the one its stages time)")
    api_version: str
    objects: list[ObjectRef] = Field(default_factory=list)
    expected_pods: int = 1
    sent_ms: float = Field(description="wall clock when the first create call was sent")
    acked_ms: float = Field(description="wall clock when the last create call returned")
    status: Literal["created", "existed", "error"]
    error: str | None = None


class Submitted(BaseModel):
    """A whole ``submitted.json``: the header and the latest line for each index."""

    header: Header | None = None
    workloads: dict[int, Submission] = Field(default_factory=dict)

    def ordered(self) -> list[Submission]:
        return [self.workloads[i] for i in sorted(self.workloads)]


def load(out_dir: Path) -> Submitted:
    """Read ``out_dir/submitted.json``; a later line for an index replaces an earlier one."""
    path = out_dir / SUBMITTED
    result = Submitted()
    for number, record in enumerate(read_records(path), start=1):
        try:
            if record.get("type") == "header":
                result.header = result.header or Header.model_validate(record)
            elif record.get("type") == "workload":
                submission = Submission.model_validate(record)
                old = result.workloads.get(submission.index)
                if old is None or old.status == "error" or submission.status != "error":
                    result.workloads[submission.index] = submission
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not a submission record: {exc}") from None
    return result


def line(record: BaseModel) -> str:
    return json.dumps(record.model_dump(mode="json"), separators=(",", ":")) + "\n"
