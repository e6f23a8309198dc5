"""What machine a run ran on: recorded in the run summary, compared by ``testbed compare``
(numbers from two different machines are not a regression)."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

#: The fields that must match for two runs to be comparable.
IDENTITY = ("hostname", "cpu_count", "cpu_model", "machine")


def machine_info() -> dict[str, Any]:
    """Hostname, CPU count and model, memory, OS and Python of this machine."""
    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": _memory_gb(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
