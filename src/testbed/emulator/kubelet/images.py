"""Which images the process-kubelet can run, and the host command line for a container of one.

Two kinds of image are *known* and run as local processes:

- testbed's own image (name matching ``testbed_pattern``): ``testbed …`` runs as
  ``sys.executable -m testbed …`` of the emulator's own interpreter, ``python …`` with that
  interpreter, anything else as written;
- a vLLM image (name matching ``vllm_pattern``): the image's entry point
  ``python3 -m vllm.entrypoints.openai.api_server`` runs with the vLLM venv's interpreter
  (``$TESTBED_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` of this checkout or of the current
  directory), followed by the container's args.

With ``tgi_stand_in`` (``--tgi-stand-in``), a TGI or TGIS image (name matching
``tgi_pattern``) is a third kind: testbed's reference server plays it (``kubelet.stand_in``).
With ``sim_stand_in`` (``--gateway-stand-in``, ``--vllm-stand-in``), a vLLM image (name
matching ``sim_pattern``: vLLM's and llm-d's) is played by testbed's simulator instead
(``kubelet.sim_stand_in``).

Every other image is *unknown*: the kubelet runs no process for it and moves the container
through KWOK-like stages instead (see ``kubelet.container``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.emulator.kubelet.sim_stand_in import SimStandInError, sim_argv
from testbed.emulator.kubelet.stand_in import stand_in_argv

VLLM_ENTRY = ("-m", "vllm.entrypoints.openai.api_server")
VLLM_PYTHON_ENV = "TESTBED_VLLM_PYTHON"
_REPO = Path(__file__).resolve().parents[4]  # src/testbed/emulator/kubelet/images.py


@dataclass(frozen=True)
class ImageRules:
    """How image names map to host interpreters (regular expressions, searched in the name)."""

    testbed_pattern: str = r"(^|/)testbed([:@]|$)"
    vllm_pattern: str = r"vllm"
    tgi_pattern: str = r"text-generation-inference|text-gen-server"
    #: Play TGI/TGIS images with testbed's reference server (else they are unknown).
    tgi_stand_in: bool = False
    #: vLLM images played by the simulator with ``sim_stand_in`` (vLLM's and llm-d's).
    sim_pattern: str = r"vllm|(^|/)llm-d(-cuda|-cpu|-xpu|-rocm|-aws|-gke)?([:@]|$)"
    #: Play vLLM images with testbed's simulator (else they run the vLLM venv).
    sim_stand_in: bool = False
    #: The vLLM interpreter; None: resolved as the module docstring says.
    vllm_python: Path | None = None
    python: str = field(default=sys.executable)

    def kind(self, image: str) -> str:
        """``testbed``, ``sim`` or ``tgi`` (played by a stand-in), ``vllm`` or ``unknown``."""
        if re.search(self.testbed_pattern, image):
            return "testbed"
        if self.sim_stand_in and re.search(self.sim_pattern, image):
            return "sim"
        if re.search(self.vllm_pattern, image):
            return "vllm"
        if self.tgi_stand_in and re.search(self.tgi_pattern, image):
            return "tgi"
        return "unknown"

    def resolve_vllm_python(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """The interpreter that has vLLM, or None when none is installed.

        An explicit choice (``vllm_python``, else ``$TESTBED_VLLM_PYTHON``) is the only
        candidate: a wrong path is reported, never silently replaced by another venv.
        """
        env = os.environ if environ is None else environ
        explicit = self.vllm_python or (
            Path(env[VLLM_PYTHON_ENV]).expanduser() if env.get(VLLM_PYTHON_ENV) else None
        )
        candidates = (
            [explicit]
            if explicit
            else [_REPO / ".venv-vllm/bin/python", Path.cwd() / ".venv-vllm/bin/python"]
        )
        return next((path for path in candidates if path.exists()), None)


class NotRunnable(Exception):
    """A known image whose command cannot run here (the container fails to start)."""


def host_argv(container: Mapping[str, Any], rules: ImageRules) -> tuple[list[str] | None, str]:
    """The host argv for ``container`` (None when its image is unknown: no process) and a
    note for the top of its log (what a stand-in plays; else empty)."""
    image = str(container.get("image") or "")
    command = [str(part) for part in container.get("command") or []]
    args = [str(part) for part in container.get("args") or []]
    kind = rules.kind(image)
    if kind == "testbed":
        return _testbed_argv(command, args, rules), ""
    if kind == "vllm":
        return _vllm_argv(command, args, rules), ""
    if kind == "tgi":
        return stand_in_argv(rules.python, image, command, args)
    if kind == "sim":
        try:
            return sim_argv(rules.python, container)
        except (SimStandInError, ValueError) as exc:
            raise NotRunnable(f"{image} played by the simulator: {exc}") from None
    return None, ""


def _testbed_argv(command: Sequence[str], args: Sequence[str], rules: ImageRules) -> list[str]:
    # The image's entry point is ``testbed``: args alone are a testbed command line.
    entry = list(command) or ["testbed"]
    name = Path(entry[0]).name
    if name == "testbed":
        return [rules.python, "-m", "testbed", *entry[1:], *args]
    if name.startswith("python"):
        return [rules.python, *entry[1:], *args]
    return [*entry, *args]


def _vllm_argv(command: Sequence[str], args: Sequence[str], rules: ImageRules) -> list[str]:
    python = rules.resolve_vllm_python()
    if python is None:
        raise NotRunnable(
            f"no vLLM interpreter: run `make vllm` or set {VLLM_PYTHON_ENV} to the python of a"
            " virtual environment with vLLM installed"
        )
    entry = list(command)
    if not entry:
        argv = [str(python), *VLLM_ENTRY, *args]
    elif Path(entry[0]).name.startswith("python"):
        argv = [str(python), *entry[1:], *args]
    elif Path(entry[0]).name == "vllm" and entry[1:2] == ["serve"]:
        rest = [*entry[2:], *args]
        model = [] if not rest or rest[0].startswith("-") else ["--model", rest.pop(0)]
        argv = [str(python), *VLLM_ENTRY, *model, *rest]
    else:
        argv = [*entry, *args]
    # The image listens on 0.0.0.0; here it must stay on loopback.
    if VLLM_ENTRY[1] in argv and not any(a == "--host" or a.startswith("--host=") for a in argv):
        argv += ["--host", "127.0.0.1"]
    return argv
