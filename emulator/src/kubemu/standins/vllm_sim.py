"""vLLM images played by testbed's simulator (``--gateway-stand-in``, or ``--vllm-stand-in``).

A routing experiment needs several model servers whose state (queue, KV cache, prefix cache)
differs between them; four real vLLM processes do not fit on a laptop. With the flag, the
process-kubelet runs ``testbed serve sim`` for a vLLM image (llm-d's included). The container's
command line is read as vLLM reads it (:mod:`kubefacts.vllm_argv`: its aliases, both
``--flag=value`` and ``--flag value``, and *its defaults*), and what vLLM would run with is
played:

================================  ===========================================================
vLLM                              simulator
================================  ===========================================================
``--port``                        ``--port`` (already moved to the pod's host port)
``vllm serve M`` / ``--model``    the served model name (the first ``--served-model-name``
                                  wins)
``--max-num-seqs``                ``max_concurrency`` (vLLM's default: 256 on a GPU, 128 per
                                  rank on a CPU)
``--max-model-len``               ``max_model_len`` (unset: the model's own, unknown here —
                                  no limit)
``--block-size``                  ``block_size`` (vLLM's default: 16 on a GPU, 128 on a CPU)
``--[no-]enable-prefix-caching``  ``prefix_caching`` (vLLM's default: on)
``--num-gpu-blocks-override N``   ``kv_cache_tokens = N × block_size``
``-tp`` / ``--dtype``             ``tensor_parallel`` / ``dtype``: labels, nothing more
================================  ===========================================================

The platform is the image's: a CPU build when its name says ``cpu``, else a GPU build.
Without ``--num-gpu-blocks-override`` vLLM sizes its KV cache from the device's memory
(``--gpu-memory-utilization``, 0.92) — there is no device here, so the stand-in holds
:data:`DEFAULT_KV_TOKENS` tokens unless the container's ``TESTBED_SIM_PARAMS`` sets
``kv_cache_tokens``; the note says so. Any other flag is not played, and said: the first line
of the container's log names the image, what is played and what is not, and the simulator
exposes the same list on its ``/metrics`` (``testbed_sim:not_played_info``) so that a run's
server metrics name it in the treatment. A line vLLM itself would refuse makes the container
exit 2 with vLLM's reason.

The simulator's own knobs (latency model, jitter …) come from ``TESTBED_SIM_PARAMS``, a JSON
object of :class:`~testbed.config.sim.SimParams` fields, which ``testbed serve sim
--params-env`` reads; the flags above win over it, the stand-in's KV size does not. A real
vLLM ignores the variable, so the same manifest runs on a cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from kubefacts.vllm_argv import (
    Platform,
    VllmArgs,
    VllmArgvError,
    lora_names,
    read,
    server_words,
)

ENV = "TESTBED_SIM_PARAMS"
#: KV-cache tokens per pod when nothing sizes it (vLLM would measure the GPU's memory).
DEFAULT_KV_TOKENS = 131072
#: What the stand-in plays (vllm_argv dest names); every other flag given is not played.
PLAYED = frozenset(
    {
        "model",
        "served_model_name",
        "host",  # the kubelet's business: the pod's address
        "port",
        "max_num_seqs",
        "max_model_len",
        "block_size",
        "enable_prefix_caching",
        "num_gpu_blocks_override",
        "tensor_parallel_size",
        "dtype",
        "enable_lora",
        "lora_modules",  # the adapters' names, served with the model's latency
    }
)


def platform_of(image: str) -> str:
    """``cpu`` for a CPU build of vLLM (its image name says so), else ``gpu``."""
    return "cpu" if re.search(r"cpu", image, re.IGNORECASE) else "gpu"


def vllm_sim_stand_in(
    python: str, image: str, command: Sequence[str], args: Sequence[str]
) -> tuple[list[str], str]:
    """``(argv of testbed serve sim, the note for the container's log)`` for a vLLM container
    whose command and args are already relocated to this host (a ``kubelet.images.StandIn``)."""
    head = f"testbed cluster emulate (vLLM stand-in): {image} is played by testbed's simulator"
    try:
        line = read(server_words(command, args))
    except VllmArgvError as exc:  # vLLM would exit 2 with its usage line: so does the pod
        message = f"{head}, but vLLM refuses its command line: {exc}"
        return [python, "-c", f"import sys; sys.stderr.write({message!r} + '\\n'); sys.exit(2)"], (
            message
        )
    platform: Platform = "cpu" if platform_of(image) == "cpu" else "gpu"
    params, kv_said = _params(line, platform)
    missing = _not_played(line)
    argv = [python, "-m", "testbed", "serve", "sim", "--params-env", ENV]
    port = line.given.get("port")
    if port is not None:
        argv += ["--port", str(port)]
    argv += ["--model", line.served_name]
    if "kv_cache_tokens" not in params:  # below $TESTBED_SIM_PARAMS: it may size the cache
        argv += ["--default", f"kv_cache_tokens={DEFAULT_KV_TOKENS}"]
    if missing:
        argv += ["--set", f"not_played={json.dumps(missing)}"]
    argv += [part for k, v in params.items() for part in ("--set", f"{k}={json.dumps(v)}")]
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if k != "protocols")
    note = f"{head} (vLLM {platform.upper()} build: {shown}; {kv_said}; more from ${ENV})" + (
        f"; not played: {', '.join(missing)}" if missing else ""
    )
    return argv, note


def _params(line: VllmArgs, platform: Platform) -> tuple[dict[str, Any], str]:
    """The simulator parameters vLLM's values become, and how the KV cache is sized."""
    block = int(line.value("block_size", platform))
    params: dict[str, Any] = {
        "protocols": ["openai"],
        "max_concurrency": int(line.value("max_num_seqs", platform)),
        "block_size": block,
        "prefix_caching": bool(line.value("enable_prefix_caching", platform)),
        "tensor_parallel": int(line.value("tensor_parallel_size", platform)),
    }
    length = line.given.get("max_model_len")
    if length is not None and length > 0:  # -1/auto: fit the memory, which is not modelled
        params["max_model_len"] = length
    modules = line.given.get("lora_modules")
    if modules and line.value("enable_lora"):
        params["models"] = {name: {} for name in lora_names(modules)}
    blocks = line.given.get("num_gpu_blocks_override")
    if blocks is not None:
        params["kv_cache_tokens"] = blocks * block
        return params, f"KV cache {blocks} blocks (--num-gpu-blocks-override)"
    utilisation = line.value("gpu_memory_utilization", platform)
    kv_said = (
        f"KV cache {DEFAULT_KV_TOKENS} tokens unless ${ENV} sets kv_cache_tokens — vLLM would"
        f" size it from --gpu-memory-utilization {utilisation:g} of the device's memory"
    )
    return params, kv_said


def _not_played(line: VllmArgs) -> list[str]:
    """The flags given that the simulator does not play (vLLM's names), and the unknown ones."""
    out = [_shown(dest, value) for dest, value in line.given.items() if dest not in PLAYED]
    if len(line.value("served_model_name")) > 1:
        out.append(f"--served-model-name beyond {line.served_name}")
    length = line.given.get("max_model_len")
    if length is not None and length <= 0:
        out.append("--max-model-len auto")
    if line.given.get("lora_modules") and not line.value("enable_lora"):
        out.append("--lora-modules without --enable-lora")
    return out + list(line.unknown)


def _shown(dest: str, value: Any) -> str:
    """A flag as vLLM spells it: ``--x 1``, ``--x`` (on), ``--no-x`` (off)."""
    name = dest.replace("_", "-")
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no-{name}"
    return f"--{name} {value}"
