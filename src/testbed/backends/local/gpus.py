"""GPUs of this machine for the local backend: which exist, which a run may use, who gets which.

Discovery, first source that answers:

1. ``nvidia-smi -L`` (lines ``GPU 0: NVIDIA A100 … (UUID: GPU-…)``; MIG lines are not
   whole GPUs and are left out);
2. without nvidia-smi, the ids the campaign declares in ``backend.gpus`` (a machine whose
   driver tools are not on PATH, and the test seam), else none.

Then the run is restricted, in this order, to the devices ``CUDA_VISIBLE_DEVICES`` names (by
index or UUID; ``-1`` or empty means none) and to ``backend.gpus``. Ids are nvidia-smi's
indices, and children get ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA counts the same way.

Assignment is static and deterministic, so ``testbed plan`` can show it and the run records
it: each worker asking ``resources.gpu: N`` gets N devices, workers taking turns over the
devices (worker 1 → 0, worker 2 → 1, worker 3 → 0 again on two GPUs). Two workers holding a
common device never run at once (the strategies wait for it, see ``execution.strategy``)
unless ``backend.share_gpus`` allows it. A worker asking more GPUs than the run has can never
start: its treatments are SKIPPED with the numbers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.config.deployments import AnyDeployment, worker_gpus
from testbed.core.errors import InputError

_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?\s*$")
NVIDIA_SMI_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str = ""
    uuid: str = ""


@dataclass(frozen=True)
class Inventory:
    """The GPUs a run may use, and how they were found (for the plan and the run dir)."""

    devices: tuple[Gpu, ...]
    source: str  # "nvidia-smi -L", "backend.gpus (no nvidia-smi)", "none"
    notes: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.devices)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "devices": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in self.devices],
            "notes": list(self.notes),
        }


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Whole GPUs from ``nvidia-smi -L`` output."""
    found = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            found.append(Gpu(int(match.group(1)), match.group(2), match.group(3) or ""))
    return found


def _nvidia_smi(which: Callable[[str], str | None]) -> list[Gpu] | None:
    """The GPUs nvidia-smi lists; None when there is no nvidia-smi (or it fails)."""
    binary = which("nvidia-smi")
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, "-L"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    # "No devices were found" exits non-zero: that is zero GPUs, not an unknown answer.
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else []


def discover(
    declared: Sequence[int] | None,
    environ: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
) -> Inventory:
    """The GPUs this run may use (see the module docstring for the order of sources)."""
    listed = _nvidia_smi(which)
    if listed is not None:
        devices, source = listed, "nvidia-smi -L"
    elif declared is not None:
        devices, source = [Gpu(i) for i in declared], "backend.gpus (no nvidia-smi on PATH)"
    else:
        return Inventory((), "none (no nvidia-smi on PATH, no backend.gpus)")
    notes = []
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = _visible(devices, visible)
        notes.append(f"CUDA_VISIBLE_DEVICES={visible!r} leaves {[g.index for g in devices]}")
    if declared is not None:
        have = {g.index for g in devices}
        missing = [i for i in declared if i not in have]
        if missing:
            raise InputError(
                f"backend.gpus names GPU(s) {missing}, which this machine does not offer"
                f" ({source}: {sorted(have) or 'none'}"
                + (", after CUDA_VISIBLE_DEVICES" if visible is not None else "")
                + ") — list only those, or drop backend.gpus to use every GPU found"
            )
        devices = [g for g in devices if g.index in set(declared)]
    return Inventory(tuple(devices), source, tuple(notes))


def _visible(devices: list[Gpu], value: str) -> list[Gpu]:
    """The devices CUDA_VISIBLE_DEVICES keeps (CUDA stops at the first invalid entry)."""
    kept: list[Gpu] = []
    for item in (v.strip() for v in value.split(",")):
        match = next((g for g in devices if item == str(g.index) or (g.uuid and item == g.uuid)),
                     None)  # fmt: skip
        if match is None:
            break
        kept.append(match)
    return kept


@dataclass
class Assignment:
    """Which devices each worker gets; the reason a worker cannot fit, with the numbers."""

    devices: dict[str, tuple[int, ...]] = field(default_factory=dict)
    unfit: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": {w: list(d) for w, d in self.devices.items()},
            "skipped": dict(self.unfit),
        }


def assign(wanted: Mapping[str, int], inventory: Inventory) -> Assignment:
    """Devices for each worker (in the given order) wanting ``wanted[worker]`` GPUs."""
    out = Assignment()
    ids, turn = inventory.ids, 0
    for worker, count in wanted.items():
        if count <= 0:
            continue
        if count > len(ids):
            have = f"{len(ids)} ({', '.join(map(str, ids))})" if ids else "none"
            out.unfit[worker] = (
                f"needs {count} GPU(s) (resources.gpu), this machine offers {have} by"
                f" {inventory.source} — lower resources.gpu and tensor_parallel, or run on a"
                " cluster"
            )
            continue
        out.devices[worker] = tuple(sorted(ids[(turn + k) % len(ids)] for k in range(count)))
        turn = (turn + count) % len(ids)
    return out


def device_environment(devices: Sequence[int] | None, machine_has_gpus: bool) -> dict[str, str]:
    """What a worker's server is started with: its own devices, or none at all."""
    if devices:
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, devices)),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # nvidia-smi's order, which the ids are in
        }
    # tgis-tester's rule: a CPU-only worker sees no GPU (else CUDA would hand it GPU 0)
    return {"CUDA_VISIBLE_DEVICES": "-1"} if machine_has_gpus else {}


def plan_assignment(
    backend: Mapping[str, Any], workers: Mapping[str, AnyDeployment]
) -> tuple[Inventory, Assignment] | None:
    """What ``testbed plan`` shows for a local run: this machine's GPUs and each worker's;
    None when no worker asks for a GPU and the machine has none."""
    inventory = discover(backend.get("gpus"), os.environ)
    wanted = {w: worker_gpus(c) for w, c in workers.items()}
    if not any(wanted.values()) and not inventory.devices:
        return None
    return inventory, assign(wanted, inventory)
