"""GPUs of this machine for the local backend: which exist, which a run may use, who gets which.

Discovery asks the machine, never the campaign — a GPU that is not there is never handed
out (a server given "GPU 0" on a machine without one would run on the CPU and PASS as if):

1. ``nvidia-smi -L`` (lines ``GPU 0: NVIDIA A100 … (UUID: GPU-…)``; MIG lines are not
   whole GPUs and are left out);
2. without a working nvidia-smi, the driver's device files ``/dev/nvidia<N>`` (a container
   given GPUs without the driver tools; ``nvidiactl``, ``nvidia-uvm`` are not GPUs);
3. else none.

The probe is injectable (:data:`DeviceProbe`; :class:`Listed` is a machine with the GPUs
it is given, for tests and dry runs). Then the run is restricted, in this order, to the
devices ``CUDA_VISIBLE_DEVICES`` names (by index or UUID; ``-1`` or empty means none) and to
``backend.gpus``; an id ``backend.gpus`` names that is not found is refused (exit 2), saying
what was looked for and what was found. Ids are nvidia-smi's indices, and children get
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA counts the same way.

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
from pathlib import Path
from typing import Any

from testbed.config.backend_settings import LocalSettings
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
    source: str  # "nvidia-smi -L", "/dev/nvidia<N> (no nvidia-smi)", "none (…)"
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


@dataclass(frozen=True)
class Found:
    """What a look at the machine found: its GPUs, the source that listed them, and what
    was looked at (for messages)."""

    devices: tuple[Gpu, ...]
    source: str  # "nvidia-smi -L", "/dev/nvidia<N> (no nvidia-smi)", or "none (…)"
    looked: str  # e.g. "nvidia-smi -L lists 0, 1"


#: How the machine's GPUs are found (:func:`probe_machine`; a test passes :class:`Listed`).
DeviceProbe = Callable[[], Found]

_DEVICE_FILE = re.compile(r"^nvidia(\d+)$")


def device_files(dev: Path) -> list[Gpu]:
    """The GPUs whose device files (``nvidia0``, ``nvidia1`` …) are in ``dev``."""
    try:
        names = [entry.name for entry in dev.iterdir()]
    except OSError:
        return []
    ids = sorted(int(m.group(1)) for m in map(_DEVICE_FILE.match, names) if m)
    return [Gpu(i) for i in ids]


def probe_machine(
    which: Callable[[str], str | None] = shutil.which, dev: Path = Path("/dev")
) -> Found:
    """This machine's GPUs, by the first source that answers (see the module docstring)."""
    listed = _nvidia_smi(which)
    if listed is not None:
        shown = ", ".join(str(g.index) for g in listed) or "none"
        return Found(tuple(listed), "nvidia-smi -L", f"nvidia-smi -L lists {shown}")
    files = device_files(dev)
    if files:
        shown = ", ".join(f"{dev}/nvidia{g.index}" for g in files)
        return Found(tuple(files), f"{dev}/nvidia<N> (no nvidia-smi)", f"device files {shown}")
    return Found(
        (),
        f"none (no nvidia-smi on PATH, no {dev}/nvidia<N>)",
        f"looked for nvidia-smi on PATH and device files {dev}/nvidia<N>: found neither",
    )


@dataclass(frozen=True)
class Listed:
    """A :data:`DeviceProbe` for a machine that has exactly ``ids`` (tests, dry runs)."""

    ids: tuple[int, ...]
    source: str = "listed"

    def __call__(self) -> Found:
        shown = ", ".join(map(str, self.ids)) or "none"
        return Found(tuple(Gpu(i) for i in self.ids), self.source, f"{self.source}: {shown}")


def discover(
    declared: Sequence[int] | None,
    environ: Mapping[str, str],
    probe: DeviceProbe | None = None,
) -> Inventory:
    """The GPUs this run may use (see the module docstring for the order of sources);
    ``probe`` defaults to :func:`probe_machine` (looked up when called, so a test can
    replace it for a whole command)."""
    found = (probe or probe_machine)()
    devices, notes = list(found.devices), []
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and devices:
        devices = _visible(devices, visible)
        notes.append(f"CUDA_VISIBLE_DEVICES={visible!r} leaves {[g.index for g in devices]}")
    if declared is not None:
        have = {g.index for g in devices}
        missing = [i for i in declared if i not in have]
        if missing:
            after = "; CUDA_VISIBLE_DEVICES leaves " + (", ".join(map(str, sorted(have))) or "none")
            raise InputError(
                f"backend.gpus names GPU(s) {missing}, which this machine does not offer"
                f" ({found.looked}{after if notes else ''}) — list only those it has, or drop"
                " backend.gpus to use every GPU found"
                + ("" if found.devices else ", or run where the GPUs are (backend: kubernetes)")
            )
        devices = [g for g in devices if g.index in set(declared)]
    return Inventory(tuple(devices), found.source, tuple(notes))


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
    backend: LocalSettings, workers: Mapping[str, AnyDeployment], probe: DeviceProbe | None = None
) -> tuple[Inventory, Assignment] | None:
    """What ``testbed plan`` shows for a local run: this machine's GPUs and each worker's;
    None when no worker asks for a GPU and the machine has none."""
    inventory = discover(backend.gpus, os.environ, probe)
    wanted = {w: worker_gpus(c) for w, c in workers.items()}
    if not any(wanted.values()) and not inventory.devices:
        return None
    return inventory, assign(wanted, inventory)
