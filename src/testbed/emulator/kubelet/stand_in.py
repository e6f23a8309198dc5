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
"""

from __future__ import annotations

from collections.abc import Sequence

#: launcher flag → the reference server's flag (``--…``) or ``--set`` key.
_COMMON = {"--port": "--port", "--max-batch-size": "max_batch_size"}
_TGI = {
    **_COMMON,
    "--model-id": "--model",
    "--dtype": "--dtype",
    "--max-total-tokens": "max_model_len",
}
_TGIS = {
    **_COMMON,
    "--model-name": "--model",
    "--grpc-port": "--grpc-port",
    "--dtype-str": "--dtype",
    "--max-sequence-length": "max_model_len",
}
#: TGI launcher flags that take no value.
_SWITCHES = frozenset({"--trust-remote-code", "--disable-custom-kernels", "--json-output"})


def flag_pairs(words: Sequence[str], switches: frozenset[str] = _SWITCHES) -> list[tuple[str, str]]:
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


def stand_in_argv(
    python: str, image: str, command: Sequence[str], args: Sequence[str]
) -> tuple[list[str], str]:
    """``(argv of testbed serve hf, the note for the container's log)`` for a TGI or TGIS
    container, from its launcher command line."""
    words = [*command[1:], *args] if command else [*args]
    pairs = flag_pairs(words)
    tgis = any(name in ("--model-name", "--grpc-port") for name, _ in pairs)
    table = _TGIS if tgis else _TGI
    argv = [python, "-m", "testbed", "serve", "hf", "--protocols", "tgis" if tgis else "tgi,openai"]
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
