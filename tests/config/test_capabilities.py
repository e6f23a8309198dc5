"""Combinations a backend cannot run are refused by validate, plan and run — exit 2, the
field's line and the fix — before any run directory exists."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.config.deployments import (
    HfParams,
    TgiParams,
    TgisParams,
    VllmParams,
    deployment_model,
)
from testbed.config.server_kinds import KINDS, server_kind
from testbed.config.sim import SimParams
from testbed.core.errors import InputError
from testbed.servers.adapters import adapter_for

EXAMPLES = Path(__file__).parents[2] / "examples"
CAMPAIGN = textwrap.dedent(
    """\
    name: caps
    backend: {backend}
    deployments:
      - name: ok
        server: sim
      - name: bad
        server: {server}
        model: bundled:smollm2-135m{params}
    load:
      concurrency: 1
      requests: 2
    """
)

#: What a deployment of the kind must say to be valid apart from its backend.
PARAMS = {"tgis": "\n    params: {deployment_framework: hf_transformers}"}


@pytest.mark.parametrize("server", ["tgi", "tgis"])
@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_cluster_only_servers_are_refused_on_the_local_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str, command: str
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN.format(backend="local", server=server, params=PARAMS.get(server, "")))
    runs = tmp_path / "runs"
    argv = [command, str(file)] + (["--out", str(runs / "r")] if command == "run" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{file}:7:13: deployments[1].server:" in err
    assert f"server '{server}' cannot run on the local backend" in err
    assert "use backend: kubernetes" in err
    assert "Traceback" not in err
    assert not runs.exists()


def test_real_servers_are_refused_on_the_external_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN.format(backend="external", server="vllm", params=""))
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    # the first deployment that needs a server is named, at its own line
    assert f"{file}:5:13: deployments[0].server:" in err
    assert "use `server: external` with a url" in err


def test_the_local_backend_accepts_exactly_the_kinds_it_can_start() -> None:
    """The capability table's ``local`` (config layer) agrees with the adapters (servers
    layer): each kind it marks local builds a local command line, each other kind has none."""
    defaults = {
        "sim": SimParams(),
        "hf": HfParams(),
        "vllm": VllmParams(),
        "tgi": TgiParams(),
        "tgis": TgisParams(deployment_framework="tgis_native"),
    }
    for kind, params in defaults.items():
        adapter = adapter_for(kind)
        if server_kind(kind).local:
            assert adapter.command(params, Path("/m"), "127.0.0.1", 1)
        else:
            with pytest.raises(NotImplementedError):
                adapter.command(params, Path("/m"), "127.0.0.1", 1)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_what_the_table_declares_a_kind_capable_of_its_adapter_implements(name: str) -> None:
    """Validation refuses by the capability table what a kind cannot do, so the adapters'
    NotImplementedError is never reached: every kind the table runs as a pod has an adapter
    building its container; every kind it marks local, a command line; every local kind that
    can serve TGIS, its gRPC arguments (and its container a gRPC port). The kinds no adapter
    starts (a stack, an external URL) have none."""
    kind = server_kind(name)
    if not kind.pod:
        with pytest.raises(InputError, match="no adapter"):
            adapter_for(name)
        return
    adapter = adapter_for(name)
    assert adapter.protocols == kind.protocols
    tgis: dict[str, object] = {"protocols": ["openai", "tgis"]} if kind.tgis_by == "params" else {}
    if name == "tgis":  # what the config requires of it (PARAMS above)
        tgis["deployment_framework"] = "hf_transformers"
    deployment = deployment_model({"name": "d", "server": name, "model": "m", "params": tgis})
    container = adapter.container(deployment, "/models/m")
    assert container["image"]
    assert container["args"]
    grpc_ports = [p for p in container["ports"] if p["name"] == "grpc"]
    assert bool(grpc_ports) == (kind.tgis_by in ("always", "params"))
    if kind.tgis_by in ("always", "params"):
        assert "tgis" in adapter.served_protocols(deployment.params)
    if not kind.local:
        return
    assert adapter.command(deployment.params, Path("/m"), "127.0.0.1", 1)
    if kind.tgis_by in ("always", "params"):
        assert adapter.grpc_args(8033) == ["--grpc-port", "8033"]


@pytest.mark.parametrize(
    ("extra", "line", "message"),
    [
        ("ab:\n  stable: ok\n  canary: nope\n", "14:11", "ab.canary: 'nope' is not a deployment"),
        ("  deployments: [ok, nope]\n", "12:21", "load.deployments[1]: 'nope' is not a"),
    ],
)
def test_bad_references_point_at_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, line: str, message: str
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN.format(backend="local", server="sim", params="") + extra)
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert f"{file}:{line}: {message}" in err
    assert "known: ok, bad" in err


def test_a_repeated_deployment_name_points_at_the_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(
        CAMPAIGN.format(backend="local", server="sim", params="").replace("name: bad", "name: ok")
    )
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert f"{file}:6:11: deployments[1].name: deployment names must be unique; 'ok'" in err


def test_a_container_image_is_refused_on_the_local_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "c.yaml"
    text = CAMPAIGN.format(backend="local", server="vllm", params="")
    file.write_text(text.replace("    server: sim\n", "    server: sim\n    image: sim:1\n", 1))
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert f"{file}:6:12: deployments[0].image: image is a container image" in err
    assert "remove image, or use backend: kubernetes" in err


def test_cluster_only_choices_are_refused_off_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The backend settings' ``cluster`` capability decides, with the words of the fix: the
    scale probe needs a cluster (at its line) and --image-tag is a Kubernetes option; the
    same campaign with backend: kubernetes validates."""
    scale = str(EXAMPLES / "scale-test.yaml")
    assert main(["validate", scale, "--set", "backend=local"]) == 2
    err = capsys.readouterr().err
    assert ":17:3: scale: scale: needs a cluster — set `backend: kubernetes`" in err
    assert main(["validate", scale]) == 0
    out = tmp_path / "run"
    quickstart = str(EXAMPLES / "quickstart.yaml")
    assert main(["run", quickstart, "--image-tag", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--image/--image-tag/--context are Kubernetes options, but the backend is local" in err
    assert "add --set backend.kind=kubernetes" in err
    assert not out.exists()
