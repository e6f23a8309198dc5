"""vLLM images played by testbed's simulator (``--gateway-stand-in``, or ``--vllm-stand-in``).

A routing experiment needs several model servers whose state (queue, KV cache, prefix cache)
differs between them; four real vLLM processes do not fit on a laptop. With the flag, the
process-kubelet runs ``testbed serve sim`` for a vLLM image (llm-d's included) and translates
the vLLM flags that have a simulator equivalent:

=================================  ==========================================================
vLLM flag                          simulator
=================================  ==========================================================
``--port``                         ``--port`` (already moved to the pod's host port)
``--model`` / ``vllm serve M``     the served model name (``--served-model-name`` wins)
``--max-num-seqs``                 ``max_concurrency``
``--max-model-len``                ``max_model_len``
``--block-size``                   ``block_size`` (default 16, vLLM's)
``--enable-prefix-caching``        ``prefix_caching: true`` (``--no-enable-prefix-caching``)
``--num-gpu-blocks-override N``    ``kv_cache_tokens = N × block_size``
=================================  ==========================================================

The simulator's own knobs (latency model, jitter …) come from the container's environment
variable ``TESTBED_SIM_PARAMS``, a JSON object of :class:`~testbed.config.sim.SimParams`
fields, which ``testbed serve sim --params-env`` reads (the flags above win); a real vLLM
ignores it, so the same manifest runs on a cluster. Prefix caching needs a capacity: without
``--num-gpu-blocks-override`` it is left to ``TESTBED_SIM_PARAMS``'s ``kv_cache_tokens``, and
the simulator refuses to start when neither gives one. The first line of the container's log
names the image played and the flags ignored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from testbed.emulator.standins.tgi import flag_pairs

ENV = "TESTBED_SIM_PARAMS"
_SWITCHES = frozenset(
    {
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--trust-remote-code",
        "--disable-log-requests",
        "--disable-log-stats",
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
    }
)
#: vLLM flag → (SimParams field, its value from the flag's); ``model`` and ``blocks`` are
#: resolved after the loop.
_FLAGS: dict[str, tuple[str, Any]] = {
    "--model": ("model", str),
    "--served-model-name": ("served", lambda v: v.split()[0] if v else ""),
    "--block-size": ("block_size", int),
    "--enable-prefix-caching": ("prefix_caching", lambda _v: True),
    "--no-enable-prefix-caching": ("prefix_caching", lambda _v: False),
    "--num-gpu-blocks-override": ("blocks", int),
    "--max-num-seqs": ("max_concurrency", int),
    "--max-model-len": ("max_model_len", int),
}


def _words(command: Sequence[str], args: Sequence[str]) -> list[str]:
    """The vLLM arguments after the entry point (``vllm serve``, ``python -m …api_server``)."""
    words = [*command, *args]
    for i, word in enumerate(words):
        if word == "serve" or word.endswith("api_server"):
            return words[i + 1 :]
    return [*args] if command else words


def vllm_sim_stand_in(
    python: str, image: str, command: Sequence[str], args: Sequence[str]
) -> tuple[list[str], str]:
    """``(argv of testbed serve sim, the note for the container's log)`` for a vLLM container
    whose command and args are already relocated to this host (a ``kubelet.images.StandIn``)."""
    words = _words(command, args)
    if words and not words[0].startswith("-"):
        words = ["--model", *words]
    params: dict[str, Any] = {"protocols": ["openai"]}
    argv = [python, "-m", "testbed", "serve", "sim", "--params-env", ENV]
    ignored = []
    for name, value in flag_pairs(words, _SWITCHES):
        if name == "--port":
            argv += ["--port", value]
        elif name in _FLAGS:
            key, convert = _FLAGS[name]
            params[key] = convert(value)
        else:
            ignored.append(f"{name} {value}".strip())
    blocks, model = params.pop("blocks", None), params.pop("model", "")
    served = params.pop("served", "") or model
    if blocks is not None:
        params["kv_cache_tokens"] = blocks * int(params.get("block_size", 16))
    if served:
        argv += ["--model", served]
    argv += [part for k, v in params.items() for part in ("--set", f"{k}={json.dumps(v)}")]
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if k != "protocols")
    note = (
        f"testbed cluster emulate --gateway-stand-in: {image} is played by testbed's simulator"
        f" ({shown}; more from ${ENV})" + (f"; ignored: {', '.join(ignored)}" if ignored else "")
    )
    return argv, note
