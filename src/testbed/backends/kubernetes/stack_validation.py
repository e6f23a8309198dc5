"""A campaign's stacks (``server: manifests``) checked before anything starts: each stack
worker's manifests render with its values and hold what its ``ready``/``endpoint``/
``metrics`` name (:mod:`.stack_checks`), and stacks that may run at once create no object
of the same name. A problem is a :class:`CampaignError` (exit 2) at the campaign's line.
"""

from __future__ import annotations

from testbed.backends.kubernetes.stack import render_worker
from testbed.backends.kubernetes.stack_checks import reference_problems
from testbed.config.loader import LoadedCampaign
from testbed.config.provenance import Path as DocPath
from testbed.config.stacks import StackDeployment
from testbed.core.errors import CampaignError, InputError
from testbed.plan.model import Plan


def check_stacks(loaded: LoadedCampaign, plan: Plan) -> None:
    """Each stack worker's manifests render with its values, parse, and hold what its
    ``ready``/``endpoint``/``metrics`` name (placeholders: the run of ``testbed plan``)."""
    stacks = [(w, w.config) for w in plan.workers.values() if isinstance(w.config, StackDeployment)]
    if not stacks:
        return
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
                f"{loaded.where(at)}: deployments[{i}].manifests{with_params}: {exc}"
            ) from None
        for message, field in reference_problems(stack, objects):
            at = ("deployments", i, *field)
            raise CampaignError(f"{loaded.where(at)}: deployments[{i}]: {message}{with_params}")
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
                f"{loaded.where(at)}: stacks {a} and {b} both create {', '.join(shared[:3])}"
                " and may run at the same time — put {{ deployment.name }} in the objects'"
                " names (and in ready/endpoint), or set execution.strategy: sequential"
            )
