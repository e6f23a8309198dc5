"""The files and models a campaign names, checked before anything starts.

Case files, A/B prompt files, a load dataset's file (prompts, sessions' conversations, a
trace), a scale template (what each probe section's ``files()`` names) and TLS CA bundles
are relative to the campaign file's folder.
A file that is missing is a :class:`CampaignError` (exit 2) placed at the line that names
it, never an ERROR found halfway through a run. Case files are parsed too (their own errors
carry their own file and line), and an embeddings case is refused where its deployment's
server has no ``/v1/embeddings`` (hf, tgi). On the local backend, the model of a server
that runs here (hf, vllm) must be one this machine can load: a bundled name of the
catalogue, an existing folder, or s3:// — not a hub id (testbed runs offline).
"""

from __future__ import annotations

from pathlib import Path

from testbed.backends import backend_class
from testbed.config.ab import AbProbe
from testbed.config.correctness import CorrectnessProbe
from testbed.config.diagnostics import dotted
from testbed.config.load import LoadProbe
from testbed.config.loader import LoadedCampaign
from testbed.config.probe_settings import ProbeSettings
from testbed.config.provenance import Path as DocPath
from testbed.config.scale import ScaleProbe
from testbed.config.server_kinds import kind_of
from testbed.core.errors import CampaignError, InputError
from testbed.plan.model import Plan


def check_files(loaded: LoadedCampaign, plan: Plan) -> None:
    """Raise CampaignError for the first named file or model that cannot be used."""
    _check_local_models(loaded)
    _check_scale_templates(loaded, plan)
    backend_class(loaded.campaign.backend.kind).check_campaign(loaded, plan)
    for i, deployment in enumerate(loaded.campaign.deployments):
        bundle = getattr(getattr(deployment, "tls", None), "ca_bundle", None)
        if bundle:
            _exists(loaded, loaded.base_dir, bundle, ("deployments", i, "tls", "ca_bundle"))
    for section in _sections(plan):
        for at, name in section.files():
            _exists(loaded, loaded.base_dir, name, at)
    if loaded.campaign.correctness is not None:
        _check_case_files(loaded, plan)


def _check_case_files(loaded: LoadedCampaign, plan: Plan) -> None:
    """Each correctness section's case files parse, say nothing TGIS's request cannot
    carry, and send embeddings cases only to servers that answer ``/v1/embeddings``."""
    from testbed.probes.correctness.cases import load_case_files
    from testbed.probes.correctness.embedding_runner import unserved
    from testbed.probes.correctness.tgis_fields import refuse_openai_only_fields

    for key in dict.fromkeys(t.probe_key for t in plan.treatments):
        config = plan.probe_configs[key]
        if not isinstance(config, CorrectnessProbe):
            continue
        files = load_case_files([loaded.base_dir / path for path in config.cases])
        refuse_openai_only_fields(files, config)
        workers = {w for t in plan.treatments if t.probe_key == key for w in t.workers}
        for worker in sorted(workers):
            problems = unserved(files, plan.workers[worker].config)
            if problems:
                raise CampaignError("\n".join(problems))


def check_api_keys(loaded: LoadedCampaign) -> None:
    """An external deployment's ``api_key: ${env:NAME}`` must be set before a run starts
    (CampaignError at its line), not found unset by the first request."""
    import os

    from testbed.core.secrets import names

    for i, deployment in enumerate(loaded.campaign.deployments):
        key = getattr(deployment, "api_key", None)
        unset = [name for name in names(key or "") if name not in os.environ]
        if unset:
            at: DocPath = ("deployments", i, "api_key")
            raise CampaignError(
                f"{_where(loaded, at)}: deployments[{i}].api_key: environment variable"
                f" {unset[0]} is not set — export {unset[0]}=… before running"
            )


def check_footprint(loaded: LoadedCampaign, plan: Plan) -> None:
    """Each load and A/B section (matrix levels included) must fit this machine's open files
    and memory, when its traffic starts here (CampaignError at the field's line)."""
    from testbed.probes.limits import Limits
    from testbed.probes.load import footprint as load_footprint

    limits = Limits.here()
    for section in _sections(plan):
        if isinstance(section, LoadProbe):
            probe, found = "load", load_footprint.excess(section, limits)
        elif isinstance(section, AbProbe):
            # here, not above: the A/B package brings numpy (~0.1 s of every run's start)
            from testbed.probes.ab import footprint as ab_footprint

            probe, found = "ab", ab_footprint.excess(section, limits)
        else:
            continue
        if found is not None:
            at: DocPath = (probe, *found.field.split("."))
            raise CampaignError(f"{_where(loaded, at)}: {probe}.{found.field}: {found.message}")


def _check_scale_templates(loaded: LoadedCampaign, plan: Plan) -> None:
    """Scale templates are rendered now: a missing file or placeholder is an input error."""
    if loaded.campaign.scale is None:
        return
    from testbed.probes.scale.submit import check_template

    for section in _sections(plan):
        if isinstance(section, ScaleProbe):
            check_template(section, loaded.base_dir)


def _check_local_models(loaded: LoadedCampaign) -> None:
    if not loaded.campaign.backend.servers_here:
        return
    from testbed.servers.models import folder_problem, parse_source

    for i, deployment in enumerate(loaded.campaign.deployments):
        if not (kind_of(deployment).local and kind_of(deployment).weights):
            continue
        at: DocPath = ("deployments", i, "model")
        try:
            source = parse_source(deployment.model)
        except InputError as exc:
            raise CampaignError(f"{_where(loaded, at)}: deployments[{i}].model: {exc}") from None
        problem = ""
        if source.kind == "hub":
            problem = (
                f"{deployment.model!r} is a hub id, which the local backend cannot fetch (testbed"
                " runs offline) — use bundled:smollm2-135m, a folder, or s3://bucket/prefix"
            )
        elif source.kind == "local" and not Path(source.value).is_dir():
            problem = f"no model folder {source.value} — check the path"
        elif source.kind == "local":  # what the server would find only after a minute's start
            problem = folder_problem(Path(source.value)) or ""
        if problem:
            raise CampaignError(f"{_where(loaded, at)}: deployments[{i}].model: {problem}")


def _where(loaded: LoadedCampaign, at: DocPath) -> str:
    origin = loaded.provenance.nearest(at)
    return origin.describe() if origin else loaded.file


def _sections(plan: Plan) -> list[ProbeSettings]:
    """Each distinct resolved probe section of the plan's treatments (matrix levels
    included), in the treatments' order."""
    return [plan.probe_configs[key] for key in dict.fromkeys(t.probe_key for t in plan.treatments)]


def _exists(loaded: LoadedCampaign, base: Path, name: str, at: DocPath) -> None:
    path = Path(name) if Path(name).is_absolute() else base / name
    if path.is_file():
        return
    where = _where(loaded, at)
    raise CampaignError(
        f"{where}: {dotted(at)}: no file {name} (relative to {base}) — check the path"
    )
