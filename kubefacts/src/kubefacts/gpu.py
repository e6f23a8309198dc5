"""NVIDIA's resource names and node labels, and the two spellings of a MIG slice.

A campaign writes a MIG slice as a YAML-friendly key, ``mig_1g_10gb``; NVIDIA's device
plugin (mixed strategy) publishes it as the resource ``nvidia.com/mig-1g.10gb``, and the
emulator's ``--mig 1g.10gb=7`` uses the plugin's profile ``1g.10gb``. GPU feature discovery
labels nodes with the product, count and per-GPU memory (MiB).
"""

from __future__ import annotations

import re

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
#: Memory of one GPU in MiB, as GPU feature discovery labels a node.
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"

#: A campaign's spelling: ``mig_<slices>g_<memory>gb``.
CAMPAIGN_MIG = re.compile(r"^mig_(\d+)g_(\d+)gb$")
#: The device plugin's profile: ``<slices>g.<memory>gb``.
PLUGIN_MIG = re.compile(r"^[1-9]\d*g\.[1-9]\d*gb$")


def mig_profile(campaign_key: str) -> str | None:
    """``mig_1g_10gb`` → ``1g.10gb``; None when the key is not a MIG slice."""
    match = CAMPAIGN_MIG.match(campaign_key)
    return f"{match.group(1)}g.{match.group(2)}gb" if match else None


def mig_resource(profile: str) -> str:
    """The resource name of a plugin profile: ``1g.10gb`` → ``nvidia.com/mig-1g.10gb``."""
    return f"{MIG_PREFIX}{profile}"


def mig_memory_gb(campaign_key: str) -> float:
    """GiB of GPU memory one slice of ``mig_1g_10gb`` has (0.0 when it is not a slice)."""
    match = CAMPAIGN_MIG.match(campaign_key)
    return float(match.group(2)) if match else 0.0
