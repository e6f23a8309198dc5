"""The backend seam: what the execution pipeline asks of every backend.

A backend provisions one worker at a time as an async context manager: entering gives a
:class:`Handle` with the endpoint; leaving releases everything, also on error, Ctrl-C or
SIGTERM. ``Handle.died`` completes when the server dies, so the pipeline can tell an
infrastructure ERROR from a product FAIL.

Execution asks :meth:`Backend.open_worker`, which answers a deployment no backend
provisions (``server: external``, a URL that already serves) itself, once for every
backend; only the others reach the backend's :meth:`Backend.provision`. Likewise execution
hands ``prepare`` and ``infeasible`` only provisioned deployments.

Each treatment's probe goes through :meth:`Backend.run_probe`: every backend runs it here,
in this process, except where the backend's settings send probes elsewhere (the Kubernetes
backend's ``probes: cluster`` runs a Job per treatment next to the servers).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from testbed.clients.endpoint import Endpoint, Tls
from testbed.config.backend_settings import BackendSettings
from testbed.config.deployments import AnyDeployment, ExternalDeployment
from testbed.config.loader import LoadedCampaign
from testbed.config.stacks import StackDeployment
from testbed.plan.model import Plan, Treatment
from testbed.results.files import RecordWriter
from testbed.results.outcome import ProbeOutcome


@dataclass
class Handle:
    """A provisioned worker."""

    endpoint: Endpoint
    #: Set with the reason (and log tail) when the server dies while provisioned.
    died: asyncio.Future[str] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    info: dict[str, Any] = field(default_factory=dict)  # server version, flags, pid …


@dataclass(frozen=True)
class ShippedCampaign:
    """What a probe run off this machine is given of the campaign: the resolved campaign and
    the files its treatments read (ConfigMap data, key → text) and where each key goes
    under the probe's campaign folder (``{"key": …, "path": …}``)."""

    data: Mapping[str, str]
    items: Sequence[Mapping[str, str]]
    #: The ``${env:NAME}`` names its probes resolve (header secrets): values, never the
    #: campaign's, the backend hands the probe from this process's environment.
    env: Sequence[str] = ()


@dataclass
class ProbeRun:
    """One attempt of a treatment's probe, as execution hands it to :meth:`Backend.run_probe`:
    where its records and files go, and what a probe run elsewhere needs to be started."""

    treatment: Treatment
    attempt: int
    handles: Mapping[str, Handle]  # the treatment's workers, by worker id
    workers: Mapping[str, AnyDeployment]  # worker id → resolved deployment
    out_dir: Path  # the treatment directory: the probe's files go here
    records: RecordWriter  # records.jsonl of the treatment, written as records arrive
    progress: Callable[[str], None]  # one-line status for the live display
    #: Given when the campaign's settings send probes elsewhere (``remote_probes``).
    campaign: ShippedCampaign | None = None


class Backend(abc.ABC):
    """Provisions workers. One instance serves one run."""

    name: str = ""
    #: Whether :meth:`cleanup_leftovers` ends this machine's process groups recorded in the
    #: run directory (``pids/``). Any run leaves such groups — its steps run here — so
    #: ``testbed cleanup`` ends them itself after a backend that does not.
    ends_local_processes: ClassVar[bool] = False
    #: Whether this backend is a run's in-cluster worker (a probe Job, ``testbed worker
    #: --endpoint``): the servers are given, and the run's controller runs the steps, the
    #: captures and ships the probe — this process runs no steps, captures nothing and runs
    #: its probe itself. Nothing of it needs checking before the run (:meth:`preflight`).
    probe_job: ClassVar[bool] = False
    #: The campaign file's folder: relative paths of deployments (``tls.ca_bundle``) start here.
    base_dir: Path = Path()

    @classmethod
    def for_run(
        cls, run_dir: Path, config: BackendSettings, base_dir: Path, keep: bool = False
    ) -> Backend:
        """The backend of one run: its directory, the campaign's ``backend:`` section, the
        campaign file's folder, and ``execution.keep`` (workers stay after the run)."""
        del run_dir, config, keep
        backend = cls()
        backend.base_dir = base_dir
        return backend

    @classmethod
    def preflight(cls, config: BackendSettings, deployments: Sequence[AnyDeployment]) -> None:
        """What must be usable before a run directory exists (InputError, exit 2): reads
        files and variables, sends nothing. ``deployments`` are the provisioned ones."""
        del config, deployments

    @classmethod
    def check_campaign(cls, loaded: LoadedCampaign, plan: Plan) -> None:
        """What only this backend can check of a campaign before anything starts
        (CampaignError, exit 2, at the line): renders and reads files, sends nothing."""
        del loaded, plan

    @classmethod
    def runner_rbac(
        cls, loaded: LoadedCampaign, namespace: str, account: str
    ) -> list[dict[str, Any]]:
        """The rights an exported pipeline's ``testbed worker`` (service account ``account``
        in ``namespace``) needs for this backend's part of the campaign; none here."""
        del loaded, namespace, account
        return []

    @classmethod
    def runner_admin(cls, loaded: LoadedCampaign, namespace: str) -> list[dict[str, Any]]:
        """The cluster-scoped objects a cluster admin applies before an exported pipeline
        runs in ``namespace`` (a stack's CRDs); the runner is never granted them."""
        del loaded, namespace
        return []

    def open_worker(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AbstractAsyncContextManager[Handle]:
        """The worker's handle: an external deployment's URL as it is, else :meth:`provision`."""
        if isinstance(deployment, ExternalDeployment):
            return _given(external_endpoint(deployment, self.base_dir))
        return self.provision(worker_id, deployment, work_dir)

    async def cleanup_leftovers(self, run_dir: Path) -> list[str]:
        """End what an earlier interrupted run in ``run_dir`` left behind; say what."""
        del run_dir
        return []

    def remains(self, run_dir: Path) -> list[str]:
        """What of the run in ``run_dir`` this backend may have left, when its cleanup was
        cut short (one item each, for the user; this machine's recorded process groups are
        named by the caller)."""
        del run_dir
        return []

    async def prepare(self, deployments: Sequence[AnyDeployment]) -> list[str]:
        """Prepare models (and images) before any worker starts; say what was done."""
        del deployments
        return []

    def worker_cost(self, config: AnyDeployment) -> float:
        """Cores of THIS machine a worker's server takes (the run's CPU budget counts them)."""
        return 0.0 if isinstance(config, StackDeployment) else config.resources.cpu

    async def infeasible(
        self, workers: Mapping[str, AnyDeployment]
    ) -> tuple[dict[str, str], list[str]]:
        """Workers that can never start where this backend runs them (worker id → reason
        with the numbers), and notes on the check itself. Their treatments are skipped."""
        del workers
        return {}, []

    def exclusive(
        self, wait: bool, say: Callable[[str], None]
    ) -> AbstractAsyncContextManager[None]:
        """Held for the whole run: on a shared cluster, its turn (``backend.lease``)."""
        del wait, say
        return contextlib.nullcontext()

    def step_env(self) -> dict[str, str]:
        """Variables the user's steps get from this backend (a cluster's KUBECONFIG and
        namespace); the run's own (ARTIFACT_DIR …) are added by the step runner."""
        return {}

    async def capture_state(
        self, folder: Path, workers: Collection[str] | None = None, namespaces: Sequence[str] = ()
    ) -> list[str]:
        """Dump what this backend runs for the run (only ``workers``' part when given; on a
        cluster also the whole ``namespaces``) into ``folder``, as its native tools would
        show it; return notes on what was captured."""
        del folder, workers, namespaces
        return [f"the {self.name} backend runs nothing to capture"]

    def worker_devices(self, worker_id: str) -> frozenset[int]:
        """Devices (GPU ids) the worker holds alone while it runs: the strategies never run
        two worker sets holding a common device at once. Empty by default."""
        del worker_id
        return frozenset()

    def conflict(self, worker_ids: tuple[str, ...]) -> str:
        """Why workers that must run at once (an A/B pair) cannot (shared devices); "" if
        they can."""
        del worker_ids
        return ""

    async def run_probe(
        self, run: ProbeRun, here: Callable[[], Awaitable[ProbeOutcome]]
    ) -> ProbeOutcome:
        """Run the treatment's probe: ``here`` runs it in this process, which every backend
        does unless its settings send probes elsewhere; such a backend writes the records
        and files the probe sends back through ``run`` as they arrive."""
        del run
        return await here()

    @abc.abstractmethod
    def provision(
        self, worker_id: str, deployment: AnyDeployment, work_dir: Path
    ) -> AbstractAsyncContextManager[Handle]:
        """Start the worker's server; yield its handle once ready; release on exit."""


@contextlib.asynccontextmanager
async def _given(endpoint: Endpoint) -> AsyncIterator[Handle]:
    yield Handle(endpoint)


def external_endpoint(deployment: ExternalDeployment, base_dir: Path) -> Endpoint:
    """The endpoint of an ``external`` deployment; its api_key stays a ``${env:…}`` reference."""
    bundle = deployment.tls.ca_bundle
    return Endpoint(
        base_url=deployment.url.rstrip("/"),
        protocols=(deployment.protocol,),
        model=deployment.model,
        server_kind="external",
        tokenizer=deployment.tokenizer,
        api_key=deployment.api_key,
        grpc_target=deployment.grpc,
        tls=Tls(verify=deployment.tls.verify, ca_bundle=str(base_dir / bundle) if bundle else None),
    )
