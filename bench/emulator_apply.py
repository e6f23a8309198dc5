"""How fast the emulator's storage takes server-side applies (no HTTP: the merge, the
managedFields bookkeeping and the conflict check are what is measured).

Applies N Deployments (one container, an env list, a label selector) as manager ``bench``
(creates), applies them again with another image (changes), a third time unchanged
(no-ops: nothing written), then as manager ``other`` with yet another image (every one a
409 conflict). Prints applies per second for each.

    .venv/bin/python bench/emulator_apply.py [--n 2000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kubemu.storage.errors import ApiError
from kubemu.storage.store import Store


def deployment(i: int, image: str) -> dict[str, Any]:
    labels = {"app": f"d{i}"}
    container = {"name": "c", "image": image, "env": [{"name": "A", "value": "1"}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"d{i}", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    store = Store()
    rounds = (
        ("create", "bench", "img:1"),
        ("change", "bench", "img:2"),
        ("no-op", "bench", "img:2"),
        ("conflict", "other", "img:3"),
    )
    for label, manager, image in rounds:
        refused = 0
        start = time.perf_counter()
        for i in range(n):
            try:
                store.apply(
                    "deployments.apps", "default", f"d{i}", deployment(i, image), manager, False
                )
            except ApiError:
                refused += 1
        rate = n / (time.perf_counter() - start)
        print(f"apply {label:<9} {rate:>9,.0f} /s   ({refused} refused with 409)")


if __name__ == "__main__":
    main()
