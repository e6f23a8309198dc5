"""A server's launch is resolved once per worker and handed down (issue 34).

The adapter of a deployment's kind is looked up once for a worker's whole provisioning
(manifests, readiness, port-forwards, endpoint), and once per worker when a run's objects
are planned (``testbed plan --manifests``, the exported Role); the launch cannot be changed
by what reads it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.kubernetes import manifests
from testbed.backends.kubernetes.backend import KubernetesBackend
from testbed.backends.kubernetes.launch import server_launch
from testbed.backends.kubernetes.probe_job import service_url
from testbed.config.backend_settings import KubernetesSettings
from testbed.config.deployments import ServerDeployment
from testbed.config.loader import load_campaign_text
from testbed.execution.single import resolved_deployment
from testbed.servers import adapters
from testbed.servers.adapters.sim import SimAdapter
from testbed.servers.adapters.tgis import TgisAdapter
from tests.backends.kubernetes.test_e2e import SIM_CAMPAIGN
from tests.servers.test_adapters import deployment

TGIS_PARAMS = {"deployment_framework": "hf_transformers"}


class Lookups:
    """Counts adapter lookups: ``adapter_for`` makes one adapter per call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        lookups = self

        class CountedSim(SimAdapter):
            def __init__(self) -> None:
                lookups.count += 1

        class CountedTgis(TgisAdapter):
            def __init__(self) -> None:
                lookups.count += 1

        monkeypatch.setitem(adapters._ADAPTERS, "sim", CountedSim)
        monkeypatch.setitem(adapters._ADAPTERS, "tgis", CountedTgis)


def test_planning_a_run_looks_each_workers_adapter_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = KubernetesSettings(kind="kubernetes", hf_token="${env:HF}")
    workers = {
        "a": deployment("sim"),
        "b": deployment("tgis", model="google/flan-t5-small", params=TGIS_PARAMS),
        "c": deployment("sim"),
    }
    lookups = Lookups(monkeypatch)
    objects = manifests.run_objects("r1", "ns", True, workers, settings, lambda ref: "x")
    assert lookups.count == 3
    kinds = [o["kind"] for o in objects]
    assert kinds == ["Namespace", "Secret", *["Deployment", "Service"] * 3]


def test_the_launch_is_read_only_and_each_manifest_gets_its_own_copy() -> None:
    settings = KubernetesSettings(kind="kubernetes", hf_token="${env:HF}")
    launch = server_launch(
        deployment("tgis", model="google/flan-t5-small", params=TGIS_PARAMS), settings
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.image = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        launch.container["image"] = "other"  # type: ignore[index]
    with pytest.raises(AttributeError):
        launch.container["env"].append({"name": "X", "value": "1"})
    first = manifests.worker("r1", "w", launch, "ns")
    first[0]["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "X"})
    first[1]["spec"]["ports"].clear()
    again = manifests.worker("r1", "w", launch, "ns")
    env = again[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "X"} not in env
    assert {e["name"] for e in env} >= {"HF_TOKEN", "NUM_GPUS"}  # the model's and the kind's
    assert [p["name"] for p in again[1]["spec"]["ports"]] == ["http", "grpc"]
    assert (launch.http_port, launch.grpc_port) == (3000, 8033)


def test_a_probe_jobs_service_url_uses_the_launchs_http_port_name() -> None:
    settings = KubernetesSettings(kind="kubernetes")
    tgis = deployment("tgis", model="google/flan-t5-small", params=TGIS_PARAMS)
    assert server_launch(tgis, settings).http_port_name() == "http"
    assert service_url("t", tgis, settings).endswith("$(TB_T_SERVICE_PORT_HTTP)")


@pytest.mark.kubernetes
async def test_provisioning_a_worker_looks_its_adapter_up_once(
    tmp_path: Path, cluster_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster_kubeconfig))
    campaign: dict[str, Any] = {**SIM_CAMPAIGN, "name": "launch-once"}
    worker_id, config = resolved_deployment(
        load_campaign_text(json.dumps(campaign), "c.yaml"), "sim"
    )
    assert isinstance(config, ServerDeployment)
    run_dir = tmp_path / "launch-once"
    run_dir.mkdir()
    backend = KubernetesBackend(run_dir, KubernetesSettings.model_validate(SIM_CAMPAIGN["backend"]))
    try:
        await backend.prepare([config])
        lookups = Lookups(monkeypatch)
        async with backend.provision(worker_id, config, tmp_path / "worker") as handle:
            assert not handle.died.done()
            assert handle.endpoint.model == "sim-model"  # the simulator's served name
            assert handle.endpoint.protocols
            image = handle.info["image"]
        assert lookups.count == 1
        applied = server_launch(config, backend.settings).container["image"]
        assert image == applied
    finally:
        await backend.cleanup_leftovers(run_dir)
