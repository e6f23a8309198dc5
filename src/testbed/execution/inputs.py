"""The files and models a campaign names, checked before anything starts.

Case files, A/B prompt files, load dataset files and TLS CA bundles are relative to the
campaign file's folder.
A file that is missing is a :class:`CampaignError` (exit 2) placed at the line that names
it, never an ERROR found halfway through a run. Case files are parsed too (their own errors
carry their own file and line). On the local backend, the model of a server that runs here
(hf, vllm) must be one this machine can load: a bundled name of the catalogue, an existing
folder, or s3:// — not a hub id (testbed runs offline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.config.loader import LoadedCampaign
from testbed.config.provenance import Path as DocPath
from testbed.config.server_kinds import kind_of
from testbed.config.stacks import StackDeployment
from testbed.core.errors import CampaignError, InputError
from testbed.plan.model import Plan


def check_files(loaded: LoadedCampaign, plan: Plan) -> None:
    """Raise CampaignError for the first named file or model that cannot be used."""
    _check_local_models(loaded)
    _check_scale_templates(loaded, plan)
    _check_stacks(loaded, plan)
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
            _exists(loaded, loaded.base_dir, path, ("load", "dataset", "path"))
    if loaded.campaign.correctness is not None:
        from testbed.config.correctness import CorrectnessProbe
        from testbed.probes.correctness.cases import load_case_files
        from testbed.probes.correctness.tgis_fields import refuse_openai_only_fields

        for probe, config in _probe_configs(plan):
            if probe == "correctness":
                files = load_case_files([loaded.base_dir / path for path in config["cases"]])
                refuse_openai_only_fields(files, CorrectnessProbe.model_validate(config))


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


def check_capacity(loaded: LoadedCampaign, plan: Plan) -> None:
    """Each load and A/B section (matrix levels included) must fit this machine's open files
    and memory, when its traffic starts here (CampaignError at the field's line)."""
    from testbed.config.ab import AbProbe
    from testbed.config.load import LoadProbe
    from testbed.probes.ab import capacity as ab_capacity
    from testbed.probes.limits import Limits
    from testbed.probes.load import capacity as load_capacity

    limits = Limits.here()
    for probe, config in _probe_configs(plan):
        if probe == "load":
            found = load_capacity.excess(LoadProbe.model_validate(config), limits)
        elif probe == "ab":
            found = ab_capacity.excess(AbProbe.model_validate(config), limits)
        else:
            continue
        if found is not None:
            at: DocPath = (probe, *found.field.split("."))
            raise CampaignError(f"{_where(loaded, at)}: {probe}.{found.field}: {found.message}")


def _check_scale_templates(loaded: LoadedCampaign, plan: Plan) -> None:
    """Scale templates are rendered now: a missing file or placeholder is an input error."""
    if loaded.campaign.scale is None:
        return
    from testbed.config.scale import ScaleProbe
    from testbed.probes.scale.submit import check_template

    for probe, config in _probe_configs(plan):
        if probe == "scale":
            check_template(ScaleProbe.model_validate(config), loaded.base_dir)


def _check_stacks(loaded: LoadedCampaign, plan: Plan) -> None:
    """Each stack worker's manifests render with its values, parse, and hold what its
    ``ready``/``endpoint``/``metrics`` name (placeholders: the run of ``testbed plan``)."""
    stacks = [(w, w.config) for w in plan.workers.values() if isinstance(w.config, StackDeployment)]
    if not stacks:
        return
    from testbed.backends.kubernetes.stack import render_worker
    from testbed.backends.kubernetes.stack_checks import reference_problems

    index = {d.name: i for i, d in enumerate(loaded.campaign.deployments)}
    backend = loaded.campaign.backend.model_dump(mode="json")
    names: dict[str, set[str]] = {}  # deployment → kind/name of its objects
    for worker, stack in stacks:
        i = index[worker.deployment]
        combo = ", ".join(f"{k}={v}" for k, v in worker.params.items())
        with_params = f" (with {combo})" if combo else ""
        try:
            objects = render_worker(f"{loaded.campaign.name}-plan", worker.id, stack, backend,
                                    loaded.base_dir)  # fmt: skip
        except InputError as exc:
            at: DocPath = ("deployments", i, "manifests")
            raise CampaignError(
                f"{_where(loaded, at)}: deployments[{i}].manifests{with_params}: {exc}"
            ) from None
        for message, field in reference_problems(stack, objects):
            at = ("deployments", i, *field)
            raise CampaignError(f"{_where(loaded, at)}: deployments[{i}]: {message}{with_params}")
        names.setdefault(worker.deployment, {o.describe() for o in objects})
    _check_collisions(loaded, names, index)


def _check_collisions(
    loaded: LoadedCampaign, names: dict[str, set[str]], index: dict[str, int]
) -> None:
    """Two stack deployments that may run at once (an A/B pair, or any two under a
    parallel strategy) must not create objects of the same name in one namespace."""
    ab = loaded.campaign.ab
    together = loaded.campaign.execution.strategy != "sequential"
    pairs = [(a, b) for a in names for b in names if a < b]
    for a, b in pairs:
        if not (together or (ab is not None and {a, b} == {ab.stable, ab.canary})):
            continue
        shared = sorted(names[a] & names[b])
        if shared:
            at: DocPath = ("deployments", index[b], "manifests")
            raise CampaignError(
                f"{_where(loaded, at)}: stacks {a} and {b} both create {', '.join(shared[:3])}"
                " and may run at the same time — put {{ deployment.name }} in the objects'"
                " names (and in ready/endpoint), or set execution.strategy: sequential"
            )


def _check_local_models(loaded: LoadedCampaign) -> None:
    if loaded.campaign.backend.kind != "local":
        return
    from testbed.servers.models import parse_source

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
        if problem:
            raise CampaignError(f"{_where(loaded, at)}: deployments[{i}].model: {problem}")


def _where(loaded: LoadedCampaign, at: DocPath) -> str:
    origin = loaded.provenance.nearest(at)
    return origin.describe() if origin else loaded.file


def _probe_configs(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """Each distinct resolved probe section of the plan (matrix levels included)."""
    keys = dict.fromkeys((t.probe, t.probe_key) for t in plan.treatments)
    return [(probe, plan.probe_configs[key]) for probe, key in keys]


def _exists(loaded: LoadedCampaign, base: Path, name: str, at: DocPath) -> None:
    path = Path(name) if Path(name).is_absolute() else base / name
    if path.is_file():
        return
    where = _where(loaded, at)
    field = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in at).replace(".[", "[")
    raise CampaignError(f"{where}: {field}: no file {name} (relative to {base}) — check the path")
