"""The run directory (DESIGN.md, Results)::

runs/<run-id>/
  run.json  campaign.resolved.yaml  plan.json  ledger.sqlite
  workers/<worker>/server.log
  NNN__<slug>__<hash>/   records.jsonl  summary.json  (+ plots, attempts/)
  report.html  junit.xml  summary.json
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.core.clock import run_stamp
from testbed.core.errors import InputError
from testbed.core.ids import slugify
from testbed.results.files import read_object, write_atomic, write_json

RUN_FILE = "run.json"
RESOLVED = "campaign.resolved.yaml"
PLAN = "plan.json"
LEDGER = "ledger.sqlite"
RECORDS = "records.jsonl"
SUMMARY = "summary.json"
#: The ``schema_version`` of a run's summary.json (a campaign's run, a load folder's or a
#: Benchmark Report's run document alike).
RUN_SUMMARY_VERSION = 1
PID_DIR = "pids"  # this machine's process groups of the run (servers, steps), to end


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    path: Path

    @classmethod
    def create(cls, parent: Path, campaign: str, explicit: Path | None = None) -> RunDir:
        """A new run directory: ``explicit`` if given (must be empty), else a fresh one."""
        try:
            return cls._create(parent, campaign, explicit)
        except OSError as exc:  # a file in the way, no permission, a read-only disk
            where = explicit if explicit is not None else parent
            raise InputError(
                f"cannot create the run directory {where}: {exc.strerror or exc}"
                f"{f' ({exc.filename})' if exc.filename else ''} — choose another"
                f" {'--out' if explicit is not None else 'results.dir'}"
            ) from None

    @classmethod
    def _create(cls, parent: Path, campaign: str, explicit: Path | None) -> RunDir:
        if explicit is not None:
            if explicit.exists() and not explicit.is_dir():
                raise InputError(f"--out {explicit} is a file, not a directory — choose another")
            if explicit.is_dir() and any(explicit.iterdir()):
                raise InputError(
                    f"{explicit} is not empty — use --resume {explicit} to continue that run,"
                    " or choose another --out"
                )
            explicit.mkdir(parents=True, exist_ok=True)
            return cls(explicit)
        parent.mkdir(parents=True, exist_ok=True)
        base = f"{run_stamp()}-{slugify(campaign, 40)}"
        for n in range(1000):
            candidate = parent / (base if n == 0 else f"{base}-{n}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            return cls(candidate)
        raise InputError(f"cannot create a run directory under {parent}")

    @classmethod
    def existing(cls, path: Path) -> RunDir:
        if not (path / RUN_FILE).is_file():
            raise InputError(
                f"{path} is not a testbed run directory (no {RUN_FILE}); a run killed before"
                " it was planned has nothing to resume — start it again with another --out"
            )
        return cls(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    def treatment(self, dirname: str) -> Path:
        return self.path / dirname

    def worker(self, worker_id: str) -> Path:
        return self.path / "workers" / worker_id

    def write_metadata(
        self, meta: dict[str, Any], document: dict[str, Any], plan: dict[str, Any]
    ) -> None:
        # run.json last: it marks a run directory (``existing``), so a crash in between
        # never leaves one that ``--resume`` accepts but cannot reopen.
        write_atomic(self.path / RESOLVED, yaml.safe_dump(document, sort_keys=False))
        write_json(self.path / PLAN, plan)
        write_json(self.path / RUN_FILE, meta)

    def metadata(self) -> dict[str, Any]:
        try:
            meta = json.loads((self.path / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
            raise InputError(
                f"{self.path / RUN_FILE} cannot be read ({exc}): not a testbed run"
                " directory, or a damaged one"
            ) from None
        if not isinstance(meta, dict):
            raise InputError(f"{self.path / RUN_FILE} is not a testbed run file (no mapping)")
        return meta

    def reset_treatment(self, dirname: str, attempt: int) -> None:
        """Move what an interrupted or failed attempt left into ``attempts/<n>/``: a retry
        starts clean, and nothing recorded is thrown away."""
        folder = self.treatment(dirname)
        if not folder.is_dir():
            return
        leftovers = [p for p in folder.iterdir() if p.name != "attempts"]
        if not leftovers:
            return
        keep = folder / "attempts" / str(attempt)
        keep.mkdir(parents=True, exist_ok=True)
        for item in leftovers:
            shutil.move(str(item), keep / item.name)


def read_summary(folder: Path) -> dict[str, Any]:
    """A treatment's summary.json, or {} when it has none (never run, or interrupted)."""
    return read_object(folder / SUMMARY)
