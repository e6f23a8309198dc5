"""What this process may hold — open files and memory — for the checks that refuse a probe
section asking for more (``probes/load/footprint.py``, ``probes/ab/footprint.py``)."""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_CGROUP_MEMORY = Path("/sys/fs/cgroup/memory.max")


@dataclass(frozen=True)
class Limits:
    """What this process may hold: open files (the hard limit, to which a load test raises
    its soft one) and memory (the least of physical memory, ``ulimit -v`` and the cgroup's
    ``memory.max``), with what set it."""

    open_files: int
    memory_bytes: int
    memory_source: str

    @classmethod
    def here(cls) -> Limits:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        files = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = [(pages, "physical memory")]
        address_space = resource.getrlimit(resource.RLIMIT_AS)[0]
        if address_space != resource.RLIM_INFINITY:
            memory.append((address_space, "ulimit -v"))
        try:
            cgroup = _CGROUP_MEMORY.read_text().strip()
        except OSError:
            cgroup = "max"
        if cgroup.isdigit():
            memory.append((int(cgroup), "cgroup memory.max"))
        least = min(memory)
        return cls(files, least[0], least[1])


@dataclass(frozen=True)
class Excess:
    """A field of a probe's section (dotted, e.g. ``sweep.max_concurrency``) asking for
    more than this machine has, and why, with the fix."""

    field: str
    message: str


def memory_excess(
    parts: Sequence[tuple[str, float, str]], limits: Limits, test: str
) -> Excess | None:
    """``parts`` are (field, bytes it makes the ``test`` hold, what they are); when their sum
    is more than this process may use, the field with the most bytes is named."""
    total = sum(size for _, size, _ in parts)
    if total <= limits.memory_bytes:
        return None
    by_field: dict[str, float] = {}
    for name, size, _ in parts:
        by_field[name] = by_field.get(name, 0.0) + size
    field = max(by_field, key=lambda name: by_field[name])
    size, what = max((size, what) for name, size, what in parts if name == field)
    return Excess(
        field,
        f"this {test} would hold about {bytes_text(total)} in memory ({bytes_text(size)} of"
        f" them {what}), more than the {bytes_text(limits.memory_bytes)} this process may use"
        f" ({limits.memory_source}) — lower it",
    )


def bytes_text(size: float) -> str:
    """``size`` bytes for a message: 512 bytes, 1.5 KiB, … 3.2e+20 TiB."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB" if size < 1e6 else f"{size:.1e} TiB"
