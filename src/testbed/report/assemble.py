"""One run from many run folders: ``testbed report s3://bucket/prefix`` or ``testbed report
DIR1 DIR2 …``.

An exported Tekton PipelineRun or Argo Workflow runs one ``testbed worker`` per treatment,
and each uploads a one-treatment run directory (``execution/export``, ``results/s3.py``).
This module gathers those folders — downloaded from an S3 prefix, or local — checks that
they come from one campaign (the same campaign hash), and writes a new run directory
holding every treatment folder under the campaign's *whole* plan, re-expanded from the
resolved campaign the folders carry. A treatment no folder holds is then NOT RUN, exactly
as in a local run that ended before it; publishing that directory gives the same tables,
plots, verdict, compare and JUnit as a local run of the whole campaign.

Provenance: ``run.json`` gains ``sources`` (each folder: where it came from, its run id,
machine, the treatments it held) and each treatment row of the summary a ``source``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.core.clock import wall_label
from testbed.core.errors import InputError
from testbed.results.files import write_json
from testbed.results.rundir import PLAN, RESOLVED, RUN_FILE, RunDir, read_summary

ASSEMBLED_SUFFIX = "assembled"


@dataclass
class Folder:
    """One run folder found under a source."""

    path: Path
    origin: str  # what the user named: a local path, or the s3:// URL of the folder
    meta: dict[str, Any]
    plan: dict[str, Any]
    treatments: list[str] = field(default_factory=list)  # dirnames it holds (with a summary)


def is_assembly(sources: list[str]) -> bool:
    """Several sources, or one S3 URL, or one local folder that holds run folders."""
    if len(sources) != 1 or sources[0].startswith("s3://"):
        return True
    path = Path(sources[0])
    return path.is_dir() and not (path / RUN_FILE).is_file() and bool(_run_folders(path))


def gather(sources: list[str], cache: Path, endpoint_url: str | None) -> list[Folder]:
    """Every run folder under every source (an S3 prefix is downloaded into ``cache``)."""
    from testbed.results.s3 import download_prefix

    folders: list[Folder] = []
    for source in sources:
        if source.startswith("s3://"):
            root = download_prefix(source, cache, endpoint_url)
            base = source.rstrip("/")
        else:
            root = Path(source)
            if not root.is_dir():
                raise InputError(f"{source} is not a directory nor an s3:// URL")
            base = ""
        found = _run_folders(root)
        if not found:
            raise InputError(f"{source} holds no testbed run folder (no {RUN_FILE} under it)")
        for path in found:
            rel = path.relative_to(root).as_posix()
            origin = f"{base}/{rel}" if base else str(path)
            folders.append(_folder(path, origin))
    return folders


def _run_folders(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob(RUN_FILE) if (p.parent / PLAN).is_file())


def _folder(path: Path, origin: str) -> Folder:
    import json

    run = RunDir.existing(path)
    plan = json.loads((path / PLAN).read_text())
    held = [t["dir"] for t in plan["treatments"] if read_summary(path / t["dir"])]
    return Folder(path, origin.rstrip("/").removesuffix("/."), run.metadata(), plan, held)


def assemble(folders: list[Folder], out: Path | None, runs_dir: Path) -> RunDir:
    """Write the assembled run directory; its path."""
    first = folders[0]
    hashes = {f.meta.get("campaign_hash") for f in folders}
    if len(hashes) > 1:
        listing = "; ".join(f"{f.origin}: {f.meta.get('campaign_hash')}" for f in folders)
        raise InputError(
            "the folders come from different campaigns (campaign hashes differ): "
            f"{listing} — report each campaign's folders separately"
        )
    campaign = str(first.meta.get("campaign") or "run")
    run_dir = RunDir.create(runs_dir, f"{campaign}-{ASSEMBLED_SUFFIX}", out)
    plan = _whole_plan(first)
    chosen = _choose(folders)
    for dirname, folder in chosen.items():
        shutil.copytree(folder.path / dirname, run_dir.treatment(dirname))
    for folder in folders:  # server logs of every worker, first folder wins on a clash
        workers = folder.path / "workers"
        if workers.is_dir():
            shutil.copytree(workers, run_dir.path / "workers", dirs_exist_ok=True)
    shutil.copyfile(first.path / RESOLVED, run_dir.path / RESOLVED)
    write_json(run_dir.path / PLAN, plan)
    starts = sorted(str(f.meta["started"]) for f in folders if f.meta.get("started"))
    meta = {
        **{k: v for k, v in first.meta.items() if k not in ("only", "machine")},
        "run_id": run_dir.run_id,
        "started": starts[0] if starts else wall_label(),
        "assembled": wall_label(),
        "only": None,
        "sources": [_source(f, chosen) for f in folders],
        "treatment_sources": {d: f.origin for d, f in chosen.items()},
    }
    machines = {str((f.meta.get("machine") or {}).get("hostname")) for f in folders}
    if len(machines) == 1 and isinstance(first.meta.get("machine"), dict):
        meta["machine"] = first.meta["machine"]
    else:  # many machines: the run's machine is the list of them (each folder keeps its own)
        meta["machine"] = {"hostname": ", ".join(sorted(machines)), "assembled": True}
    write_json(run_dir.path / RUN_FILE, meta)
    return run_dir


def _whole_plan(folder: Folder) -> dict[str, Any]:
    """The campaign's whole plan, re-expanded from the folder's resolved campaign (a worker's
    plan.json holds only its own treatment)."""
    from testbed.config.loader import load_campaign
    from testbed.core.errors import TestbedError
    from testbed.plan.expand import expand

    try:
        loaded = load_campaign(folder.path / RESOLVED)
        loaded.base_dir = Path(str(folder.meta.get("base_dir", ".")))
        plan = expand(loaded).to_json()
    except TestbedError as exc:
        raise InputError(
            f"{folder.origin}/{RESOLVED} cannot be planned again here ({exc}); the whole"
            " campaign's plan is needed to know which treatments did not run"
        ) from None
    known = {t["dir"] for t in plan["treatments"]}
    stray = sorted(set(folder.treatments) - known)
    if stray:
        raise InputError(
            f"{folder.origin} holds treatments the campaign's plan does not ({', '.join(stray)})"
            " — a folder of another version of the campaign?"
        )
    return plan


def _choose(folders: list[Folder]) -> dict[str, Folder]:
    """Which folder gives each treatment: the only one, or — a retried task uploaded twice —
    the attempt that started last."""
    chosen: dict[str, Folder] = {}
    for folder in folders:
        for dirname in folder.treatments:
            held = chosen.get(dirname)
            if held is None or _started(folder, dirname) > _started(held, dirname):
                chosen[dirname] = folder
    return chosen


def _started(folder: Folder, dirname: str) -> str:
    return str(read_summary(folder.path / dirname).get("started") or "")


def _source(folder: Folder, chosen: dict[str, Folder]) -> dict[str, Any]:
    return {
        "origin": folder.origin,
        "run_id": folder.meta.get("run_id"),
        "started": folder.meta.get("started"),
        "machine": folder.meta.get("machine"),
        "treatments": folder.treatments,
        "used": sorted(d for d, f in chosen.items() if f is folder),
    }
