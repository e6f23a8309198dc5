"""``testbed cluster emulate``: flags refused with exit 2, the kubeconfig it writes,
a clean exit on SIGTERM (the ``emulated_cluster`` helper asserts exit code 0)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from testbed.cli import main
from tests.fixtures.cluster import emulated_cluster

pytestmark = pytest.mark.kubernetes


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mig", "1g10gb=7"], "--mig: Value error, MIG profile '1g10gb' is not like 1g.10gb"),
        (["--mig", "1g.10gb"], "--mig '1g.10gb': write it as PROFILE=COUNT"),
        (["--nodes", "-1"], "--nodes: Input should be greater than or equal to 0"),
        (["--gpus-per-node", "65"], "--gpus-per-node: Input should be less than or equal to 64"),
        (["--port", "70000"], "argument --port: '70000' is not a port (0-65535"),
    ],
)
def test_bad_flags_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    try:
        code = main(["cluster", "emulate", "--kubeconfig", str(tmp_path / "k"), *flags])
    except SystemExit as exc:  # argparse's own refusal of a flag's type: exit 2 too
        code = int(exc.code or 0)
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "k").exists()


def test_kubeconfig_and_node_shape(tmp_path: Path) -> None:
    flags = ("--nodes", "3", "--gpus-per-node", "0", "--node-cpu", "4", "--node-memory-gb", "16")
    with emulated_cluster(tmp_path, *flags) as kubeconfig:
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        written = yaml.safe_load(kubeconfig.read_text())
        assert written["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        assert written["users"][0]["user"]["token"]
        api = config.new_client_from_config(config_file=str(kubeconfig))
        try:
            nodes = client.CoreV1Api(api).list_node().items
        finally:
            api.close()
        assert [n.metadata.name for n in nodes] == ["emu-node-0", "emu-node-1", "emu-node-2"]
        capacity = nodes[0].status.capacity
        assert (capacity["cpu"], capacity["memory"], capacity["pods"]) == ("4", "16Gi", "110")
        assert "nvidia.com/gpu" not in capacity


def test_a_port_in_use_is_an_infrastructure_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(
            ["cluster", "emulate", "--port", str(port), "--kubeconfig", str(tmp_path / "k")]
        )
    assert code == 3
    assert f"cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err
    assert not (tmp_path / "k").exists()
