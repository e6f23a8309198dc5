"""The files a campaign names, checked before anything starts.

Case files, A/B prompt files and TLS CA bundles are relative to the campaign file's folder;
a load dataset file is relative to the working directory (as ``testbed load --dataset``).
A file that is missing is a :class:`CampaignError` (exit 2) placed at the line that names
it, never an ERROR found halfway through a run. Case files are parsed too (their own errors
carry their own file and line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.config.loader import LoadedCampaign
from testbed.config.provenance import Path as DocPath
from testbed.core.errors import CampaignError
from testbed.plan.model import Plan


def check_files(loaded: LoadedCampaign, plan: Plan) -> None:
    """Raise CampaignError for the first named file that does not exist."""
    for i, deployment in enumerate(loaded.campaign.deployments):
        bundle = getattr(getattr(deployment, "tls", None), "ca_bundle", None)
        if bundle:
            _exists(loaded, loaded.base_dir, bundle, ("deployments", i, "tls", "ca_bundle"))
    for probe, config in _probe_configs(plan):
        if probe == "correctness":
            for j, case in enumerate(config["cases"]):
                _exists(loaded, loaded.base_dir, case, ("correctness", "cases", j))
        elif probe == "ab" and config.get("prompts"):
            _exists(loaded, loaded.base_dir, config["prompts"], ("ab", "prompts"))
        elif probe == "load" and config["dataset"].get("kind") == "file":
            path = config["dataset"]["path"]
            _exists(loaded, Path.cwd(), path, ("load", "dataset", "path"))
    if loaded.campaign.correctness is not None:
        from testbed.probes.correctness.cases import load_case_files

        for probe, config in _probe_configs(plan):
            if probe == "correctness":
                load_case_files([loaded.base_dir / path for path in config["cases"]])
    _check_scale_templates(loaded, plan)


def _check_scale_templates(loaded: LoadedCampaign, plan: Plan) -> None:
    """Scale templates are rendered now: a missing file or placeholder is an input error."""
    if loaded.campaign.scale is None:
        return
    from testbed.config.scale import ScaleProbe
    from testbed.probes.scale.submit import check_template

    for probe, config in _probe_configs(plan):
        if probe == "scale":
            check_template(ScaleProbe.model_validate(config), loaded.base_dir)


def _probe_configs(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """Each distinct resolved probe section of the plan (matrix levels included)."""
    keys = dict.fromkeys((t.probe, t.probe_key) for t in plan.treatments)
    return [(probe, plan.probe_configs[key]) for probe, key in keys]


def _exists(loaded: LoadedCampaign, base: Path, name: str, at: DocPath) -> None:
    path = Path(name) if Path(name).is_absolute() else base / name
    if path.is_file():
        return
    origin = loaded.provenance.nearest(at)
    where = origin.describe() if origin else loaded.file
    field = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in at).replace(".[", "[")
    raise CampaignError(f"{where}: {field}: no file {name} (relative to {base}) — check the path")
