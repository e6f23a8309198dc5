"""GPUs on the local backend, on a machine without any: a fake ``nvidia-smi`` on PATH lists
two, or a :class:`Listed` probe (the injectable seam) says which the machine has; ids the
campaign declares are never trusted without the devices. Each worker gets its own devices through
``CUDA_VISIBLE_DEVICES`` (read back from the running server's /proc environ), a worker
asking more than there are is SKIPPED with the numbers, ``plan`` shows the assignment, the
run directory records it, and two worker sets holding one GPU never run at once."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.backends.local import LocalBackend
from testbed.backends.local.gpus import (
    Found,
    Gpu,
    Listed,
    assign,
    discover,
    parse_nvidia_smi,
    probe_machine,
)
from testbed.config.backend_settings import LocalSettings
from testbed.config.deployments import AnyDeployment, deployment_model
from testbed.core.errors import InputError, ServerStartError
from testbed.execution.strategy import Budget

EXAMPLES = Path(__file__).parents[3] / "examples"
LISTING = """GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaa-0000)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-bbbb-1111)
  MIG 1g.10gb     Device  0: (UUID: MIG-cccc-2222)
"""


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``nvidia-smi`` on PATH that lists two A100s (one with a MIG slice) for ``-L``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 9\ncat <<'EOF'\n{LISTING}EOF\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return script


def test_nvidia_smi_lines_give_whole_gpus_only() -> None:
    assert parse_nvidia_smi(LISTING) == [
        Gpu(0, "NVIDIA A100-SXM4-80GB", "GPU-aaaa-0000"),
        Gpu(1, "NVIDIA A100-SXM4-80GB", "GPU-bbbb-1111"),
    ]


def test_discovery_sources_and_restrictions(fake_smi: Path) -> None:
    found = discover(None, {})
    assert (found.ids, found.source) == ((0, 1), "nvidia-smi -L")
    assert discover(None, {"CUDA_VISIBLE_DEVICES": "1"}).ids == (1,)
    assert discover(None, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1111,0"}).ids == (1, 0)
    assert discover(None, {"CUDA_VISIBLE_DEVICES": "-1"}).ids == ()
    assert discover([1], {}).ids == (1,)
    with pytest.raises(InputError, match=r"names GPU\(s\) \[3\].*\(nvidia-smi -L lists 0, 1\)"):
        discover([1, 3], {})
    with pytest.raises(InputError, match="CUDA_VISIBLE_DEVICES leaves 1"):
        discover([0], {"CUDA_VISIBLE_DEVICES": "1"})


def nothing_here(dev: Path) -> Callable[[], Found]:
    """This machine as it is (no nvidia-smi, no device files), whatever runs the tests."""
    return functools.partial(probe_machine, which=lambda _name: None, dev=dev)


def test_declared_ids_are_never_trusted_without_the_devices(tmp_path: Path) -> None:
    """No pretend GPUs: without nvidia-smi and device files, backend.gpus names nothing
    this machine has — refused, saying what was looked for and found."""
    with pytest.raises(InputError) as refused:
        discover([0, 1], {}, nothing_here(tmp_path))
    message = str(refused.value)
    assert message.startswith("backend.gpus names GPU(s) [0, 1], which this machine does not")
    assert f"looked for nvidia-smi on PATH and device files {tmp_path}/nvidia<N>" in message
    assert "found neither" in message
    assert "drop backend.gpus" in message
    none = discover(None, {}, nothing_here(tmp_path))
    assert none.ids == ()
    assert none.source.startswith("none (no nvidia-smi on PATH")


def test_without_nvidia_smi_the_device_files_are_the_gpus(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps", "null"):
        (tmp_path / name).touch()
    found = discover(None, {}, nothing_here(tmp_path))
    assert found.ids == (0, 1)
    assert found.source == f"{tmp_path}/nvidia<N> (no nvidia-smi)"
    assert discover([1], {}, nothing_here(tmp_path)).ids == (1,)
    with pytest.raises(InputError, match=rf"\[2\].*device files {tmp_path}/nvidia0"):
        discover([1, 2], {}, nothing_here(tmp_path))


def test_a_listed_machine_is_the_seam_for_gpus_this_one_lacks() -> None:
    inventory = discover([0, 1], {"CUDA_VISIBLE_DEVICES": "1,0,2"}, Listed((0, 1, 2)))
    assert (inventory.ids, inventory.source) == ((1, 0), "listed")
    with pytest.raises(InputError, match=r"\[2\].*listed: 0, 1, 2; CUDA_VISIBLE_DEVICES leaves 1"):
        discover([1, 2], {"CUDA_VISIBLE_DEVICES": "1"}, Listed((0, 1, 2)))


def test_assignment_takes_turns_and_skips_with_the_numbers(fake_smi: Path) -> None:
    inventory = discover(None, {})
    got = assign({"a": 1, "cpu": 0, "b": 1, "c": 1, "pair": 2, "big": 4}, inventory)
    assert got.devices == {"a": (0,), "b": (1,), "c": (0,), "pair": (0, 1)}
    assert got.unfit == {
        "big": "needs 4 GPU(s) (resources.gpu), this machine offers 2 (0, 1) by nvidia-smi -L"
        " — lower resources.gpu and tensor_parallel, or run on a cluster"
    }


def raw_sim(name: str, gpu: int) -> dict[str, Any]:
    return {"name": name, "server": "sim", "model": "sim-model",
            "params": {"seed": 0, "max_model_len": 256},
            "resources": {"cpu": 0.5, "gpu": gpu}, "startup_timeout_s": 20.0}  # fmt: skip


def sim(name: str, gpu: int) -> AnyDeployment:
    return deployment_model(raw_sim(name, gpu))


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


async def test_each_server_sees_its_own_devices(tmp_path: Path, fake_smi: Path) -> None:
    backend = LocalBackend(tmp_path, config=LocalSettings(gpus=None))
    workers = {"a": sim("a", 1), "b": sim("b", 2), "cpu": sim("cpu", 0), "big": sim("big", 3)}
    unfit, notes = await backend.infeasible(workers)
    assert list(unfit) == ["big"]
    assert "GPUs by nvidia-smi -L: 0, 1" in notes
    seen = {}
    for name in ("a", "b", "cpu"):
        async with backend.provision(name, workers[name], tmp_path / name) as handle:
            seen[name] = environ_of(handle.info["pid"])
            assert handle.info.get("gpus", []) == sorted(backend.worker_devices(name))
    assert seen["a"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert seen["b"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert seen["a"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert seen["cpu"]["CUDA_VISIBLE_DEVICES"] == "-1"  # a CPU-only worker sees no GPU
    recorded = json.loads((tmp_path / "gpus.json").read_text())
    assert recorded["workers"] == {"a": [0], "b": [0, 1]}
    assert "needs 3 GPU(s)" in recorded["skipped"]["big"]
    assert backend.conflict(("a", "b")).startswith("a and b must run at once but both")
    shared = LocalBackend(tmp_path, config=LocalSettings(share_gpus=True))
    await shared.infeasible(workers)
    assert shared.conflict(("a", "b")) == ""
    assert shared.worker_devices("a") == frozenset()


async def test_a_lone_server_asking_too_many_gpus_does_not_start(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path, config=LocalSettings(gpus=[0]), gpu_probe=Listed((0, 1)))
    with pytest.raises(ServerStartError, match=r"needs 2 GPU\(s\).*offers 1 \(0\)"):
        async with backend.provision("w", sim("w", 2), tmp_path / "w"):
            pass


async def test_worker_sets_sharing_a_device_take_turns() -> None:
    budget = Budget(slots=3, cpus=8)
    order: list[str] = []

    async def hold(name: str, devices: frozenset[int]) -> None:
        taken = await budget.acquire(1, devices)
        order.append(f"+{name}")
        await asyncio.sleep(0)  # let the others try while this one holds its devices
        await asyncio.sleep(0)
        order.append(f"-{name}")
        await budget.release(taken, devices)

    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(hold("a", frozenset({0})))
        tasks.create_task(hold("b", frozenset({1})))
        tasks.create_task(hold("c", frozenset({0})))
    assert order.index("+c") > order.index("-a")  # c waited for GPU 0
    assert order.index("+b") < order.index("-a")  # b, on GPU 1, ran beside a


def campaign(tmp_path: Path) -> Path:
    data = {
        "name": "gpus",
        "backend": {"kind": "local"},
        "deployments": [raw_sim("one", 1), raw_sim("two", 1), raw_sim("four", 4)],
        "correctness": {"cases": [str(EXAMPLES / "cases" / "sim.yaml")]},
        "execution": {"strategy": "parallel"},
    }  # fmt: skip
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testbed", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_plan_shows_and_run_records_the_assignment(tmp_path: Path, fake_smi: Path) -> None:
    path = campaign(tmp_path)
    shown = cli("plan", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "GPUs (nvidia-smi -L: 0, 1)" in shown.stdout
    assert "needs 4 GPU(s)" in shown.stdout
    as_json = json.loads(cli("plan", str(path), "--json", cwd=tmp_path).stdout)
    assert list(as_json["gpus"]["workers"].values()) == [[0], [1]]
    done = cli("run", str(path), "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = json.loads((tmp_path / "run" / "gpus.json").read_text())
    assert sorted(recorded["workers"].values()) == [[0], [1]]
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "run").glob("*/summary.json")]
    statuses = {s["dir"].split("__")[1]: s["verdict"] for s in summaries}
    assert {k: v["status"] for k, v in statuses.items()} == {
        "one-correctness": "PASS", "two-correctness": "PASS", "four-correctness": "SKIPPED"
    }  # fmt: skip
    assert "needs 4 GPU(s)" in statuses["four-correctness"]["reason"]
    gpus_of = {s["dir"]: [w.get("gpus") for w in s.get("workers", [])] for s in summaries}
    assert sorted(g for gs in gpus_of.values() for g in gs if g) == [[0], [1]]


def test_a_run_asking_for_gpus_the_machine_lacks_is_refused_before_its_run_dir(
    tmp_path: Path, fake_smi: Path
) -> None:
    data = yaml.safe_load(campaign(tmp_path).read_text())
    data["backend"]["gpus"] = [0, 5]
    path = tmp_path / "missing.yaml"
    path.write_text(yaml.safe_dump(data))
    done = cli("run", str(path), "--out", str(tmp_path / "never"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "backend.gpus names GPU(s) [5]" in done.stderr
    assert not (tmp_path / "never").exists()
