"""TGI and TGIS images played by testbed's reference server (``--tgi-stand-in``).

No TGI or TGIS binary runs on this machine, so with the flag the process-kubelet starts
``testbed serve hf`` in their place, speaking the protocols the image would: TGI's
``/generate`` and OpenAI routes for ``text-generation-launcher --model-id …``, TGIS's
``fmaas.GenerationService`` over gRPC (HTTP for ``/health`` and ``/metrics``) for
``--model-name … --grpc-port …``. The launcher flags that have a reference-server
equivalent are translated (model, ports, dtype, batch size, sequence length); the first
line of the container's log says which image is played and which flags were ignored, so
nobody mistakes the stand-in for the server. Its latency is the reference server's, not
TGI's: a rehearsal of the campaign, not a benchmark of TGI.

The launchers' flags are not stated here: :class:`TgiStandIn` is handed each launcher's
table (generic parameter → flag) by whoever builds it — ``testbed cluster emulate`` passes
the tables testbed's TGI and TGIS adapters write their command lines from — and reads them
backwards. What is stated here is how the reference server takes each generic parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Generic parameter → the reference server's flag (``--…``) or ``--set`` key: what the
#: stand-in can play (``testbed serve hf``'s own command line). Others are ignored, named.
PLAYED = {
    "model": "--model",
    "port": "--port",
    "grpc_port": "--grpc-port",
    "dtype": "--dtype",
    "max_batch_size": "max_batch_size",
    "max_model_len": "max_model_len",
}


@dataclass(frozen=True)
class Launcher:
    """One launcher's command line, as the server kind's adapter writes it."""

    #: Generic parameter (or ``model``, ``port``, ``grpc_port``) → the launcher's flag.
    flags: Mapping[str, str]
    #: The launcher's flags that take no value.
    switches: frozenset[str] = frozenset()

    def played(self) -> dict[str, str]:
        """Launcher flag → the reference server's flag or ``--set`` key."""
        return {flag: PLAYED[name] for name, flag in self.flags.items() if name in PLAYED}


@dataclass(frozen=True)
class TgiStandIn:
    """Plays TGI and TGIS images (a ``kubelet.images.StandIn``)."""

    tgi: Launcher
    tgis: Launcher

    def __call__(
        self, python: str, image: str, command: Sequence[str], args: Sequence[str]
    ) -> tuple[list[str], str]:
        """``(argv of testbed serve hf, the note for the container's log)`` for a TGI or TGIS
        container, from its launcher command line."""
        words = [*command[1:], *args] if command else [*args]
        pairs = flag_pairs(words, self.tgi.switches | self.tgis.switches)
        only_tgis = {self.tgis.flags["model"], self.tgis.flags["grpc_port"]}
        tgis = any(name in only_tgis for name, _ in pairs)
        table = (self.tgis if tgis else self.tgi).played()
        protocols = "tgis" if tgis else "tgi,openai"
        argv = [python, "-m", "testbed", "serve", "hf", "--protocols", protocols]
        sets = [] if tgis else ["served_model_name=tgi"]  # what TGI's OpenAI routes report
        ignored = []
        for name, value in pairs:
            target = table.get(name)
            if target is None:
                ignored.append(f"{name} {value}".strip())
            elif target.startswith("--"):
                argv += [target, value]
            else:
                sets.append(f"{target}={value}")
        argv += [part for item in sets for part in ("--set", item)]
        note = (
            f"testbed cluster emulate --tgi-stand-in: {image} is played by testbed's reference"
            f" server ({'TGIS gRPC' if tgis else 'TGI HTTP'})"
            + (f"; ignored: {', '.join(ignored)}" if ignored else "")
        )
        return argv, note


def flag_pairs(words: Sequence[str], switches: frozenset[str]) -> list[tuple[str, str]]:
    """``--flag value`` / ``--flag=value`` / ``--switch`` as (flag, value) pairs."""
    pairs, i = [], 0
    while i < len(words):
        name, has_value, value = words[i].partition("=")
        i += 1
        takes_next = not has_value and name not in switches and i < len(words)
        if takes_next and not words[i].startswith("--"):
            value, i = words[i], i + 1
        pairs.append((name, value))
    return pairs
