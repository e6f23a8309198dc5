"""Which images the process-kubelet can run, and the host command line for a container of one.

Two kinds of image are *known* and run as local processes:

- testbed's own image (name matching ``testbed_pattern``): ``testbed …`` runs as
  ``sys.executable -m testbed …`` of the emulator's own interpreter, ``python …`` with that
  interpreter, anything else as written;
- a vLLM image (name matching ``vllm_pattern``): the image's entry point
  ``python3 -m vllm.entrypoints.openai.api_server`` runs with the vLLM venv's interpreter,
  followed by the container's args. Which interpreter is not the emulator's to decide: it
  is handed the lookup testbed's vLLM adapter uses (``vllm_python``; ``--vllm-python``,
  ``$TESTBED_VLLM_PYTHON``, ``.venv-vllm`` of the checkout or of the current directory).

Handed a ``tgi_stand_in`` (``--tgi-stand-in``), a TGI or TGIS image (name matching
``tgi_pattern``) is a third family: the stand-in plays it (``standins.tgi``, testbed's
reference server).

Handed a ``sim_stand_in`` (``--gateway-stand-in``, ``--vllm-stand-in``), a vLLM image (name
matching ``sim_pattern``: vLLM's and llm-d's) is played by it instead (``standins.vllm_sim``,
testbed's simulator).

Handed ``pod_stand_ins`` (``--kserve-stand-in``: KServe's model server and storage
initializer, ``standins.kserve_images``), an image one of them ``plays`` is played by it with
what the kubelet knows of the pod: the container's environment, its ports on this host and
its mounts (family ``pod``). Such an image may bind ports it does not declare (KServe's model
server listens on 8080 with no ``ports:``): ``listens`` names them, and the sandbox gives them
host ports as it does declared ones.

Every other image is *unknown*: the kubelet runs no process for it and moves the container
through KWOK-like stages instead (see ``kubelet.container``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubefacts.errors import Error

VLLM_ENTRY = ("-m", "vllm.entrypoints.openai.api_server")


class StandIn(Protocol):
    """Plays an image that has no process of its own here: ``(host argv, log note)``."""

    def __call__(
        self, python: str, image: str, command: Sequence[str], args: Sequence[str]
    ) -> tuple[list[str], str]: ...


class PodStandIn(Protocol):
    """Plays an image with what the kubelet knows of its pod (``--kserve-stand-in``)."""

    def plays(self, image: str) -> bool: ...

    def listens(self, image: str) -> tuple[int, ...]:
        """Ports the image's process binds without declaring them."""
        ...

    def __call__(
        self,
        python: str,
        image: str,
        command: Sequence[str],
        args: Sequence[str],
        env: Mapping[str, str],
        ports: Mapping[int, int],
        mounts: Mapping[str, str],
    ) -> tuple[list[str], str]:
        """``(host argv, log note)``; ``ports``: container port → host port, ``mounts``:
        mount path → host directory; ``command``/``args`` already moved onto the host."""
        ...


@dataclass(frozen=True)
class ImageRules:
    """How image names map to host interpreters (regular expressions, searched in the name)."""

    testbed_pattern: str = r"(^|/)testbed([:@]|$)"
    vllm_pattern: str = r"vllm"
    tgi_pattern: str = r"text-generation-inference|text-gen-server"
    #: What plays TGI/TGIS images (``standins.tgi``, handed in for ``--tgi-stand-in``);
    #: None: they are unknown.
    tgi_stand_in: StandIn | None = None
    #: The vLLM interpreter lookup, handed in (the vLLM adapter's): the interpreter, or a
    #: Error saying why there is none. None: vLLM images cannot start here.
    vllm_python: Callable[[], Path] | None = None
    #: What plays vLLM images matching ``sim_pattern`` instead of vLLM (``standins.vllm_sim``,
    #: handed in for ``--vllm-stand-in``); None: they run vLLM.
    sim_stand_in: StandIn | None = None
    sim_pattern: str = r"vllm|(^|/)llm-d(-cuda|-cpu|-xpu|-rocm|-aws|-gke)?([:@]|$)"
    #: What plays images with their pod's context (``standins.kserve_images`` for
    #: ``--kserve-stand-in``); checked before every other family.
    pod_stand_ins: tuple[PodStandIn, ...] = ()
    python: str = field(default=sys.executable)

    def pod_stand_in(self, image: str) -> PodStandIn | None:
        """The pod stand-in that plays ``image``, if any."""
        return next((s for s in self.pod_stand_ins if s.plays(image)), None)

    def listens(self, image: str) -> tuple[int, ...]:
        """Ports ``image``'s process binds undeclared (a pod stand-in's)."""
        played = self.pod_stand_in(image)
        return played.listens(image) if played is not None else ()

    def family(self, image: str) -> str:
        """The image's family (not a server kind): ``testbed``, ``pod``, ``sim`` or ``tgi``
        (played by a stand-in), ``vllm`` or ``unknown``."""
        if self.pod_stand_in(image) is not None:
            return "pod"
        if re.search(self.testbed_pattern, image):
            return "testbed"
        if self.sim_stand_in is not None and re.search(self.sim_pattern, image):
            return "sim"
        if re.search(self.vllm_pattern, image):
            return "vllm"
        if self.tgi_stand_in is not None and re.search(self.tgi_pattern, image):
            return "tgi"
        return "unknown"


class NotRunnable(Exception):
    """A known image whose command cannot run here (the container fails to start)."""


def host_argv(container: Mapping[str, Any], rules: ImageRules) -> tuple[list[str] | None, str]:
    """The host argv for ``container`` (None when its image is unknown: no process) and a
    note for the top of its log (what a stand-in plays; else empty)."""
    image = str(container.get("image") or "")
    command = [str(part) for part in container.get("command") or []]
    args = [str(part) for part in container.get("args") or []]
    family = rules.family(image)
    if family == "testbed":
        return _testbed_argv(command, args, rules), ""
    if family == "vllm":
        return _vllm_argv(command, args, rules), ""
    if family == "tgi" and rules.tgi_stand_in is not None:
        return rules.tgi_stand_in(rules.python, image, command, args)
    if family == "sim" and rules.sim_stand_in is not None:
        return rules.sim_stand_in(rules.python, image, command, args)
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
    if rules.vllm_python is None:
        raise NotRunnable("no vLLM interpreter: the emulator was given no way to find one")
    try:
        python = rules.vllm_python()
    except Error as exc:
        raise NotRunnable(f"no vLLM interpreter: {exc}") from exc
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
