"""How many cases each correctness treatment will run after its skip rules (the "Run Plan"
screen of tgis-tester shows it per configuration), known before anything starts.

A case runs once per protocol it is sent over; it is skipped by its own rules (the
deployment's dtype, shards, server …), when the deployment does not speak the protocol, when
a chat case would go over TGI or TGIS, and when it has no expected answer for the protocol —
the same decisions the probe makes (``probes.correctness.runner.plan_items``; an embeddings
case runs once, over OpenAI: ``embedding_runner.plan_embedding_items``).
"""

from __future__ import annotations

from testbed.config.correctness import CorrectnessProbe
from testbed.config.deployments import AnyDeployment, ExternalDeployment
from testbed.config.loader import LoadedCampaign
from testbed.config.stacks import StackDeployment
from testbed.plan.model import Plan
from testbed.probes.correctness.cases import CaseFile, load_case_files
from testbed.probes.correctness.embedding_runner import plan_embedding_items
from testbed.probes.correctness.runner import plan_items
from testbed.servers.adapters import adapter_for


def served(config: AnyDeployment) -> tuple[str, ...]:
    """The protocols a deployment will serve, as its backend will announce them."""
    if isinstance(config, ExternalDeployment):  # the protocol it was given
        return (config.protocol,)
    if isinstance(config, StackDeployment):  # what its endpoint declares
        return config.endpoint.protocols
    return adapter_for(config.server).served_protocols(config.params)


def case_counts(loaded: LoadedCampaign, plan: Plan) -> dict[str, tuple[int, int]]:
    """Treatment id → (case runs after skips, case runs in all) for correctness treatments."""
    files: dict[tuple[str, ...], list[CaseFile]] = {}
    counts = {}
    for treatment in plan.treatments:
        config = plan.probe_configs[treatment.probe_key]
        if not isinstance(config, CorrectnessProbe) or not treatment.workers:
            continue
        names = tuple(config.cases)
        if names not in files:
            files[names] = load_case_files([loaded.base_dir / name for name in names])
        worker = plan.workers[treatment.workers[0]]
        offered = served(worker.config)
        items, skipped = plan_items(files[names], config, worker.document, offered)
        vectors, unrun = plan_embedding_items(files[names], worker.document, offered)
        runs = len(items) + len(vectors)
        counts[treatment.id] = (runs, runs + len(skipped) + len(unrun))
    return counts
