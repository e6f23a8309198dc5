"""``server: sim`` — the built-in simulator, as a child process or a container.

Its parameters are :class:`testbed.config.sim.SimParams`; every value that differs from the
default becomes ``--set dotted.key=<JSON>`` (JSON is YAML, which ``testbed serve`` parses),
so the command line shows exactly what the campaign changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.config.deployments import ServerDeployment
from testbed.config.sim import SimParams
from testbed.servers.adapters.own import OwnServerAdapter


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def set_args(params: SimParams) -> list[str]:
    """``--set key=value`` for every parameter that differs from the simulator's default."""
    chosen = _flatten(params.model_dump(mode="json"))
    defaults = _flatten(SimParams().model_dump(mode="json"))
    out: list[str] = []
    for key, value in chosen.items():
        if defaults.get(key) != value:
            out += ["--set", f"{key}={json.dumps(value)}"]
    return out


class SimAdapter(OwnServerAdapter[SimParams]):
    kind = "sim"

    def args(self, params: SimParams, model: str, port: int, served_name: str) -> list[str]:
        del model, served_name  # the simulator's name is its model_name parameter
        return ["serve", "sim", "--port", str(port), *set_args(params)]

    def command(
        self, params: SimParams, model_path: Path | None, host: str, port: int
    ) -> list[str]:
        del model_path
        return self.local_command(self.args(params, "", port, ""), host)

    def served_model_name(self, deployment: ServerDeployment) -> str:
        assert isinstance(deployment.params, SimParams)  # the kind's own params
        return deployment.params.model_name
