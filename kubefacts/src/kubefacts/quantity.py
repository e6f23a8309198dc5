"""Kubernetes resource quantities: parsed to integers the scheduler can add and compare, and
written the way manifests carry them.

CPU is counted in millicores (``"4"`` → 4000, ``"500m"`` → 500) and every other resource in
its base unit (bytes for memory, devices for ``nvidia.com/gpu``), rounded up the way the API
server canonicalises quantities. Suffixes follow apimachinery's ``resource.Quantity``:
binary (``Ki Mi Gi Ti Pi Ei``), decimal (``n u m k M G T P E``) and exponents (``1e3``).
Written back, whole cores stay plain (``"4"``), fractions become millicores (``"500m"``) and
memory is whole GiB (``"32Gi"``) or else MiB (``"512Mi"``), rounded up.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from kubefacts.errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"


def parse(value: Any) -> Decimal:
    """A quantity (``"500m"``, ``"32G"``, ``"1Gi"``, ``4``) as an exact decimal."""
    if isinstance(value, bool):
        raise InputError(f"{value!r} is not a resource quantity; write e.g. 500m, 4 or 32Gi")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise InputError(f"{value!r} is not a resource quantity; write e.g. 500m, 4 or 32Gi")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:
        raise InputError(f"{value!r} is not a resource quantity") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    raise InputError(f"{value!r} has an unknown unit {suffix!r}; use Ki/Mi/Gi or k/M/G or m")


def amount(resource: str, value: Any) -> int:
    """``value`` of ``resource`` as an integer: millicores for CPU, base units otherwise."""
    quantity = parse(value)
    if resource == CPU:
        quantity *= 1000
    return math.ceil(quantity)


def amounts(resources: Mapping[str, Any] | None) -> dict[str, int]:
    """Every entry of a ``requests``/``allocatable`` mapping as integers (see :func:`amount`)."""
    return {name: amount(name, value) for name, value in (resources or {}).items()}


def cpu_quantity(cores: float) -> str:
    """Cores as a quantity: whole numbers plain (``"4"``), fractions in millicores (``"500m"``)."""
    if float(cores).is_integer():
        return str(int(cores))
    return f"{math.ceil(cores * 1000)}m"


def memory_quantity(gib: float) -> str:
    """GiB as a quantity: ``"32Gi"`` when whole, else MiB rounded up (``"512Mi"``)."""
    mib = math.ceil(gib * 1024)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def format_amount(resource: str, value: int) -> str:
    """An integer of :func:`amount` written back as a quantity (``4000`` cpu → ``"4"``)."""
    if resource == CPU:
        return cpu_quantity(value / 1000)
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        if resource == MEMORY and value and value % _BINARY[suffix] == 0:
            return f"{value // _BINARY[suffix]}{suffix}"
    return str(value)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What a pod occupies on its node, as the scheduler computes it.

    The sum over its containers, raised to the largest single init container (init containers
    run one at a time before the others), plus one pod slot. A limit without a request counts
    as the request, as the API server's defaulting makes it.
    """
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0) + value
    for container in spec.get("initContainers") or []:
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, 0), value)
    for name, value in amounts(spec.get("overhead")).items():
        total[name] = total.get(name, 0) + value
    total[PODS] = total.get(PODS, 0) + 1
    return {name: value for name, value in total.items() if value}


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    limits = amounts(resources.get("limits"))
    requests = amounts(resources.get("requests"))
    return {**limits, **requests}
